"""tune's decisions from measured cells: per load the K with the most output tokens per second where its
interval is told apart from the rest, else too close to call and the simpler configuration; vLLM's batch-size
table, SGLang's static K and adaptive config; the confirmation judged against no speculation and the best static K."""

from __future__ import annotations

import math

from .model import Cell, Choice, Verdict
from .stats import beats, paired_beats, paired_equal, paired_interval


def _at(grid: list[Cell], k: int, c: int) -> Cell:
    return next(x for x in grid if x.k == k and x.concurrency == c)


def _bounds(x: Cell) -> tuple[float, float]:
    return x.interval or (x.output_tokens_per_s, x.output_tokens_per_s)


def _best(cells: list[Cell]) -> Cell:
    return max(cells, key=lambda x: (x.output_tokens_per_s, -x.k))


def told_apart(a: Cell, b: Cell) -> bool:
    """a beats b at one load: the interval of their round-by-round ratio lies above 1 by more than the margin (the
    grid's repeat i of every cell at a load was taken in round i: `measure.settle`); cells without repeats by their
    own intervals."""
    ratio = paired_interval(a.repeats or [], b.repeats or [])
    return beats(_bounds(a), _bounds(b), b.output_tokens_per_s) if ratio is None else paired_beats(ratio)


def contenders(cells: list[Cell]) -> list[int]:
    """The Ks at one load the best median does not beat (the best included), smallest first."""
    best = _best(cells)
    return sorted(x.k for x in cells if x is best or not told_apart(best, x))


def equal_within_margin(cells: list[Cell]) -> bool:
    """At one load, every contender's round-by-round ratio to the best lies within the margin on both sides: more
    repeats could not tell them apart by more than it, so the load is settled as too close to call."""
    best, tied = _best(cells), contenders(cells)
    ratios = [paired_interval(best.repeats or [], x.repeats or []) for x in cells if x is not best and x.k in tied]
    return len(tied) > 1 and all(r is not None and paired_equal(r) for r in ratios)


def decide(grid: list[Cell], concurrency: list[int], static: int | None = None, min_repeats: int = 0) -> list[Choice]:
    """Per load, the K with the highest median output tokens/s. Where another K's interval is not told apart from
    it, the choice is too close to call and goes to the simpler configuration: no speculation if K = 0 contends,
    else the one static K (`static`) if it contends, else the best median. A load where a cell has fewer than
    `min_repeats` repeats (the budget cut the rounds) tells nothing apart: every K contends."""
    out = []
    for c in concurrency:
        cells = [x for x in grid if x.concurrency == c]
        base = _at(grid, 0, c).output_tokens_per_s
        best = max(cells, key=lambda x: (x.output_tokens_per_s, -x.k))
        short = any(x.repeats is not None and len(x.repeats) < min_repeats for x in cells)
        tied = sorted(x.k for x in cells) if short else contenders(cells)
        k = best.k if len(tied) == 1 else 0 if 0 in tied else static if static in tied else best.k
        chosen = _at(grid, k, c)
        out.append(
            Choice(
                concurrency=c,
                k=k,
                output_tokens_per_s=chosen.output_tokens_per_s,
                speedup=chosen.output_tokens_per_s / base,
                best_k=best.k,
                too_close=len(tied) > 1,
                contenders=tied,
                settled_after=min(len(_at(grid, t, c).repeats or [1]) for t in tied),
            )
        )
    return out


def schedule_of(decision: list[Choice]) -> list[list[int]]:
    """vLLM's inclusive batch-size ranges: each measured level covers the sizes above the previous one; the last
    K carries on above the highest level (as vLLM does). Neighbours with one K merge."""
    ranges: list[list[int]] = []
    start = 1
    for choice in decision:
        if ranges and ranges[-1][2] == choice.k:
            ranges[-1][1] = choice.concurrency
        else:
            ranges.append([start, choice.concurrency, choice.k])
        start = choice.concurrency + 1
    return ranges


