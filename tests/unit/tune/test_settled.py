"""tune's rule for a decision it can stand by, on cells built by hand as repeats: the interval of a median, two
cells told apart only when their intervals stand apart, too close to call going to the simpler configuration,
the confirmation judged against no speculation and the best static K (a loss is a failure, and the simpler
configuration is recommended), the no-speculation column, and SGLang's adaptive config."""

from __future__ import annotations

import pytest
from support.tune_cells import cell

from eaglezoo.tune import judge, recommendation, schedule_of, sglang_adaptive_config
from eaglezoo.tune.decide import decide
from eaglezoo.tune.measure import latencies
from eaglezoo.tune.report import no_speculation
from eaglezoo.tune.stats import interval, percentile
from eaglezoo.verify.vllm_process import RequestResult


def test_the_interval_of_a_median_is_the_order_statistics_pair_that_reaches_the_level():
    assert interval([3.0, 1.0, 2.0]) == (1.0, 3.0, 0.75)  # three repeats cannot reach 90%: the range, said
    assert interval([5.0, 1.0, 4.0, 2.0, 3.0])[2] == pytest.approx(1 - 2 / 32)  # the range covers 93.75%
    low, high, coverage = interval([float(x) for x in range(1, 10)])
    assert (low, high) == (2.0, 8.0) and coverage == pytest.approx(1 - 2 * 10 / 512)  # x(2), x(8) of nine


def test_the_user_report_804_then_479_is_too_close_to_call_and_takes_no_speculation():
    """The issue's concurrency-4 row: K=0 measured 804 once and 479 the next time, K=1 between them. Measured as
    repeats, K=0's interval holds both: the load is too close to call, and the simpler configuration wins."""
    grid = [cell(0, 4, [804.0, 479.0, 650.0]), cell(1, 4, [700.0, 690.0, 710.0])]
    (d,) = decide(grid, [4])
    assert d.too_close and d.contenders == [0, 1] and d.best_k == 1 and d.k == 0
    assert recommendation([d]) == "no speculation"


def test_a_k_whose_interval_stands_apart_is_chosen_and_settled():
    grid = [cell(0, 1, [100.0, 101.0, 99.0]), cell(1, 1, [150.0, 152.0, 149.0]), cell(2, 1, [120.0, 121.0, 119.0])]
    (d,) = decide(grid, [1])
    assert (d.k, d.too_close, d.contenders, d.settled_after) == (1, False, [1], 3)
    assert d.speedup == pytest.approx(1.5)


def test_within_the_margin_intervals_are_not_told_apart():
    """103 against 100 with tight repeats: apart, but by less than 3% of the lower median: too close."""
    grid = [cell(0, 1, [100.0, 100.2, 99.8]), cell(1, 1, [102.4, 102.5, 102.6])]
    assert decide(grid, [1])[0].too_close


def test_too_close_between_two_ks_prefers_the_static_k_over_a_table():
    grid = [cell(0, 1, [100.0] * 3), cell(1, 1, [200.0, 205.0, 198.0]), cell(2, 1, [204.0, 199.0, 206.0])]
    assert decide(grid, [1], static=1)[0].k == 1
    assert decide(grid, [1], static=2)[0].k == 2
    assert decide(grid, [1], static=0)[0].k == 2  # neither contender is simpler: the best median


def test_one_k_at_every_load_is_a_static_recommendation():
    grid = [cell(k, c, [100.0 + 50 * k * (c == 1) + 40 * k * (c == 4)] * 3) for k in (0, 1) for c in (1, 4)]
    decision = decide(grid, [1, 4])
    assert [d.k for d in decision] == [1, 1] and recommendation(decision) == "static"


