"""tune's decision from a measured grid, on grids built by hand: per load the K with the most output tokens per
second (K = 0 when none beats the target alone, the smaller K on a tie), one static K for SGLang by the geometric
mean of the speedups, vLLM's batch-size schedule. (Cells measured in repeats, too close to call, the confirmation's
verdict: test_settled.py.)"""

from __future__ import annotations

import pytest

from eaglezoo.tune import Cell, Choice, schedule_of, static_best
from eaglezoo.tune.decide import decide


def grid_of(rows: dict[tuple[int, int], float]) -> list[Cell]:
    """{(K, concurrency): output tokens/s} as tune measures it (the rest of a cell does not enter the decision)."""
    return [
        Cell(k=k, concurrency=c, output_tokens_per_s=tps, mean_tpot_ms=None, acceptance_length=None)
        for (k, c), tps in rows.items()
    ]


def test_each_load_gets_the_k_with_the_most_tokens_per_second():
    grid = grid_of({(0, 1): 100.0, (1, 1): 150.0, (2, 1): 140.0, (0, 8): 400.0, (1, 8): 380.0, (2, 8): 390.0})
    assert [(d.concurrency, d.k, d.output_tokens_per_s, d.speedup) for d in decide(grid, [1, 8])] == [
        (1, 1, 150.0, 1.5),
        (8, 0, 400.0, 1.0),
    ]


def test_a_tie_goes_to_the_smaller_k_and_only_the_loads_asked_for_are_decided():
    grid = grid_of(
        {
            (0, 1): 100.0,
            (1, 1): 120.0,
            (2, 1): 120.0,
            (3, 1): 90.0,
            (0, 4): 200.0,
            (1, 4): 200.0,
            (2, 4): 200.0,
            (3, 4): 200.0,
        }
    )
    assert [(d.concurrency, d.k) for d in decide(grid, [4, 1])] == [(4, 0), (1, 1)]
    assert [d.concurrency for d in decide(grid, [1])] == [1]
    assert decide(grid, [1])[0].speedup == pytest.approx(1.2)


def test_the_static_k_is_the_best_geometric_mean_speedup_not_the_arithmetic():
    """K=1 doubles one load and halves the other (arithmetic mean 2.25, geometric 1.41); K=2 gives 1.5 at both."""
    grid = grid_of({(0, 1): 100.0, (1, 1): 400.0, (2, 1): 150.0, (0, 8): 100.0, (1, 8): 50.0, (2, 8): 150.0})
    assert static_best(grid, [1, 8]) == 2
    assert static_best(grid, [1]) == 1  # at one load alone, K=1's 4x wins


def test_no_static_k_when_none_beats_the_target_alone():
    grid = grid_of({(0, 1): 100.0, (1, 1): 99.0, (2, 1): 80.0, (0, 4): 300.0, (1, 4): 299.0, (2, 4): 200.0})
    assert static_best(grid, [1, 4]) == 0
    # K=1 wins at concurrency 4 (1.05x) but loses more at 1 (0.9x): the load's decision takes it, one static K does not
    grid = grid_of({(0, 1): 100.0, (1, 1): 90.0, (0, 4): 300.0, (1, 4): 315.0})
    assert [d.k for d in decide(grid, [1, 4])] == [0, 1]
    assert static_best(grid, [1, 4]) == 0


def test_a_static_tie_goes_to_the_smaller_k():
    grid = grid_of({(0, 1): 100.0, (1, 1): 130.0, (2, 1): 130.0, (3, 1): 130.0})
    assert static_best(grid, [1]) == 1


def test_the_schedule_covers_every_batch_size_from_one():
    def choice(c, k):
        return Choice(concurrency=c, k=k, output_tokens_per_s=1.0, speedup=1.0)

    assert schedule_of([choice(1, 3), choice(4, 3), choice(16, 2), choice(64, 0)]) == [
        [1, 4, 3],
        [5, 16, 2],
        [17, 64, 0],
    ]
    assert schedule_of([choice(8, 0)]) == [[1, 8, 0]]
