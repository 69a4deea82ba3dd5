"""tune's budget: the minimum (one pass per cell at the cost measured per start), the rounds it allows, the plan
it says, and a decision from rounds the budget cut: too close to call at every load, never a winner from one
repeat (so two identical runs cannot disagree on it)."""

from __future__ import annotations

import pytest

from eaglezoo.errors import UsageError
from eaglezoo.tune.budget import Budget, planned_starts
from eaglezoo.tune.decide import decide
from eaglezoo.tune.measure import Bench
from eaglezoo.tune.model import Cell
from eaglezoo.tune.rule import SamplingRule


def counted(starts: int, engine_s: float, starts_s: float = 0.0, runs: int | None = None, fit: int = 1) -> Bench:
    """A bench's counts only: `starts` engine starts taking `starts_s` of `engine_s`, over `runs` cells' runs (one
    per start unless given), `fit` engines held at once."""
    bench = Bench(session=None, work=None, rule=SamplingRule())  # type: ignore[arg-type]  # its counts only
    bench.starts, bench.engine_s, bench.starts_s, bench.runs, bench.fit = (
        starts,
        engine_s,
        starts_s,
        runs or starts,
        fit,
    )
    bench.warmups_s = 0.0
    return bench


def test_a_budget_below_one_pass_per_cell_is_refused_with_the_minimum():
    budget = Budget(limit_s=60.0, k_max=2)
    with pytest.raises(UsageError) as refused:
        budget.check_minimum(counted(1, 20.0))  # 4 engines (K = 0, 1, 2, the confirmation) of 20 s: 80 s
    assert "below one pass per cell here: 4 engine starts of about 20 s each, about 80 s" in refused.value.message
    assert refused.value.hint == "give --budget 2 (minutes) or more"
    Budget(limit_s=80.0, k_max=2).check_minimum(counted(1, 20.0))  # exactly the minimum is enough


def test_the_budget_allows_a_round_only_with_the_confirmation_still_paid_for():
    budget = Budget(limit_s=100.0, k_max=2)
    budget.opened -= 40.0  # 40 s spent
    assert budget.allows(counted(2, 20.0), 2)  # 40 + (2 + 1) x 10 s
    assert not budget.allows(counted(2, 20.0), 6)  # 40 + 7 x 10 s
    assert Budget(limit_s=None, k_max=2).allows(counted(2, 20.0), 10**6)


def test_the_plan_says_the_starts_and_their_time():
    assert planned_starts(2, 3, 9) == (10, 28)
    plan = Budget(limit_s=3600.0, k_max=2).plan(counted(1, 30.0), 2, 3, 9)
    assert plan == (
        "tune plans 10 engine starts (up to 28 if loads stay contested), about 5.0 min (to 14.0 min) at 30 s per "
        "start as measured; budget 60.0 min"
    )


class Held:
    hold = 4  # K = 0..2 and the confirmation, as tune asks vLLM's worker


def test_with_every_engine_kept_warm_the_plan_starts_each_k_once():
    assert planned_starts(2, 3, 9, warm=True) == (4, 4)
    bench = counted(1, 20.0, starts_s=5.0, fit=6)  # a start of 5 s, a run of 15 s; 6 engines fit in memory
    bench.session = Held()  # type: ignore[assignment]
    assert bench.keeps(3)
    plan = Budget(limit_s=None, k_max=2).plan(bench, 2, 3, 9)
    assert plan == (  # 4 starts of 5 s and 10 runs of 15 s; up to 28 runs if every load stays contested
        "tune plans 4 engine starts (K = 0..2 each started once and kept warm across rounds, the confirmation's), "
        "10 runs of a cell (up to 28 if loads stay contested), about 2.8 min (to 7.3 min) at 5 s per start and 15 s "
        "per run as measured"
    )
    budget = Budget(limit_s=100.0, k_max=2)
    budget.opened -= 40.0  # 40 s spent: a round of 3 warm runs (45 s) and the confirmation (20 s) do not fit
    assert not budget.allows(bench, 3) and budget.allows(bench, 2)
    bench.fit = 2  # two engines fit, three are needed: one at a time, as before
    assert not bench.keeps(3) and Budget(limit_s=None, k_max=2).plan(bench, 2, 3, 9).startswith(
        "tune plans 10 engine starts (up to 28"
    )


def one_repeat(k: int, c: int, tokens_per_s: float) -> Cell:
    return Cell(
        k=k,
        concurrency=c,
        output_tokens_per_s=tokens_per_s,
        mean_tpot_ms=None,
        acceptance_length=None,
        repeats=[tokens_per_s],
        interval=[tokens_per_s, tokens_per_s],
    )


def test_rounds_the_budget_cut_decide_nothing():
    grid = [one_repeat(k, c, 100.0 * (1 + k)) for k in range(3) for c in (1, 4)]  # K=2 far ahead, once measured
    assert [(d.k, d.too_close) for d in decide(grid, [1, 4], None)] == [(2, False), (2, False)]
    cut = decide(grid, [1, 4], None, min_repeats=3)
    assert [(d.k, d.too_close, d.contenders, d.settled_after) for d in cut] == [(0, True, [0, 1, 2], 1)] * 2


def test_the_report_says_how_the_engines_were_held():
    from eaglezoo.tune.run import held_note
    from eaglezoo.verify.vllm_process import EngineEvent

    cpu = EngineEvent(
        version="0.32.0", device="cpu (2 cores)", dtype="float32", start_s=4.0, fit=2, footprint_bytes=3 << 30
    )
    bench = counted(1, 20.0, starts_s=4.0, fit=2)
    bench.session, bench.engine = Held(), cpu  # type: ignore[assignment]
    assert held_note(bench, 3) == (
        "one engine at a time: 2 of the 3 engines (about 3.0 GiB each) fit in the memory available at the first "
        "start, so every repeat of a K starts its engine again"
    )
    bench.fit = 6
    assert held_note(bench, 3).startswith("every K's engine was started once and kept warm across the rounds (3 held")
    bench.fit, bench.engine = 1, cpu.model_copy(update={"device": "1x NVIDIA H200", "fit": 1})
    assert held_note(bench, 3).startswith(
        "one engine at a time: on a GPU vLLM's engine asks for gpu_memory_utilization"
    )
