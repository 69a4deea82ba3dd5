"""The user's budget for a tune (`--budget MINUTES`): the engine starts it plans, said before the first starts and
timed after it, the rounds it allows, and what it cut, said in the report (never a silent cut). Engine-agnostic: it
reads the counts `measure.Bench` keeps (engine starts and the engine time they and their runs took)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import UsageError


class Bench(Protocol):
    """What a budget reads of tune's engine counts (measure.Bench keeps them)."""

    starts: int
    runs: int
    engine_s: float
    starts_s: float
    warmups_s: float

    def keeps(self, cells: int) -> bool: ...


Say = Callable[[str], None]


def planned_starts(k_max: int, min_repeats: int, max_repeats: int, warm: bool = False) -> tuple[int, int]:
    """(engine starts of the rounds and the confirmation, the most if every K contends until max_repeats): with
    every K's engine kept warm (`warm`), one per K and one for the confirmation, however many rounds; otherwise one
    engine per K and round, one per contending K and further round, one for the confirmation."""
    cells = k_max + 1
    if warm:
        return cells + 1, cells + 1
    return cells * min_repeats + 1, cells * max_repeats + 1


def planned_runs(k_max: int, min_repeats: int, max_repeats: int) -> tuple[int, int]:
    """(a cell's repeat on its engine, counted over the rounds and the confirmation; the most if every K contends)."""
    cells = k_max + 1
    return cells * min_repeats + 1, cells * max_repeats + 1


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


@dataclass
class Budget:
    """The wall time a tune may take (None: no limit), from `opened`, and what it has cut so far."""

    limit_s: float | None
    k_max: int
    opened: float = field(default_factory=time.perf_counter)
    cut: list[str] = field(default_factory=list)

    def spent_s(self) -> float:
        return time.perf_counter() - self.opened

    def per_start_s(self, bench: Bench) -> float:
        """What an engine start has cost so far, on average (the engine's own start and its warm-up passes)."""
        return (bench.starts_s + bench.warmups_s) / bench.starts if bench.starts else 0.0

    def per_run_s(self, bench: Bench) -> float:
        """What a cell's run on a warm engine has cost so far, on average (its repeats at every load)."""
        measured = bench.engine_s - bench.starts_s - bench.warmups_s
        return max(measured, 0.0) / bench.runs if bench.runs else 0.0

    def per_cell_s(self, bench: Bench) -> float:
        """A cell's run with an engine start of its own: one pass per cell's unit."""
        return self.per_start_s(bench) + self.per_run_s(bench)

    def minimum_s(self, bench: Bench) -> float:
        """One pass per cell: one engine per K and one for the confirmation, at the cost measured per start."""
        return (self.k_max + 2) * self.per_cell_s(bench)

    def check_minimum(self, bench: Bench) -> None:
        """After the first engine start: a budget below one pass per cell is refused, with the minimum."""
        need = self.minimum_s(bench)
        if self.limit_s is not None and self.limit_s < need:
            at_least = math.ceil(need / 60)
            raise UsageError(
                f"--budget {self.limit_s / 60:g} is below one pass per cell here: {self.k_max + 2} engine starts "
                f"of about {minutes(self.per_cell_s(bench))} each, about {minutes(need)}",
                hint=f"give --budget {at_least} (minutes) or more",
            )

    def allows(self, bench: Bench, runs: int, keep_for_confirmation: bool = True) -> bool:
        """Whether `runs` more cells' runs (each with a start of its own unless every K's engine is kept warm) and
        the confirmation's start and run, kept for last, fit in what is left."""
        if self.limit_s is None:
            return True
        each = self.per_run_s(bench) if bench.keeps(self.k_max + 1) else self.per_cell_s(bench)
        need = runs * each + int(keep_for_confirmation) * self.per_cell_s(bench)
        return self.spent_s() + need <= self.limit_s

    def plan(self, bench: Bench, k_max: int, min_repeats: int, max_repeats: int) -> str:
        """What tune will start and run, and about how long it takes, at the costs measured so far."""
        warm = bench.keeps(k_max + 1)
        least, most = planned_starts(k_max, min_repeats, max_repeats, warm)
        runs, runs_most = planned_runs(k_max, min_repeats, max_repeats)
        start, run = self.per_start_s(bench), self.per_run_s(bench)
        low, high = least * start + runs * run, most * start + runs_most * run
        within = "" if self.limit_s is None else f"; budget {minutes(self.limit_s)}"
        if warm:
            return (
                f"tune plans {least} engine starts (K = 0..{k_max} each started once and kept warm across rounds, "
                f"the confirmation's), {runs} runs of a cell (up to {runs_most} if loads stay contested), about "
                f"{minutes(low)} (to {minutes(high)}) at {minutes(start)} per start and {minutes(run)} per run as "
                f"measured{within}"
            )
        return (
            f"tune plans {least} engine starts (up to {most} if loads stay contested), about {minutes(low)} "
            f"(to {minutes(high)}) at {minutes(start + run)} per start as measured{within}"
        )
