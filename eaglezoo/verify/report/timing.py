"""`--speedup`'s figures: each pass's throughput and latency (`pass_timing`, shared with tune), and the same
prompts with and without the drafter at each load (`speedup_report`)."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean, median

from ..vllm_process import RequestResult, WorkerResult
from .build import built
from .models import PassTiming, Speedup, SpeedupLevel


def speedup_report(with_drafter: WorkerResult, without: WorkerResult, temperature: float) -> Speedup:
    levels = []
    for spec, base in zip(with_drafter.passes, without.passes, strict=True):
        a, b = pass_timing(spec.requests, spec.wall_s), pass_timing(base.requests, base.wall_s)
        levels.append(
            built(
                SpeedupLevel,
                concurrency=spec.concurrency,
                with_drafter=a,
                without_drafter=b,
                speedup=a.output_tokens_per_s / b.output_tokens_per_s,
            )
        )
    pairs = list(zip(with_drafter.passes[0].requests, without.passes[0].requests, strict=True))
    identical = sum(x.tokens == y.tokens for x, y in pairs) / len(pairs)
    return built(
        Speedup,
        levels=levels,
        # at T > 0 the two runs sample differently by design; equality is a greedy-only check
        identical_outputs=identical if temperature == 0 else None,
        engine_start_s={"with_drafter": with_drafter.engine.start_s, "without_drafter": without.engine.start_s},
    )


def pass_timing(requests: Sequence[RequestResult], wall_s: float) -> PassTiming:
    """One pass's (or one tune cell's) throughput and latency over its requests and wall-clock seconds."""
    tokens = sum(len(r.tokens) for r in requests)
    # time per output token after the first, as `vllm bench serve` reports TPOT
    tpot = [(r.e2e_s - r.ttft_s) / (len(r.tokens) - 1) for r in requests if r.ttft_s is not None and len(r.tokens) > 1]
    e2e = [r.e2e_s for r in requests]
    return built(
        PassTiming,
        output_tokens=tokens,
        wall_s=wall_s,
        output_tokens_per_s=tokens / wall_s,
        mean_tpot_ms=1000 * mean(tpot) if tpot else None,
        mean_e2e_s=mean(e2e),
        median_e2e_s=median(e2e),
    )
