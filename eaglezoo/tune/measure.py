"""Measuring a cell until its figure can be trusted: a warm-up pass on every fresh engine, repeats of at least
MIN_TOKENS tokens and MIN_SECONDS seconds each, taken in rounds (K = 0, 1, ... K_max, then again), so that a cell's
repeats span the run and see the machine's load drift as every other cell's do (back-to-back repeats on one engine
measured a spread far narrower than two runs' on a shared machine), and more rounds of the cells still contending,
until their intervals tell them apart or MAX_REPEATS is spent (`settle`). On vLLM every K's engine is started once
and kept warm across the rounds where they fit in memory (`VllmSession.hold`, vllm_worker.serve): a round is then
K_max + 1 interleaved runs on warm engines, no start; otherwise each repeat starts its K's engine again"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from statistics import median

from ..verify.counters import SpecDecodeCounters
from ..verify.report.models import PassTiming
from ..verify.report.timing import pass_timing
from ..verify.vllm_engine import VllmSession
from ..verify.vllm_process import EngineEvent, PassEvent, RequestResult
from ..verify.workload import Workload
from .budget import Budget, Say, minutes
from .decide import contenders, equal_within_margin
from .llamacpp import LlamacppSession
from .model import Cell, Latency
from .rule import MAX_PASSES_PER_REPEAT, ROUND_REPEATS, SamplingRule
from .stats import interval, percentile, spread_pct


@dataclass
class Samples:
    """One (config, load): its repeats so far, every request measured and the engine's counters over them."""

    passes_per_repeat: int
    repeats: list[float] = field(default_factory=list)
    pass_walls: list[float] = field(default_factory=list)
    requests: list[RequestResult] = field(default_factory=list)
    counters: SpecDecodeCounters = field(default_factory=SpecDecodeCounters.none)

    def add(self, passes: list[PassEvent]) -> None:
        tokens = sum(len(r.tokens) for p in passes for r in p.requests)
        self.repeats.append(tokens / sum(p.wall_s for p in passes))
        for p in passes:
            self.pass_walls.append(p.wall_s)
            self.requests += p.requests
            self.counters += p.counters


class Bench:
    """The session's runs, counted: engine time, engine starts, the runs and repeats measured, and which engines
    the worker holds warm (where it keeps several, `VllmSession.hold`: a cell's next repeat then needs no start)."""

    def __init__(self, session: VllmSession | LlamacppSession, work: Workload, rule: SamplingRule):
        self.session, self.work, self.rule = session, work, rule
        self.engine_s = self.starts_s = self.warmups_s = 0.0  # warm-ups: a fresh engine's discarded passes
        self.starts = self.runs = 0
        self.config: dict | None | str = "none yet"
        self.warm: list[dict | None] = []  # the configs whose engines are held now
        self.engine: EngineEvent | None = None
        self.fit = 1  # engines that fit in memory at once, as the first start measured (1: one at a time)

    def _run(self, config: dict | None, label: str, loads: list[int]) -> list[PassEvent]:
        t0 = time.perf_counter()
        result = self.session.run(self.work, config, label, loads)
        self.engine_s += time.perf_counter() - t0
        started = config != self.config if result.started is None else result.started
        if started:
            self.starts_s += result.engine.start_s
            self.starts += 1
            self.warm = [*self.warm, config] if result.engine.held > 1 else [config]
            self.fit = result.engine.fit if self.starts == 1 else self.fit
        self.config = config
        self.engine = self.engine or result.engine  # the first engine's version, device and dtype
        return result.passes

    def keeps(self, cells: int) -> bool:
        """Whether `cells` engines are held warm at once (asked and fitting): a round of them starts none."""
        return min(getattr(self.session, "hold", 1), self.fit) >= cells

    def measure(
        self, config: dict | None, label: str, loads: list[int], repeats: int, row: dict[int, Samples] | None = None
    ) -> dict[int, Samples]:
        """`repeats` more repeats of `config` at each load (after a warm-up where the engine is fresh), added to
        `row` (a new row when None: its passes per repeat set from the warm-up pass)."""
        row = dict(row or {})
        self.runs += 1
        if config not in self.warm or not all(c in row for c in loads):
            engine_s, starts_s = self.engine_s, self.starts_s
            for c, p in zip(loads, self._run(config, f"{label}, warm-up", loads), strict=True):
                row.setdefault(c, Samples(self.passes_for(p)))
            self.warmups_s += (self.engine_s - engine_s) - (self.starts_s - starts_s)
        plan = [c for c in loads for _ in range(row[c].passes_per_repeat * repeats)]
        passes = iter(self._run(config, label, plan))
        for c in loads:
            for _ in range(repeats):
                row[c].add([next(passes) for _ in range(row[c].passes_per_repeat)])
        return row

    def passes_for(self, warm_pass: PassEvent) -> int:
        """Passes of the prompt set a repeat needs for the minimum tokens and seconds (from a warm-up pass)."""
        tokens = sum(len(r.tokens) for r in warm_pass.requests) or 1
        need = max(
            math.ceil(self.rule.min_tokens / tokens),
            math.ceil(self.rule.min_seconds / max(warm_pass.wall_s, 1e-9)),
            1,
        )
        return min(need, MAX_PASSES_PER_REPEAT)


