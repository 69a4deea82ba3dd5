"""The commands a tune report prints (issue 46): a K table of zeros is no speculation, so it is served without a
speculative config; the drafter is served as serve-config serves it (the converted folder where the engine would
not read it as given); the command to serve with is the production one, the one to diagnose with comes labelled.
The report is built from a measured grid in process (no engine: the figures are what a tune run hands `report`),
saved, and printed by `eaglezoo report` as a user reads it."""

from __future__ import annotations

import json
import shlex

import pytest
from conftest import EXAMPLE, ROOT, run_inprocess
from support.tune_cells import cell as tune_cell

from eaglezoo.serving import DIAGNOSE_LABEL
from eaglezoo.tune.model import Cell, CellRepeats, Cost
from eaglezoo.verify.report import PassTiming
from eaglezoo.verify.vllm_process import EngineEvent

ENTRY = "tiny-example-eagle31"
LEVELS = [1, 2]
TIMING = PassTiming(
    output_tokens=640, wall_s=4.0, output_tokens_per_s=160.0, mean_tpot_ms=6.0, mean_e2e_s=0.4, median_e2e_s=0.4
)


def cell(k: int, c: int, tokens_per_s: float) -> Cell:
    return tune_cell(k, c, [tokens_per_s - 1, tokens_per_s, tokens_per_s + 1], None if k == 0 else 1.5)


@pytest.fixture(scope="module")
def work():
    from eaglezoo.checkpoint.formats.base import ReadOptions
    from eaglezoo.registry.load import lookup
    from eaglezoo.verify.run import WorkloadPlan, prepare

    entry, _ = lookup(ENTRY, None)
    return prepare(
        WorkloadPlan(
            EXAMPLE / "eagle31-safeai",
            EXAMPLE / "target",
            str(EXAMPLE / "target"),
            opts=entry.read_options(ReadOptions()),
            prompts_file=EXAMPLE / "prompts.jsonl",
            max_prompts=4,
            k=2,
            max_new_tokens=16,
            engines=("vllm",),
            max_model_len=256,
        )
    )


def tuned(work, best_k: int, tmp_path, registry_id: str | None = ENTRY, cost: Cost | None = None) -> tuple[dict, str]:
    """A tune report where `best_k` wins at every load by far, saved, and what `eaglezoo report` prints of it."""
    from eaglezoo.tune.report import EntryFacts, Measured, report

    grid = [cell(k, c, 100.0 * c * (3.0 if k == best_k else 1.0 + 0.1 * k)) for k in range(3) for c in LEVELS]
    confirmed = [next(x for x in grid if x.k == best_k and x.concurrency == c) for c in LEVELS]
    measured = Measured(
        engine=EngineEvent(version="0.32.0", device="cpu", dtype="float32", start_s=0.0),
        grid=grid,
        confirmed=confirmed,
        confirmed_timing=[TIMING] * len(LEVELS),
        confirmed_config={},
        cost=cost,
    )
    saved = tmp_path / f"tune-k{best_k}.json"
    saved.write_text(report(work, measured, LEVELS, EntryFacts(registry_id=registry_id)).model_dump_json())
    shown = run_inprocess("report", saved)
    assert shown.code == 0, shown.err
    return json.loads(saved.read_text()), shown.out


def test_a_table_of_zeros_is_served_without_a_speculative_config(work, tmp_path):
    r, out = tuned(work, 0, tmp_path)
    assert {row[2] for row in r["schedule"]} == {0} and r["recommended"] == "no speculation"
    assert r["vllm_command"] == shlex.join(["vllm", "serve", r["target"]]) == r["recommended_command"]
    assert "--speculative-config '" not in out and DIAGNOSE_LABEL not in out, out  # (notes name the flag)


def test_the_commands_serve_the_converted_folder_as_serve_config_does(work, tmp_path):
    r, out = tuned(work, 2, tmp_path)
    sc = run_inprocess("serve-config", ENTRY, "-k", "2", "--json").json()  # run_inprocess's cwd is ROOT, as here
    assert r["convert_command"] == sc["convert_command"] and sc["convert_command"]
    served = shlex.split(r["recommended_command"])
    assert json.loads(served[served.index("--speculative-config") + 1])["model"] == sc["drafter"]
    assert r["vllm_speculative_config"]["model"] == sc["drafter"] == str(ROOT / f"{ENTRY}-eagle31")
    assert r["convert_command"] in out and f"# {DIAGNOSE_LABEL}" in out
    assert "VLLM_SERVER_DEV_MODE" not in r["recommended_command"] + r["vllm_command"]
    lines = out.splitlines()
    dev = [n for n, line in enumerate(lines) if "VLLM_SERVER_DEV_MODE=1 vllm serve" in line]
    assert dev and all(DIAGNOSE_LABEL in lines[n - 1] or DIAGNOSE_LABEL in lines[n] for n in dev), out


def measured_cost(**changes) -> Cost:
    """The counts of a tune on the grid above (3 Ks x 2 loads, 3 repeats each, 3 for the confirmation)."""
    given = {
        "engine_s": 200.0,
        "single_pass_s": 130.0,
        "repeats": 24,
        "engine_starts": 10,
        "start_s": 120.0,
        "measure_s": 80.0,
        "wall_s": 230.0,
        "repeats_per_cell": [CellRepeats(k=k, concurrency=c, repeats=3) for k in range(3) for c in LEVELS],
        "one_pass_starts": 4,
        "one_pass_s": 58.0,
    }
    return Cost(**(given | changes))


def test_tune_says_where_its_time_went_and_simulates_gpu_start_costs(work, tmp_path):
    r, out = tuned(work, 2, tmp_path, cost=measured_cost())
    assert r["cost"]["engine_starts"] == 10 and r["cost"]["wall_s"] == 230.0
    assert "cost: 10 engine starts (120 s), measuring 80 s, wall 230 s, 24 repeats" in out, out
    assert "K=1 c=2 3" in out and "one pass per cell: 4 engine starts, about 58 s" in out, out
    # at 10 min per start: the 110 s outside the starts kept, 10 starts of 600 s; one pass: 4 x 600 + 10 s of passes
    assert "simulated at 10 min per start (not measured): tune 102 min, one pass per cell 40 min (2.5x)" in out, out
    page = tmp_path / "tune.html"
    assert run_inprocess("report", tmp_path / "tune-k2.json", "--html", page).code == 0
    html = page.read_text()
    assert "Where the time went" in html and "Simulated, not measured" in html and "K=2 c=2: 3" in html


def test_an_older_reports_cost_still_reads(work, tmp_path):
    r, out = tuned(work, 2, tmp_path, cost=Cost(engine_s=200.0, single_pass_s=130.0, repeats=24))
    assert r["cost"]["engine_starts"] is None
    assert "engine time 200 s for 24 repeats (one pass per cell: about 130 s)" in out, out


def test_a_cost_that_is_not_the_grids_is_refused_when_read(work, tmp_path):
    r, _ = tuned(work, 2, tmp_path, cost=measured_cost())
    r["cost"]["repeats_per_cell"][0]["repeats"] = 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(r))
    shown = run_inprocess("report", bad)
    assert shown.code == 2 and "repeats_per_cell" in shown.err and len(shown.err.strip().splitlines()) == 1, shown.err
