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
    engine_s: float


Say = Callable[[str], None]


def planned_starts(k_max: int, min_repeats: int, max_repeats: int) -> tuple[int, int]:
    """(engine starts of the rounds and the confirmation, the most if every K contends until max_repeats): one
    engine per K and round, one per contending K and further round, one for the confirmation."""
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
        """What an engine start and its runs have cost so far, on average (engine time per start)."""
        return bench.engine_s / bench.starts if bench.starts else 0.0

    def minimum_s(self, bench: Bench) -> float:
        """One pass per cell: one engine per K and one for the confirmation, at the cost measured per start."""
        return (self.k_max + 2) * self.per_start_s(bench)

    def check_minimum(self, bench: Bench) -> None:
        """After the first engine start: a budget below one pass per cell is refused, with the minimum."""
        need = self.minimum_s(bench)
        if self.limit_s is not None and self.limit_s < need:
            at_least = math.ceil(need / 60)
            raise UsageError(
                f"--budget {self.limit_s / 60:g} is below one pass per cell here: {self.k_max + 2} engine starts "
                f"of about {minutes(self.per_start_s(bench))} each, about {minutes(need)}",
                hint=f"give --budget {at_least} (minutes) or more",
            )

    def allows(self, bench: Bench, starts: int, keep_for_confirmation: bool = True) -> bool:
        """Whether `starts` more engine starts (and the confirmation's, kept for last) fit in what is left."""
        if self.limit_s is None:
            return True
        need = (starts + int(keep_for_confirmation)) * self.per_start_s(bench)
        return self.spent_s() + need <= self.limit_s

    def plan(self, bench: Bench, k_max: int, min_repeats: int, max_repeats: int) -> str:
        """What tune will start and about how long it takes, at the cost measured per start so far."""
        least, most = planned_starts(k_max, min_repeats, max_repeats)
        each = self.per_start_s(bench)
        within = "" if self.limit_s is None else f"; budget {minutes(self.limit_s)}"
        return (
            f"tune plans {least} engine starts (up to {most} if loads stay contested), about {minutes(least * each)} "
            f"(to {minutes(most * each)}) at {minutes(each)} per start as measured{within}"
        )