def timing_of(s: Samples) -> PassTiming:
    """PassTiming's figures over every request measured (as one pass lasting all the repeats)."""
    return pass_timing(s.requests, sum(s.pass_walls))


def cell_of(k: int, c: int, s: Samples) -> Cell:
    drafted = bool(k and s.counters.num_drafts)
    low, high, coverage = interval(s.repeats)
    timing = timing_of(s)
    return Cell(
        k=k,
        concurrency=c,
        output_tokens_per_s=median(s.repeats),
        mean_tpot_ms=timing.mean_tpot_ms,
        acceptance_length=s.counters.mean_acceptance_length if drafted else None,
        acceptance_per_position=s.counters.acceptance_rates() if drafted else None,
        repeats=s.repeats,
        interval=[low, high],
        interval_coverage=coverage,
        spread_pct=spread_pct(s.repeats),
        passes_per_repeat=s.passes_per_repeat,
        latency=latencies(s.requests),
    )


def grid_of(rows: dict[int, dict[int, Samples]]) -> list[Cell]:
    return [cell_of(k, c, s) for k, row in sorted(rows.items()) for c, s in sorted(row.items())]


def settle(
    bench: Bench, rows: dict[int, dict[int, Samples]], loads: list[int], config_of, budget: Budget, say: Say
) -> None:
    """More repeats of the cells still contending (not told apart from the best, round by round: `decide.told_apart`),
    ROUND_REPEATS at a time, the contending Ks in turn (on their warm engines, else one engine start each a round),
    until every load is settled (one K told apart from the rest, or the contenders equal within the margin round by
    round), each contending cell has MAX_REPEATS, or the budget cannot pay for another round (said in the report).
    A K once out stays out at that load, so repeat i of every cell at a load is from round i: the pairs hold."""
    rule = bench.rule
    while True:
        grid = grid_of(rows)
        wanted: dict[int, list[int]] = {}
        for c in loads:
            cells = [x for x in grid if x.concurrency == c]
            if equal_within_margin(cells):
                continue  # settled: too close to call, and more repeats could not tell them apart by the margin
            last = max(len(rows[k][c].repeats) for k in rows)  # every cell still in took part in every round
            tied = [k for k in contenders(cells) if len(rows[k][c].repeats) == last]
            if len(tied) > 1:
                for k in tied:
                    if len(rows[k][c].repeats) < rule.max_repeats:
                        wanted.setdefault(k, []).append(c)
        if not wanted:
            return
        if not budget.allows(bench, len(wanted)):
            contested = sorted({c for at in wanted.values() for c in at})
            budget.cut.append(
                f"the budget ({minutes(budget.limit_s or 0)}) ended with concurrency "
                f"{', '.join(map(str, contested))} still contested (K={', K='.join(map(str, sorted(wanted)))}): "
                "their decision is too close to call, as measured so far"
            )
            say(budget.cut[-1])
            return
        for k, at in sorted(wanted.items()):
            more = min(ROUND_REPEATS, rule.max_repeats - max(len(rows[k][c].repeats) for c in at))
            rows[k] = bench.measure(
                config_of(k), f"K={k}, more repeats" if k else "without the drafter, more repeats", at, more, rows[k]
            )
        say(f"more repeats of K={', K='.join(map(str, sorted(wanted)))}: {bench.starts} engine starts so far")


def latencies(requests: list[RequestResult]) -> Latency | None:
    """The cell's `Latency`: TTFT and TPOT (each request's time per output token after the first: its mean
    inter-token latency) at p50 and p90 over the requests, and end-to-end latency; None when no request has a
    first-token time.
    vLLM 0.32's offline engine keeps no per-token timestamps (RequestStateStats, vllm/v1/metrics/stats.py, holds
    the first and last token's only), so the inter-token distribution `vllm bench serve` prints as ITL is not
    available offline; TPOT is its per-request mean."""
    ttft = [r.ttft_s * 1000 for r in requests if r.ttft_s is not None]
    if not ttft:
        return None
    tpot = [
        (r.e2e_s - r.ttft_s) * 1000 / (len(r.tokens) - 1)
        for r in requests
        if r.ttft_s is not None and len(r.tokens) > 1
    ]
    e2e = [r.e2e_s for r in requests]
    return Latency(
        ttft_p50_ms=percentile(ttft, 50),
        ttft_p90_ms=percentile(ttft, 90),
        tpot_p50_ms=percentile(tpot, 50) if tpot else None,
        tpot_p90_ms=percentile(tpot, 90) if tpot else None,
        e2e_p50_s=percentile(e2e, 50),
        e2e_p90_s=percentile(e2e, 90),
    )
