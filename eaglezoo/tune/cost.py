"""Where a tune's time went (engine starts, measuring, wall time, repeats per cell), and the same run simulated at
another engine start cost: on the hardware users tune for, a start is the expensive part (an 8B target with CUDA
graphs about a minute, a 70B at TP=4 several). Engine-agnostic: it reads the counts `measure.Bench` kept."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import TYPE_CHECKING

from .model import CellRepeats, Cost

if TYPE_CHECKING:
    from .measure import Bench, Samples

GPU_START_S = (30.0, 120.0, 600.0)  # the start costs tune's cost is simulated at: 30 s, 2 min, 10 min per start


def cost_of(bench: Bench, rows: dict[int, dict[int, Samples]], confirmed: dict[int, Samples], wall_s: float) -> Cost:
    """The run's cost from what the bench counted; one pass per cell from the same medians."""
    every = [*rows.values(), confirmed]
    passes_s = sum(median(s.pass_walls) for row in every for s in row.values())
    one_pass_starts = len(rows) + 1  # one engine per K and the confirmation's
    mean_start = bench.starts_s / bench.starts if bench.starts else 0.0
    return Cost(
        engine_s=bench.engine_s,
        single_pass_s=bench.starts_s + passes_s,
        repeats=sum(len(s.repeats) for row in every for s in row.values()),
        engine_starts=bench.starts or None,
        start_s=bench.starts_s,
        measure_s=max(bench.engine_s - bench.starts_s, 0.0),
        wall_s=wall_s,
        repeats_per_cell=[
            CellRepeats(k=k, concurrency=c, repeats=len(s.repeats))
            for k, row in sorted(rows.items())
            for c, s in sorted(row.items())
        ],
        one_pass_starts=one_pass_starts,
        one_pass_s=one_pass_starts * mean_start + passes_s,
    )


@dataclass(frozen=True)
class Simulated:
    """A measured run's counts at another start cost: not measured."""

    start_s: float  # seconds per engine start, as given
    tune_s: float  # the run's wall time with each of its starts costing start_s
    one_pass_s: float  # one pass per cell with each of its starts costing start_s

    @property
    def ratio(self) -> float:
        return self.tune_s / self.one_pass_s if self.one_pass_s else 0.0


def simulate(cost: Cost, start_s: float) -> Simulated | None:
    """The same run with every engine start taking start_s: the measured starts' time replaced, the rest (warm-ups,
    repeats, the worker's round trips, the host's own work) kept. None for a report without the counts."""
    if cost.engine_starts is None or cost.start_s is None or cost.wall_s is None or cost.one_pass_starts is None:
        return None
    passes_s = cost.single_pass_s - cost.start_s
    return Simulated(
        start_s=start_s,
        tune_s=cost.wall_s - cost.start_s + cost.engine_starts * start_s,
        one_pass_s=cost.one_pass_starts * start_s + passes_s,
    )


def simulations(cost: Cost, starts: tuple[float, ...] = GPU_START_S) -> list[Simulated]:
    return [s for s in (simulate(cost, x) for x in starts) if s is not None]
