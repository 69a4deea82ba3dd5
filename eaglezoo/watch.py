"""`eaglezoo watch`: a serving drafter's acceptance health over time, from the server's own `/metrics` counters.

Each interval is the difference of two scrapes (verify/counters.py `SpecDecodeCounters`): its acceptance length
(1 + accepted / drafts) and its per-position rates (accepted at position i / drafts). An interval is judged:

- **idle**: no drafts in it (no rate is computed from nothing);
- **low**: below the drafter's floors (its registry entry's, at the server's K: the AL floor where the entry has
  one, and each position's floor, `FloorTable.covering`);
- **drift**: its AL fell below the baseline's by more than `drift` (a fraction of the baseline's accepted part,
  AL - 1) and by more than 3 standard errors of the two (the spread of accepted tokens per draft follows from the
  per-position counts: P(X > i) is position i's rate, so E[X] = sum r_i and E[X^2] = sum (2i + 1) r_i);
- **healthy** otherwise; **reset** when a counter went backwards (the server restarted: a new baseline starts,
  nothing is judged); **unreachable** when a scrape failed (the server is down or not answering).

The baseline is the server's own: the first `baseline` intervals that drafted, pooled (after a reset, the first
ones after it). With one interval (`once`), it is what the server counted before the first scrape, its life so far.
`fail_after` consecutive intervals low, drifted or unreachable end the watch as failing (idle ones neither count
nor break the run).

Engines: vLLM (`vllm:spec_decode_*`, verify/endpoint.py `scrape`), llama.cpp (`llamacpp:spec_decode_*`,
verify/llamacpp_endpoint.py `scrape`, which needs `--metrics`) and SGLang (`sglang:generation_tokens`,
`num_requests`, `spec_verify_calls`, verify/sglang_server.py `scrape`, which needs `--enable-metrics`). SGLang counts a
request when it finishes and keeps no per-position counts: its intervals have an AL (judged against the AL floor at
its chain K, and for drift by the `drift` fraction alone, with no standard error to weigh it) and no rates."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from .errors import EaglezooError, EngineError
from .names import ServeEngine
from .verify import llamacpp_endpoint, sglang_server
from .verify.counters import SpecDecodeCounters
from .verify.endpoint import check_server, scrape
from .verify.report.gate import FloorTable
from .verify.sglang_server import sglang_facts

Status = Literal["healthy", "low", "drift", "idle", "reset", "unreachable"]
FAILING: frozenset[Status] = frozenset({"low", "drift", "unreachable"})
Z = 3.0  # standard errors a drop must exceed, besides the `drift` fraction, to count as drift


@dataclass(frozen=True)
class Server:
    """The watched server: its engine, its base URL and how its counters are read."""

    engine: ServeEngine
    base: str
    scrape: Callable[[], SpecDecodeCounters]
    k: int | None = None  # where the counters do not show it (SGLang's have no positions): the server's own K


def connect(url: str) -> Server:
    """The server at `url`, its engine recognised (its counters are read first by `start`)."""
    base = check_server(url)
    props = llamacpp_endpoint.llamacpp_props(base)
    if props is not None:
        if props.get("endpoint_metrics") is not True:
            raise EngineError(
                f"the llama-server at {base} runs without --metrics: watch reads its spec-decode counters",
                hint="restart llama-server with --metrics",
            )
        server = Server("llamacpp", base, lambda: llamacpp_endpoint.scrape(base))
    elif (facts := sglang_facts(base)) is not None:
        per_verify = facts.drafted_per_verify
        server = Server("sglang", base, lambda: sglang_server.scrape(base, per_verify), facts.chain_k)
    else:
        server = Server("vllm", base, lambda: scrape(base))
    return server


@dataclass(frozen=True)
class Rules:
    """What an interval is judged against."""

    floors: FloorTable
    k: int = 0  # the server's K where its counters have no positions (SGLang), else 0: read from the counters
    drift: float = 0.1
    baseline: int = 3
    fail_after: int = 3

    def per_position(self, k: int) -> list[float] | None:
        return self.floors.covering(k) if k else None

    def min_al(self, k: int) -> float | None:
        return self.floors.at(k).min_al


@dataclass(frozen=True)
class Interval:
    """One interval as judged: what it counted (None: idle, reset or unreachable) and why it is what it is."""

    end: float  # unix time of its second scrape
    seconds: float
    status: Status
    counted: SpecDecodeCounters | None = None
    baseline_al: float | None = None
    reasons: tuple[str, ...] = ()
    streak: int = 0
    building: str | None = None  # while the baseline is built: "n of N" intervals pooled so far

    def as_dict(self) -> dict[str, object]:
        counted = self.counted
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.end)),
            "seconds": round(self.seconds, 3),
            "status": self.status,
            "drafts": counted.num_drafts if counted else 0,
            "mean_acceptance_length": counted.mean_acceptance_length if counted and counted.num_drafts else None,
            "acceptance_per_position": (counted.acceptance_rates() or None) if counted and counted.num_drafts else None,
            "baseline_mean_acceptance_length": self.baseline_al,
            "reasons": list(self.reasons),
            "failing_streak": self.streak,
            "baseline_building": self.building,
        }


def went_back(before: SpecDecodeCounters, after: SpecDecodeCounters) -> str | None:
    """The first counter that went backwards (or a K that changed), worded; None when none did: a restart resets
    every counter, and only a restart changes K."""
    for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        a, b = getattr(before, name), getattr(after, name)
        if b < a:
            return f"{name} {a} then {b}"
    pairs = zip(before.num_accepted_tokens_per_pos, after.num_accepted_tokens_per_pos, strict=False)
    for pos, (a, b) in enumerate(pairs):
        if b < a:
            return f"num_accepted_tokens_per_pos at position {pos} {a} then {b}"
    k_before, k_after = len(before.num_accepted_tokens_per_pos), len(after.num_accepted_tokens_per_pos)
    if k_before and k_after != k_before:  # another K: a server restarted with another drafting depth
        return f"K {k_before} then {k_after}"
    return None


def standard_error(c: SpecDecodeCounters) -> float | None:
    """The standard error of the AL over c's drafts, from the per-position counts (None without them)."""
    rates = c.acceptance_rates()
    if not rates or not c.num_drafts:
        return None
    mean = sum(rates)
    variance = max(sum((2 * i + 1) * r for i, r in enumerate(rates)) - mean * mean, 0.0)
    return math.sqrt(variance / c.num_drafts)


