"""How tune measures a cell, as named constants (the defaults of tune's options): kept free of heavy imports, so
the command line reads them without loading an engine."""

from __future__ import annotations

from dataclasses import dataclass

WARMUP_PASSES = 1  # the first pass of a load on a fresh engine allocates and compiles for its batch shape: discarded
MIN_TOKENS = 512
MIN_SECONDS = 1.0
MIN_REPEATS = 3
MAX_REPEATS = 9
ROUND_REPEATS = 1  # repeats added to each contending cell per round (rounds go through the contending Ks in turn)
MAX_PASSES_PER_REPEAT = 64
BUDGET_MINUTES = 60.0  # tune's default --budget: a GPU user's hour; the rounds and the confirmation are planned in it


@dataclass(frozen=True)
class SamplingRule:
    """How every cell is measured (tune's options; the defaults are the constants above)."""

    min_tokens: int = MIN_TOKENS
    min_seconds: float = MIN_SECONDS
    min_repeats: int = MIN_REPEATS
    max_repeats: int = MAX_REPEATS
    budget_s: float | None = None  # the wall time tune may take (None: no limit)
