"""A tune grid cell built by hand from its repeats, as `tune.measure.cell_of` builds one from an engine's."""

from __future__ import annotations

from statistics import median

from eaglezoo.tune import Cell
from eaglezoo.tune.stats import interval


def cell(k: int, c: int, repeats: list[float], acceptance_length: float | None = None) -> Cell:
    low, high, coverage = interval(repeats)
    return Cell(
        k=k,
        concurrency=c,
        output_tokens_per_s=median(repeats),
        mean_tpot_ms=None,
        acceptance_length=acceptance_length,
        repeats=repeats,
        interval=[low, high],
        interval_coverage=coverage,
    )
