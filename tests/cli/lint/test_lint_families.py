"""Linting the families beside EAGLE-3: each trap a finding with its code."""

from __future__ import annotations

import json

import pytest
from conftest import run_inprocess
from support import families as F


def codes(result) -> dict[str, str]:
    return {f["code"]: f["severity"] for f in json.loads(result.out)["findings"]}


@pytest.mark.parametrize(
    "make,more,code,severity",
    [
        (F.zlab_dflash, {"mask_token_id": 99}, "mask-token-range", "error"),
        (F.zlab_dflash, {"mask_token_id": 2}, "mask-token-real", "warning"),
        (F.zlab_dflash, {"lm_head_rows": F.VOCAB // 2}, "lm-head-rows", "error"),
        (F.zlab_dflash, {"lm_head_rows": F.VOCAB}, "lm-head-borrowed", "warning"),
        (F.zlab_dflash, {"block_size": 512}, "block-size-context", "error"),
        (F.zlab_dflash, {"target_layer_ids": (0, 7)}, "aux-ids-range", "error"),
    ],
)
def test_family_traps(tmp_path, make, more, code, severity):
    target = F.target(tmp_path / "t")
    cfg = json.loads((target / "config.json").read_text())
    cfg["eos_token_id"] = 2
    (target / "config.json").write_text(json.dumps(cfg))
    r = run_inprocess("lint", make(tmp_path / "d", **more), "--target", target, "--json")
    assert codes(r).get(code) == severity, r.out
    assert r.code == (1 if severity == "error" else 0)


def test_anchor_layout_unstated_in_speculators_dspark(tmp_path):
    run_inprocess("convert", F.deepspec_dspark(tmp_path / "n"), tmp_path / "s", "--to", "speculators")
    r = run_inprocess("lint", tmp_path / "s", "--json")
    assert codes(r).get("anchor-layout") == "warning", r.out


def test_a_clean_dflash_drafter(tmp_path):
    r = run_inprocess("lint", F.zlab_dflash(tmp_path / "d"), "--target", F.target(tmp_path / "t"), "--json")
    assert r.code == 0 and not [c for c, s in codes(r).items() if s == "error"], r.out


def test_a_mask_token_the_chat_template_writes_is_named(tmp_path):
    """The DFlash example's mask token (1023, 'gra' in the tiny tokenizer) written by a target's chat template."""
    import shutil

    from conftest import EXAMPLE

    target = shutil.copytree(EXAMPLE / "target", tmp_path / "target")
    r = run_inprocess("lint", "tiny-example-dflash", "--target", target, "--json")
    assert "mask-token-template" not in r.out  # no template: nothing the template writes
    (target / "chat_template.jinja").write_text(
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}gra{% endfor %}"
    )
    r = run_inprocess("lint", "tiny-example-dflash", "--target", target, "--json")
    found = [f for f in json.loads(r.out)["findings"] if f["code"] == "mask-token-template"]
    assert found and "1023" in found[0]["message"] and found[0]["severity"] == "warning"


@pytest.mark.parametrize(
    "make", [F.zlab_dflash, F.deepspec_dspark, F.peagle_native], ids=["dflash", "dspark", "peagle"]
)
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_holding_nan_or_inf_are_an_error_in_every_family(tmp_path, make, value):
    """The same value check as EAGLE-3's (checkpoint/problems.value_findings): one rule for every family."""
    from safetensors.torch import load_file, save_file

    drafter = make(tmp_path / "d")
    weights = load_file(drafter / "model.safetensors")
    weights["layers.0.mlp.up_proj.weight"][0, 0] = value
    save_file(weights, drafter / "model.safetensors", metadata={"format": "pt"})
    r = run_inprocess("lint", drafter, "--json")
    found = {f["code"]: f for f in json.loads(r.out)["findings"]}
    assert found.get("nan-inf", {}).get("severity") == "error", r.out
    assert "layers.0.mlp.up_proj.weight" in found["nan-inf"]["message"]
    assert r.code == 1


def _speculators_dspark_proposing(tmp_path, k: int):
    """A speculators DSpark drafter (block_size 5, anchor sampled) whose config proposes K=`k` speculative tokens."""
    run_inprocess("convert", F.deepspec_dspark(tmp_path / "n", block_size=5), tmp_path / "s", "--to", "speculators")
    cfg = json.loads((tmp_path / "s" / "config.json").read_text())
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = k
    cfg["sample_from_anchor"] = True  # as speculators trains it: the whole block, 5 tokens, is drafted
    (tmp_path / "s" / "config.json").write_text(json.dumps(cfg))
    return tmp_path / "s"


def test_a_config_proposing_k_beyond_its_block_does_not_lint_clean(tmp_path):
    """Issue 43: speculative_tokens 7 with block_size 5 (1.31 at K=7 against 2.74 at K=5) is the config's own K."""
    r = run_inprocess("lint", _speculators_dspark_proposing(tmp_path, 7), "--json")
    found = [f for f in json.loads(r.out)["findings"] if f["code"] == "config-k-beyond-block"]
    assert r.code == 1 and found and found[0]["severity"] == "error", r.out
    assert "7" in found[0]["message"] and "5" in found[0]["message"]


def test_a_config_proposing_k_within_its_block_is_clean_of_it(tmp_path):
    r = run_inprocess("lint", _speculators_dspark_proposing(tmp_path, 5), "--json")
    assert "config-k-beyond-block" not in codes(r), r.out


def test_lint_holds_a_registry_entry_s_recommended_k_to_the_block(tmp_path):
    """The entry's declared recommended K is a K like the config's own: beyond the block, lint errs."""
    from support.requirements import CARD, declared

    entry = "tiny-example-dflash"
    assert run_inprocess("lint", entry, "--json").code == 0
    registry = declared(tmp_path, entry, {"recommended_k": 40, "context_length": 10**6, "source": CARD})
    r = run_inprocess("lint", entry, "--registry", registry, "--json")
    found = {f["code"]: f for f in json.loads(r.out)["findings"]}
    assert r.code == 1 and found["requirement-k-beyond-block"]["severity"] == "error", r.out
    assert (
        "K=40" in found["requirement-k-beyond-block"]["message"]
        and CARD in found["requirement-k-beyond-block"]["message"]
    )
    assert found["requirement-context"]["severity"] == "warning"


def test_dflash_ids_in_dflash_config_layer_ids(tmp_path):
    """z-lab's dflash_config with boundary ids under layer_ids, where it holds no target_layer_ids (vLLM's V2 runner
    reads them so, eagle3_utils.py:128-134): read as those boundary ids, not refused as missing."""
    folder = F.zlab_dflash(tmp_path / "d")
    cfg = json.loads((folder / "config.json").read_text())
    ids = [i + 1 for i in cfg["dflash_config"].pop("target_layer_ids")]
    cfg["dflash_config"]["layer_ids"] = ids
    (folder / "config.json").write_text(json.dumps(cfg))
    r = run_inprocess("lint", folder, "--json")
    assert "aux-ids-missing" not in codes(r), r.out
    assert f"boundary {ids}" in r.out, r.out
