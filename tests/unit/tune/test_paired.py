"""tune tells two Ks apart round by round: repeat i of every cell at a load was taken in round i, so the machine's
drift over the run reaches both cells alike, and the interval of their ratio, pair by pair, says what the two
independent intervals hide. Where that interval lies inside the margin on both sides, the load is settled as too
close to call (at the full level: five rounds or more): more repeats could not tell the Ks apart by more than the
margin."""

from __future__ import annotations

import pytest
from support.tune_cells import cell

from eaglezoo.tune.decide import decide, equal_within_margin, told_apart
from eaglezoo.tune.report import too_close_notes
from eaglezoo.tune.stats import paired_interval

# A machine whose speed drifts from round to round (a neighbour's job starts, then stops): 100, 60, 140 tokens/s
# without the drafter; K=1 is 10% faster in every round.
DRIFT = [100.0, 60.0, 140.0]


def test_the_ratio_of_two_cells_is_taken_pair_by_pair():
    assert paired_interval([110.0, 66.0, 154.0], DRIFT) == pytest.approx((1.1, 1.1, 0.75))
    assert paired_interval([110.0, 66.0], DRIFT) == pytest.approx((1.1, 1.1, 0.5))  # the rounds both took part in
    assert paired_interval([], DRIFT) is None


def test_a_k_faster_in_every_round_is_told_apart_through_the_drift():
    """Their own intervals overlap (66..154 against 60..140): apart only round by round."""
    fast, base = cell(1, 1, [x * 1.1 for x in DRIFT]), cell(0, 1, DRIFT)
    assert fast.interval[0] < base.interval[1]
    assert told_apart(fast, base) and not told_apart(base, fast)
    (d,) = decide([base, fast], [1])
    assert (d.k, d.too_close, d.contenders) == (1, False, [1])


def test_a_ratio_that_changes_sides_between_rounds_is_too_close_to_call():
    grid = [cell(0, 1, DRIFT), cell(1, 1, [120.0, 54.0, 150.0])]  # 1.2, 0.9, 1.07
    (d,) = decide(grid, [1])
    assert d.too_close and d.k == 0
    assert not equal_within_margin(grid)  # more repeats could still tell them apart
    (note,) = too_close_notes([d], grid)
    assert "not told apart after 3 repeats" in note


def test_ks_within_the_margin_round_by_round_are_settled_as_equal_at_the_full_level():
    """Five rounds within 1% of each other: settled (the interval covers 94%). The same after three rounds (75%)
    goes on repeating: a stop there could let two runs part."""
    base = [100.0, 60.0, 140.0, 90.0, 120.0]
    grid = [cell(0, 1, base), cell(1, 1, [x * 1.01 for x in base]), cell(2, 1, [x * 0.99 for x in base])]
    assert equal_within_margin(grid)
    (d,) = decide(grid, [1])
    assert d.too_close and d.contenders == [0, 1, 2] and d.k == 0  # the simpler configuration, as before
    (note,) = too_close_notes([d], grid)
    assert "within 3% of each other round by round after 5 repeats" in note
    three = [cell(x.k, 1, (x.repeats or [])[:3]) for x in grid]
    assert not equal_within_margin(three) and decide(three, [1])[0].too_close


def test_a_k_told_apart_leaves_the_load_unsettled_as_equal():
    grid = [cell(0, 1, DRIFT), cell(1, 1, [x * 1.1 for x in DRIFT])]
    assert not equal_within_margin(grid)  # one K stands apart: settled by that, not by equality