def al_floor(rules: Rules, k: int, positions_counted: bool) -> tuple[float | None, bool]:
    """The AL floor at K, and whether it is implied: where the engine counts no positions (SGLang), the
    per-position floors still bound the AL, since AL = 1 + the sum of the positions' rates, so an AL below
    1 + the sum of their floors means some position is below its own."""
    floor = rules.min_al(k)
    per = rules.per_position(k) if not positions_counted else None
    implied = 1 + sum(per) if per else None
    if implied is not None and (floor is None or implied > floor):
        return implied, True
    return floor, False


def below_floors(c: SpecDecodeCounters, rules: Rules) -> list[str]:
    k = len(c.num_accepted_tokens_per_pos) or rules.k
    found = []
    floor, implied = al_floor(rules, k, bool(c.num_accepted_tokens_per_pos))
    if floor is not None and c.mean_acceptance_length < floor:
        why = " (1 + the per-position floors: some position is below its floor)" if implied else ""
        found.append(f"AL {c.mean_acceptance_length:.2f} < floor {floor:.2f}{why}")
    for pos, (rate, least) in enumerate(zip(c.acceptance_rates(), rules.per_position(k) or [], strict=False)):
        if rate < least:
            found.append(f"position {pos} {rate:.2f} < floor {least:.2f}")
    return found


def drifted(c: SpecDecodeCounters, baseline: SpecDecodeCounters, drift: float) -> list[str]:
    al, base = c.mean_acceptance_length, baseline.mean_acceptance_length
    drop = base - al
    errors = [e for e in (standard_error(c), standard_error(baseline)) if e is not None]
    noise = Z * math.sqrt(sum(e * e for e in errors)) if errors else 0.0
    if drop > drift * (base - 1) and drop > noise:
        return [f"AL {al:.2f} fell from the baseline's {base:.2f} (by more than {drift:.0%} of its accepted part)"]
    return []