def test_a_confirmation_that_loses_to_no_speculation_fails_and_recommends_none():
    grid = [
        cell(0, 1, [100.0] * 3),
        cell(1, 1, [150.0] * 3),
        cell(0, 4, [800.0, 790.0, 810.0]),
        cell(1, 4, [700.0] * 3),
    ]
    decision = decide(grid, [1, 4])
    schedule = schedule_of(decision)
    assert schedule == [[1, 1, 1], [2, 4, 0]] and recommendation(decision) == "table"
    confirmed = [cell(1, 1, [149.0, 151.0, 150.0]), cell(0, 4, [309.0, 300.0, 310.0])]  # the 309 against 804
    verdicts, failures, recommended = judge(grid, confirmed, 1, schedule, "table")
    assert verdicts == [("wins", "too close to call"), ("loses", "loses")]
    assert recommended == "no speculation"
    assert failures == [
        (
            "confirmation at concurrency 4: the recommended table measured 309.0 tokens/s, below no "
            "speculation's 800.0 (their intervals apart): serve without --speculative-config instead"
        )
    ]
    column = no_speculation(grid, confirmed, schedule)
    assert [(x.table_k, x.verdict) for x in column] == [(1, "wins"), (0, "loses")]  # the all-zero entry still costs
    assert column[1].ratio == pytest.approx(309.0 / 800.0)


def test_a_table_that_loses_only_to_the_static_k_recommends_the_static_k():
    grid = [
        cell(0, 1, [100.0] * 3),
        cell(1, 1, [150.0] * 3),
        cell(2, 1, [160.0] * 3),
        cell(0, 4, [300.0] * 3),
        cell(1, 4, [400.0] * 3),
        cell(2, 4, [380.0] * 3),
    ]
    decision = decide(grid, [1, 4], static=1)
    assert [d.k for d in decision] == [2, 1]
    confirmed = [cell(2, 1, [158.0] * 3), cell(1, 4, [340.0] * 3)]
    verdicts, failures, recommended = judge(grid, confirmed, 1, schedule_of(decision), "table")
    assert verdicts[1] == ("wins", "loses") and recommended == "static"
    assert failures[0].endswith("below the static K=1's 400.0 (their intervals apart): serve K=1 instead")


def test_a_confirmation_within_the_intervals_is_confirmed_and_no_speculation_is_never_judged():
    grid = [cell(0, 1, [100.0] * 3), cell(1, 1, [150.0] * 3)]
    assert judge(grid, [cell(1, 1, [149.0, 152.0, 150.0])], 1, [[1, 1, 1]], "static")[1:] == ([], "static")
    grid = [cell(0, 1, [100.0] * 3), cell(1, 1, [90.0] * 3)]
    verdicts, failures, recommended = judge(grid, [cell(0, 1, [80.0] * 3)], 0, [[1, 1, 0]], "no speculation")
    assert verdicts == [("loses", "loses")] and failures == [] and recommended == "no speculation"


def test_sglangs_adaptive_config_buckets_start_where_vllms_ranges_start():
    """SGLang routes a batch to the largest key not above its size (adaptive_spec_params._find_closest_bs)."""
    grid = [
        cell(k, c, [100.0 + (k == best) * 50] * 3) for c, best in ((1, 3), (4, 3), (16, 1), (64, 0)) for k in (0, 1, 3)
    ]
    decision = decide(grid, [1, 4, 16, 64])
    assert schedule_of(decision) == [[1, 4, 3], [5, 16, 1], [17, 64, 0]]
    assert sglang_adaptive_config(decision) == {
        "1": {"candidate_steps": [3]},
        "5": {"candidate_steps": [1]},
        "17": {"candidate_steps": [0]},
    }


def test_latencies_as_bench_tools_report_them():
    requests = [
        RequestResult(ttft_s=t / 1000, e2e_s=t / 1000 + 0.1, tokens=[0] * 11, accepted=None)
        for t in (10, 20, 30, 40, 50)
    ]
    lat = latencies(requests)
    assert lat is not None
    assert lat.ttft_p50_ms == pytest.approx(30) and lat.ttft_p90_ms == pytest.approx(46)
    assert lat.tpot_p50_ms == pytest.approx(10) and lat.e2e_p90_s == pytest.approx(0.146)
    assert percentile([1.0], 90) == 1.0
    assert latencies([RequestResult(ttft_s=None, e2e_s=1.0, tokens=[1], accepted=None)]) is None


def test_sglangs_adaptive_command_names_the_file_and_sizes_the_draft_for_the_largest_step():
    from eaglezoo.serving import sglang_serve_command

    command = sglang_serve_command("t", "d", None, 3, "sglang-adaptive.json")
    assert command.endswith(
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
        "--speculative-adaptive --speculative-adaptive-config sglang-adaptive.json"
    )
    assert "adaptive" not in sglang_serve_command("t", "d", None, 3)
