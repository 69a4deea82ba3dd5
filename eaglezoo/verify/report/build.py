"""Measurements -> one `VerifyReport`, built once (`report_for`): tallies, the engine's own counters as the
headline, intervals, the floors (`gate.gated`), the provenance and the serving path; and `compare_engines`
(`--engine native,vllm`). Reading a saved one back: `verify/saved.py`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ...errors import EngineError
from ...reproduce import reproduction
from ...serving import ServeConfig, serve_drafter
from ..acceptance import INTERVAL, SEED, Tally, bootstrap_interval, by_k_estimate, pooled_length
from ..counters import SpecDecodeCounters
from ..workload import Measurement, Workload
from .gate import NO_GATE, Gate, gated
from .models import ByK, ByKValues, Comparison, Drift, Engine, PromptResult, Sampling, Tallied, VerifyReport

if TYPE_CHECKING:
    from ...checkpoint.read import Drafter


class Origin(BaseModel):
    """Where the drafter and target came from (a registry entry, Hub commits), and what the resolver noted."""

    model_config = ConfigDict(frozen=True)

    registry_id: str | None = None
    drafter_revision: str | None = None
    target_revision: str | None = None
    notes: tuple[str, ...] = ()


NO_ORIGIN = Origin()  # the default: nothing known of where the files came from


def report_for(
    work: Workload,
    m: Measurement,
    gate: Gate = NO_GATE,
    origin: Origin = NO_ORIGIN,
    comparison: Comparison | None = None,
) -> VerifyReport:
    """The one report of one measurement, built once: the engine's own counters are the headline when it keeps
    them; the floors are applied and the provenance recorded here, never patched on afterwards."""
    k, tally = work.k, Tally(work.k)
    buckets: dict[str, Tally] = {}
    per_prompt: list[PromptResult] = []
    for i, p, ids, steps in zip(work.indices, work.prompts, work.encoded, m.accepted, strict=True):
        if steps is None:
            continue
        tally.add(steps)
        buckets.setdefault(p.bucket, Tally(k)).add(steps)
        earlier = {"answers": work.answers[i]} if i in work.answers else {}  # the target's own earlier turns
        own = {"temperature": p.temperature} if p.temperature is not None else {}
        per_prompt.append(
            built(PromptResult, index=i, bucket=p.bucket, prompt_tokens=len(ids), **earlier, accepted=steps, **own)
        )
    s = built(Tallied, **tally.summary())
    notes = list(work.notes) + list(m.notes)
    if m.counters is not None:
        s, note = headline_from_counters(m.counters, tally, k)
        notes += [note] if note else []
    als = [pooled_length([x.accepted]) for x in per_prompt if x.accepted]
    steps_by_bucket: dict[str, list[list[int]]] = {}
    for x in per_prompt:
        steps_by_bucket.setdefault(x.bucket, []).append(x.accepted)
    new = [t[: work.max_new_tokens] for t in m.tokens]
    drift = Drift(
        feedback_rms_per_depth=m.feedback_rms,
        acceptance_per_position_by_bucket={b: t.per_position() for b, t in buckets.items()},
        mean_acceptance_length_by_bucket={b: t.mean_acceptance_length() for b, t in buckets.items()},
        mean_acceptance_length_interval_by_bucket={b: interval(steps_by_bucket[b]) for b in buckets},
        interval=INTERVAL,
    )
    thresholds, failures, gate_notes, verdict = gated(
        gate, s, drift.mean_acceptance_length_by_bucket, work.findings, work.prompt_set, m.engine.name
    )
    ps = work.prompt_set
    return built(
        VerifyReport,
        drafter=str(work.drafter.path),
        target=work.target_name,
        device=m.device,
        dtype=m.dtype,
        num_spec_tokens=k,
        max_new_tokens=work.max_new_tokens,
        num_prompts=len(work.prompts),
        acceptance_per_position=s.acceptance_per_position,
        mean_acceptance_length=s.mean_acceptance_length,
        mean_acceptance_length_per_prompt=sum(als) / len(als) if als else None,
        num_drafts=s.num_drafts,
        num_accepted=s.num_accepted,
        histogram=s.histogram,
        all_positions=m.all_positions,
        mean_acceptance_length_interval=interval([x.accepted for x in per_prompt]),
        drift=drift,
        target_distinct_token_ratio=sum(len(set(t)) / max(1, len(t)) for t in new) / len(new) if new else None,
        lint=work.findings,
        timing=m.timing,
        engine=m.engine,
        speedup=m.speedup,
        comparison=comparison,
        sampling=built(Sampling, temperature=work.temperature, seed=work.seed),
        per_prompt=per_prompt,
        skipped_prompts=work.skipped,
        notes=notes + gate_notes + list(origin.notes),
        acceptance_by_k=acceptance_by_k(m, s.acceptance_per_position),
        thresholds=thresholds,
        failures=failures,
        registry_id=origin.registry_id,
        drafter_revision=origin.drafter_revision,
        target_revision=origin.target_revision,
        serve=serve_path(work, origin),
        prompt_set=ps,
        thinking=work.thinking,
        gate=verdict,
        reproduction=reproduction(
            engine=engine_words(m.engine),
            prompt_set=ps.name if ps else None,
            prompts_sha256=ps.sha256 if ps else None,
            seed=work.seed,
            bootstrap_seed=SEED,
        ),
    )


def engine_words(engine: Engine) -> str:
    return f"{engine.name} {engine.version or ''}".strip()


Model = TypeVar("Model", bound=BaseModel)


def built(model: type[Model], /, **fields: Any) -> Model:
    """A report model from what was measured. What it refuses came from an engine or a server (a figure or a
    name a report cannot hold): one line naming the field, never an internal error."""
    try:
        return model(**fields)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(map(str, e["loc"])) or "the figures"
        said = str(e.get("msg", "")).removeprefix("Value error, ")
        raise EngineError(
            f"the measurement gives a {model.__name__} eaglezoo could not read back: {where}: {said}",
            hint="the engine answered something no report may hold; its log or the server's says why",
        ) from None


def serve_path(work: Workload, origin: Origin) -> list[str]:
    """The serving path `serve-config` prints for this drafter and target (a registry entry's own id converts it)."""
    return serving_path(work, origin.registry_id).steps


def serving_path(work: Workload, registry_id: str | None, engine: str = "vllm", k: int | None = None) -> ServeConfig:
    """`serving.serve_drafter` for what was measured (verify, tune): local paths named whole, the converted folder
    written in the current directory, as serve-config prints them (issue 46)."""
    drafter, name = work.drafter, os.path.abspath(work.drafter.path)
    source = [registry_id] if registry_id else [name, *_stated_ids(drafter)]
    return serve_drafter(
        drafter,
        engine,
        name,
        work.target_name,
        work.k if k is None else k,
        source,
        work.target_layers,
        into=os.getcwd(),
    )


def _stated_ids(drafter: Drafter) -> list[str]:
    """The aux ids a user stated for a folder whose config holds none: convert needs them stated again."""
    aux = drafter.spec.aux
    if aux is None or drafter.reading.aux_stated_by == "config":
        return []
    return ["--aux-layers", ",".join(map(str, aux.ids)), "--aux-convention", aux.convention]


def interval(requests: list[list[int]]) -> list[float] | None:
    """The pooled acceptance length's bootstrap interval over these prompts (None for fewer than two)."""
    counts = [(len(r), sum(r)) for r in requests if r]  # (drafts, accepted): resampled without re-summing steps

    def pooled(pick: list[tuple[int, int]]) -> float:
        return 1 + sum(a for _, a in pick) / sum(d for d, _ in pick)

    return bootstrap_interval(counts, pooled) if len(counts) > 1 else None


EXACT = (
    "exact: replayed from this run's drafts (a K-token draft is the first K tokens of the K_max one), "
    "equal to a run at each K"
)
ESTIMATE = (
    "estimate: 1 + the first K per-position acceptance rates of this K_max run (the engine reports counts, "
    "not each slot's drafts); a run at K visits other positions"
)


def acceptance_by_k(m: Measurement, per_position: list[float]) -> ByK | None:
    if m.by_k is not None:
        return built(ByK, basis=EXACT, rows=m.by_k)
    if not per_position:
        return None
    return built(ByK, basis=ESTIMATE, rows=by_k_estimate(per_position))


def headline_from_counters(c: SpecDecodeCounters, tally: Tally, k: int) -> tuple[Tallied, str | None]:
    """The engine's counters (deltas over the measured requests) as the report's totals. When the
    per-request metrics add up to something else, another client moved the counters: say so."""
    s = built(
        Tallied,
        acceptance_per_position=c.acceptance_per_position(k),
        mean_acceptance_length=c.mean_acceptance_length,
        num_drafts=c.num_drafts,
        num_accepted=c.num_accepted_tokens,
        histogram=tally.histogram() if tally.num_drafts else [],
    )
    note = None
    if tally.num_drafts and (tally.num_drafts, tally.num_accepted) != (c.num_drafts, c.num_accepted_tokens):
        note = (
            f"the engine's counters ({c.num_drafts} drafts, {c.num_accepted_tokens} accepted) differ from the sum of "
            f"this run's per-request metrics ({tally.num_drafts}, {tally.num_accepted}): another client may be using it"
        )
    return s, note


def compare_engines(ref: VerifyReport, other: VerifyReport) -> Comparison:
    """ref, other: VerifyReports of the same workload on two engines."""
    a, b = ref.engine.name, other.engine.name
    steps = {p.index: p.accepted for p in ref.per_prompt}
    both = [p for p in other.per_prompt if p.index in steps]
    differing = [p.index for p in both if steps[p.index] != p.accepted]
    counts_equal = (ref.num_drafts, ref.num_accepted) == (other.num_drafts, other.num_accepted)
    return Comparison(
        reference=a,
        engine=b,
        dtype={a: ref.dtype, b: other.dtype},
        acceptance_per_position={a: ref.acceptance_per_position, b: other.acceptance_per_position},
        difference_per_position=[
            y - x for x, y in zip(ref.acceptance_per_position, other.acceptance_per_position, strict=True)
        ],
        mean_acceptance_length={a: ref.mean_acceptance_length, b: other.mean_acceptance_length},
        difference_mean_acceptance_length=other.mean_acceptance_length - ref.mean_acceptance_length,
        num_drafts={a: ref.num_drafts, b: other.num_drafts},
        num_accepted={a: ref.num_accepted, b: other.num_accepted},
        acceptance_length_by_k={
            name: ByKValues(
                basis=r.acceptance_by_k.basis.split(":")[0],
                values=[x.mean_acceptance_length for x in r.acceptance_by_k.rows],
            )
            for name, r in ((a, ref), (b, other))
            if r.acceptance_by_k
        },
        prompts_compared=len(both),
        prompts_identical=len(both) - len(differing),
        differing_prompts=differing,
        identical=counts_equal
        and not differing
        and len(both) == len(ref.per_prompt)
        and ref.acceptance_per_position == other.acceptance_per_position,
    )