@dataclass
class Watch:
    """The state of one watch: the last reading, the baseline being built or held, the intervals so far."""

    rules: Rules
    last: SpecDecodeCounters
    last_at: float
    baseline: SpecDecodeCounters | None = None
    baseline_parts: int = 0
    streak: int = 0
    intervals: list[Interval] = field(default_factory=list)

    def step(self, reading: SpecDecodeCounters | EaglezooError, now: float) -> Interval:
        """The interval ending with `reading` (or the failed scrape that should have ended it), judged."""
        seconds = now - self.last_at
        if isinstance(reading, EaglezooError):
            self.streak += 1
            return self._keep(Interval(now, seconds, "unreachable", reasons=(reading.message,), streak=self.streak))
        before, back = self.last, went_back(self.last, reading)
        self.last, self.last_at = reading, now
        if back is not None:
            self.baseline, self.baseline_parts, self.streak = None, 0, 0
            why = f"counters went back ({back}): the server restarted; a new baseline starts"
            return self._keep(Interval(now, seconds, "reset", reasons=(why,)))
        return self._keep(self._judge(reading.since(before, "the server's /metrics"), now, seconds))

    def _judge(self, counted: SpecDecodeCounters, now: float, seconds: float) -> Interval:
        if not counted.num_drafts:
            return Interval(now, seconds, "idle", counted, self._baseline_al(), ("no drafts",), self.streak)
        low = below_floors(counted, self.rules)
        drift = drifted(counted, self.baseline, self.rules.drift) if self._settled() and self.baseline else []
        building = None
        if not self._settled():  # this interval is pooled into the baseline
            self.baseline = counted if self.baseline is None else self.baseline + counted
            self.baseline_parts += 1
            building = f"{self.baseline_parts} of {self.rules.baseline}"
        status: Status = "low" if low else "drift" if drift else "healthy"
        self.streak = self.streak + 1 if status in FAILING else 0
        return Interval(now, seconds, status, counted, self._baseline_al(), tuple(low + drift), self.streak, building)

    def _settled(self) -> bool:
        return self.baseline_parts >= self.rules.baseline

    def _baseline_al(self) -> float | None:
        return self.baseline.mean_acceptance_length if self.baseline and self.baseline.num_drafts else None

    def _keep(self, interval: Interval) -> Interval:
        self.intervals.append(interval)
        return interval

    @property
    def failing(self) -> bool:
        return self.streak >= self.rules.fail_after


def start(server: Server, rules: Rules, once: bool, now: Callable[[], float] = time.time) -> Watch:
    """A watch from a first reading; with `once`, the server's counts so far are the baseline (when it drafted)."""
    first = server.scrape()
    watch = Watch(replace(rules, fail_after=1) if once else rules, first, now())
    if once and first.num_drafts:
        watch.baseline, watch.baseline_parts = first, rules.baseline
    return watch


def follow(
    server: Server,
    watch: Watch,
    interval_s: float,
    once: bool,
    emit: Callable[[Interval], None],
    now: Callable[[], float] = time.time,
) -> None:
    """Scrape every `interval_s` (on a fixed schedule: a slow scrape does not shift the next), emit each interval;
    return after one with `once`, or when the watch is failing."""
    due = time.monotonic()
    while True:
        due += interval_s
        time.sleep(max(0.0, due - time.monotonic()))
        try:
            reading: SpecDecodeCounters | EaglezooError = server.scrape()
        except EaglezooError as exc:
            reading = exc
        emit(watch.step(reading, now()))
        if once or watch.failing:
            return


def summary(watch: Watch) -> dict[str, object]:
    """The watch so far: intervals by status, the pooled figures of every interval that drafted, the worst AL."""
    counted = [i.counted for i in watch.intervals if i.counted is not None and i.counted.num_drafts]
    drafts = sum(c.num_drafts for c in counted)  # pooled over every K a restart may have changed to
    return {
        "intervals": len(watch.intervals),
        "by_status": {s: n for s in get_args(Status) if (n := sum(i.status == s for i in watch.intervals))},
        "drafts": drafts,
        "mean_acceptance_length": 1 + sum(c.num_accepted_tokens for c in counted) / drafts if drafts else None,
        "worst_mean_acceptance_length": min((c.mean_acceptance_length for c in counted), default=None),
        "baseline_mean_acceptance_length": watch.baseline.mean_acceptance_length
        if watch.baseline and watch.baseline.num_drafts
        else None,
        "failing": watch.failing,
    }