def static_best(grid: list[Cell], concurrency: list[int]) -> int:
    """One K for every load (SGLang takes one): the highest geometric-mean speedup over the measured levels."""

    def gain(k: int) -> float:
        ratios = [_at(grid, k, c).output_tokens_per_s / _at(grid, 0, c).output_tokens_per_s for c in concurrency]
        return math.exp(sum(map(math.log, ratios)) / len(ratios))

    return max(sorted({x.k for x in grid}), key=gain)


def recommendation(decision: list[Choice]) -> str:
    """The simplest configuration that serves the decision: none, one static K, or the table."""
    ks = {d.k for d in decision}
    return "no speculation" if ks == {0} else "static" if len(ks) == 1 else "table"


def verdict(a: tuple[float, float], a_median: float, b: tuple[float, float], b_median: float) -> Verdict:
    """a against b by their intervals."""
    return "wins" if beats(a, b, b_median) else "loses" if beats(b, a, a_median) else "too close to call"


def sglang_adaptive_config(decision: list[Choice]) -> dict[str, dict]:
    """SGLang's --speculative-adaptive-config from the decision. SGLang reads a JSON file whose integer-string keys
    are batch sizes, each with its `candidate_steps` (non-negative ints; 0 drafts nothing), and routes a batch to the
    largest key not above its size (the smallest key below it): sglang/srt/speculative/adaptive_spec_params.py,
    `_load_adaptive_config` and `AdaptiveSpeculativeParams._find_closest_bs` (sglang 0.5.23). So each measured
    level's K covers the sizes above the previous level, as in vLLM's table; one candidate per bucket keeps the
    measured K (SGLang's controller moves only between candidates, `AdaptiveStepSlot._recompute_params`)."""
    return {str(lo): {"candidate_steps": [k]} for lo, _, k in schedule_of(decision)}


def table_k(schedule: list[list[int]], c: int) -> int:
    return next((k for lo, hi, k in schedule if lo <= c <= hi), schedule[-1][2])


def judge(
    grid: list[Cell], confirmed: list[Cell], static: int, schedule: list[list[int]], recommended: str
) -> tuple[list[tuple[Verdict, Verdict]], list[str], str]:
    """The confirmation against the intervals of no speculation and of the best static K, at every load:
    (verdicts per load, failures, what to recommend). A recommended configuration that loses to either is a
    failure, and the simpler configuration is recommended instead (no speculation where it lost to that, else
    the static K). Where no speculation was recommended, the all-zero table run is shown, never judged."""
    verdicts, failures, fallback = [], [], recommended
    for x in confirmed:
        c = x.concurrency
        none, best = _at(grid, 0, c), _at(grid, static, c)
        v = (
            verdict(_bounds(x), x.output_tokens_per_s, _bounds(none), none.output_tokens_per_s),
            verdict(_bounds(x), x.output_tokens_per_s, _bounds(best), best.output_tokens_per_s),
        )
        verdicts.append(v)
        if recommended == "no speculation":
            continue
        if v[0] == "loses":
            failures.append(
                f"confirmation at concurrency {c}: the recommended {_named(recommended, schedule)} measured "
                f"{x.output_tokens_per_s:.1f} tokens/s, below no speculation's {none.output_tokens_per_s:.1f} "
                "(their intervals apart): serve without --speculative-config instead"
            )
            fallback = "no speculation"
        elif v[1] == "loses" and static != 0 and recommended == "table":
            failures.append(
                f"confirmation at concurrency {c}: the recommended table measured "
                f"{x.output_tokens_per_s:.1f} tokens/s, below the static K={static}'s "
                f"{best.output_tokens_per_s:.1f} (their intervals apart): serve K={static} instead"
            )
            fallback = fallback if fallback == "no speculation" else "static"
    return verdicts, failures, fallback


def _named(recommended: str, schedule: list[list[int]]) -> str:
    return "table" if recommended == "table" else f"static K={schedule[0][2]}"
