"""The figures of a cell measured several times: its median, the interval of that median, whether two cells are
told apart (by their intervals, or round by round by the interval of their ratios), and percentiles as `vllm bench
serve` takes them."""

from __future__ import annotations

from math import comb
from statistics import median

INTERVAL_LEVEL = 0.9  # the interval of a median covers the true median at least this often, where repeats allow it
SEPARATION_MARGIN = 0.03  # two intervals must stand this share of the lower median apart to be told apart


def interval(values: list[float]) -> tuple[float, float, float]:
    """The distribution-free confidence interval of the median (order statistics, the sign test's): the widest
    pair x(j), x(n+1-j) whose coverage 1 - 2 P(Binomial(n, 1/2) < j) is at least INTERVAL_LEVEL, else the
    range (too few repeats to reach the level). Returns (low, high, coverage)."""
    xs, n = sorted(values), len(values)
    best = 1
    for j in range(1, n // 2 + 1):
        if _coverage(n, j) >= INTERVAL_LEVEL:
            best = j
    return xs[best - 1], xs[n - best], _coverage(n, best)


def _coverage(n: int, j: int) -> float:
    return 1 - 2 * sum(comb(n, i) for i in range(j)) / 2**n


def beats(a: tuple[float, float], b: tuple[float, float], b_median: float) -> bool:
    """Interval a lies above interval b, by more than the margin: a is told apart from b, and better."""
    return a[0] > b[1] + SEPARATION_MARGIN * b_median


def paired_interval(a: list[float], b: list[float]) -> tuple[float, float, float] | None:
    """The interval (as `interval`: low, high, coverage) of a's repeats over b's, pair by pair: repeat i of both was
    taken in the same round, so the machine's drift over the run reaches both alike and leaves their ratio. None
    without pairs."""
    ratios = [x / y for x, y in zip(a, b, strict=False) if y > 0]
    return interval(ratios) if ratios else None


def paired_beats(ratio: tuple[float, float, float]) -> bool:
    """a beats b: their ratio's interval lies above 1 by more than the margin."""
    return ratio[0] > 1 + SEPARATION_MARGIN


def paired_equal(ratio: tuple[float, float, float]) -> bool:
    """a and b are equal within the margin: their ratio's interval, at the full level (5 pairs or more), lies inside
    the margin on both sides, so more repeats could not tell them apart by more than it. Below the level (the range
    of 3 pairs covers 75%) a stop could let two runs part: those go on repeating."""
    low, high, coverage = ratio
    return coverage >= INTERVAL_LEVEL and low >= 1 / (1 + SEPARATION_MARGIN) and high <= 1 + SEPARATION_MARGIN


def spread_pct(values: list[float]) -> float:
    """The repeats' range as a percentage of their median."""
    mid = median(values)
    return 100 * (max(values) - min(values)) / mid if mid else 0.0


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, interpolated between order statistics (numpy's default, as `vllm bench serve`)."""
    xs = sorted(values)
    at = (len(xs) - 1) * q / 100
    low = int(at)
    high = min(low + 1, len(xs) - 1)
    return xs[low] + (xs[high] - xs[low]) * (at - low)
