"""tune's cost from what its bench counted, and the same counts at another start cost (a simulation)."""

from __future__ import annotations

import pytest

from eaglezoo.tune.cost import GPU_START_S, cost_of, simulate, simulations
from eaglezoo.tune.measure import Bench, Samples
from eaglezoo.tune.rule import SamplingRule
from eaglezoo.verify.counters import SpecDecodeCounters
from eaglezoo.verify.vllm_process import PassEvent, RequestResult


def samples(walls: list[float]) -> Samples:
    s = Samples(passes_per_repeat=1)
    for wall in walls:
        request = RequestResult(tokens=[1] * 10, e2e_s=wall, ttft_s=None, accepted=None)
        s.add([PassEvent(concurrency=1, wall_s=wall, requests=[request], counters=SpecDecodeCounters.none())])
    return s


def test_the_cost_counts_starts_measuring_and_repeats_per_cell():
    bench = Bench(session=None, work=None, rule=SamplingRule())  # type: ignore[arg-type]  # counts only
    bench.starts, bench.starts_s, bench.engine_s = 9, 90.0, 120.0
    rows = {0: {1: samples([1.0, 2.0, 3.0])}, 1: {1: samples([1.0, 1.0, 1.0, 1.0, 1.0])}}
    cost = cost_of(bench, rows, {1: samples([0.5, 0.5, 0.5])}, wall_s=150.0)
    assert (cost.engine_starts, cost.start_s, cost.measure_s, cost.wall_s, cost.repeats) == (9, 90.0, 30.0, 150.0, 11)
    assert [(x.k, x.concurrency, x.repeats) for x in cost.repeats_per_cell or []] == [(0, 1, 3), (1, 1, 5)]
    # one engine per K and the confirmation's, each at the mean start (10 s); one median pass per cell: 2 + 1 + 0.5
    assert cost.one_pass_starts == 3 and cost.one_pass_s == pytest.approx(3 * 10.0 + 3.5)


def test_a_simulation_replaces_the_measured_starts_and_keeps_the_rest():
    bench = Bench(session=None, work=None, rule=SamplingRule())  # type: ignore[arg-type]
    bench.starts, bench.starts_s, bench.engine_s = 10, 100.0, 160.0
    cost = cost_of(bench, {0: {1: samples([2.0] * 3)}, 1: {1: samples([2.0] * 3)}}, {1: samples([2.0] * 3)}, 200.0)
    at_2_min = simulate(cost, 120.0)
    assert at_2_min is not None
    assert at_2_min.tune_s == pytest.approx(200.0 - 100.0 + 10 * 120.0)
    assert at_2_min.one_pass_s == pytest.approx(3 * 120.0 + 6.0)
    assert [x.start_s for x in simulations(cost)] == list(GPU_START_S) == [30.0, 120.0, 600.0]
