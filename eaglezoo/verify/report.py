"""Measurements -> one `VerifyReport`: tallies, the engine's own counters, thresholds, the comparison
of two engines and the speedup, whatever engine measured. Reading a saved one back: `saved.py`."""

from __future__ import annotations

import datetime as dt
import os
from statistics import mean, median
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from .. import __version__
from ..checkpoint.problems import Finding
from ..errors import EngineError
from ..limits import MAX_K, MAX_LEVELS, MAX_NEW_TOKENS, MAX_PROMPTS, MAX_TEMPERATURE
from ..reproduce import Reproduction, reproduction
from ..serving import ServeConfig, serve_drafter
from .acceptance import INTERVAL, SEED, Tally, bootstrap_interval, by_k_estimate
from .workload import Measurement, PromptSet, Workload, bucket_problem

if TYPE_CHECKING:
    from ..checkpoint.read import Drafter

TOLERANCE = 1e-6  # floats written by json round-trip exactly; sums of K rates differ by a few ulps
FUTURE_SLACK = dt.timedelta(days=1)  # another machine's clock


def _one_line(text: str) -> str:
    if not (text.strip() and text.isprintable()):
        raise ValueError("expected one line of printable text")
    return text


def _bucket(name: str) -> str:
    problem = bucket_problem(name)  # the prompt reader's own rule: what verify writes, its readers read
    if problem:
        raise ValueError(f"a bucket name that {problem}")
    return name


Line = Annotated[str, AfterValidator(_one_line)]
Bucket = Annotated[str, AfterValidator(_bucket)]
Rate = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Length = Annotated[float, Field(ge=1, le=MAX_K + 1, allow_inf_nan=False)]  # an acceptance length: 1 to K+1
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Interval = Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(min_length=2, max_length=2)]


class Part(BaseModel):
    """A report's parts hold what the code writes and nothing else: an unknown key is refused when read."""

    model_config = ConfigDict(extra="forbid")


class Tallied(Part):
    """Acceptance over a set of verify steps."""

    acceptance_per_position: list[Rate]
    mean_acceptance_length: Length
    num_drafts: Count
    num_accepted: Count
    histogram: list[Count]


class ByKRow(Part):
    k: Annotated[int, Field(ge=1, le=MAX_K)]
    acceptance_per_position: list[Rate]
    mean_acceptance_length: Length
    num_drafts: Count | None = None  # exact rows only
    num_accepted: Count | None = None
    histogram: list[Count] | None = None


class ByK(Part):
    basis: Line  # "exact: ..." (replayed) or "estimate: ..." (from one run's rates)
    rows: list[ByKRow]


class Drift(Part):
    feedback_rms_per_depth: (
        Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(max_length=MAX_K)] | None
    ) = None  # native only
    acceptance_per_position_by_bucket: dict[Bucket, list[Rate]] = {}  # in the prompt file's order
    mean_acceptance_length_by_bucket: dict[Bucket, Length] = {}
    mean_acceptance_length_interval_by_bucket: dict[Bucket, Interval | None] = {}
    interval: str | None = None  # how the intervals were computed


class Quantization(Part):
    method: Line
    dequantized: bool


class Parallel(Part):
    tensor_parallel_size: Annotated[int, Field(ge=1)] = 1
    pipeline_parallel_size: Annotated[int, Field(ge=1)] = 1
    data_parallel_size: Annotated[int, Field(ge=1)] = 1
    enable_expert_parallel: bool = False
    distributed_executor_backend: Line = "default"


class ServedConfig(Part):
    """What a server says of its speculative decoding (/server_info)."""

    method: Line | None = None
    model: Line | None = None
    num_speculative_tokens: int | None = None
    dtype: Line | None = None


class Engine(Part):
    """Which engine measured, and how it ran: native (batch_size, target_quantization), vllm (version, python,
    parallel, start_s), endpoint (url, model, speculative_config, version), llamacpp (a llama-server: url, model,
    version, speculative_config)."""

    name: Literal["native", "vllm", "endpoint", "llamacpp"] = "native"
    version: Line | None = None
    python: Line | None = None
    parallel: Parallel | None = None
    trust_remote_code: bool | None = None
    start_s: Seconds | None = None
    batch_size: Annotated[int, Field(ge=1)] | None = None
    target_quantization: Quantization | None = None
    url: Line | None = None
    model: Line | None = None
    speculative_config: ServedConfig | None = None


class Sampling(Part):
    temperature: Annotated[float, Field(ge=0, le=MAX_TEMPERATURE, allow_inf_nan=False)] = 0.0
    seed: int | None = None  # request i is seeded with seed + its prompt index


class PromptResult(Part):
    index: Count  # the prompt's line in the prompt set
    bucket: Bucket
    prompt_tokens: Count | None = None  # absent from reports written before it was recorded
    answers: list[str] | None = None  # a conversation: the target's own earlier turns
    accepted: list[Count]  # accepted draft tokens, per verify step
    temperature: Annotated[float, Field(ge=0, le=MAX_TEMPERATURE, allow_inf_nan=False)] | None = None
    """The row's own sampling temperature, where its prompt set gives one (else the run's, `sampling`)."""


class Skipped(Part):
    index: Count
    bucket: Bucket
    reason: str
    tokens: Count | None = None


class PassTiming(Part):
    output_tokens: Count
    wall_s: Seconds
    output_tokens_per_s: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    mean_tpot_ms: Seconds | None
    mean_e2e_s: Seconds
    median_e2e_s: Seconds


class SpeedupLevel(Part):
    concurrency: Annotated[int, Field(ge=1)]
    with_drafter: PassTiming
    without_drafter: PassTiming
    speedup: Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Speedup(Part):
    levels: Annotated[list[SpeedupLevel], Field(min_length=1, max_length=MAX_LEVELS)]
    identical_outputs: Rate | None  # greedy only: the share of requests with the same tokens both ways
    engine_start_s: dict[Literal["with_drafter", "without_drafter"], Seconds]


class ByKValues(Part):
    basis: str
    values: list[Length]


class Comparison(Part):
    """`--engine native,vllm`: the same workload on both, compared count for count."""

    reference: str
    engine: str
    dtype: dict[str, str]
    acceptance_per_position: dict[str, list[Rate]]
    difference_per_position: list[float]
    mean_acceptance_length: dict[str, Length]
    difference_mean_acceptance_length: float
    num_drafts: dict[str, Count]
    num_accepted: dict[str, Count]
    acceptance_length_by_k: dict[str, ByKValues] = {}  # absent from reports written before it was compared
    prompts_compared: Count
    prompts_identical: Count
    differing_prompts: list[Count]
    identical: bool


class Thresholds(Part):
    """The floors held against the run, the highest where two name the same figure: gated (exit 1 below any) or
    only compared, as `gate` says."""

    min_acceptance: list[Rate] | None = None
    min_al: Length | None = None
    min_al_by_condition: dict[str, Length] | None = None


class Basis(BaseModel):
    """What a registry entry's floors were measured on: they gate a run on the same (the whole set, by its hash,
    and the engine where the floor names one); any other run is compared with them."""

    model_config = ConfigDict(frozen=True)

    prompt_set: str | None  # None: any set that holds the condition (a condition's floor that names no set)
    prompts_sha256: str | None = None  # None: the set could not be read, so no run can be shown to match it
    engine: str | None = None  # None: any engine
    k: int
    temperature: float

    def words(self) -> str:
        digest = f" (sha256 {self.prompts_sha256[:12]})" if self.prompts_sha256 else " (unreadable here)"
        where = f"{self.prompt_set}{digest}" if self.prompt_set else "any whole prompt set holding the condition"
        return (
            f"{where}, K={self.k}, T={self.temperature:g}, {'engine ' + self.engine if self.engine else 'any engine'}"
        )


class Floors(BaseModel):
    """Per-position floors, a floor on the acceptance length, one per condition."""

    model_config = ConfigDict(frozen=True)

    min_acceptance: list[float] | None = None
    min_al: float | None = None
    condition_floors: dict[str, float] | None = None

    def __bool__(self) -> bool:
        return bool(self.min_acceptance or self.min_al is not None or self.condition_floors)


class Gate(BaseModel):
    """What the run is held to: the floors stated for this run (the command line: they gate whatever it runs on),
    and a registry entry's, with what they were measured on (they gate a run on the same, else are compared)."""

    model_config = ConfigDict(frozen=True)

    stated: Floors = Floors()
    entry: Floors = Floors()  # the entry's whole-run floors
    measured_on: Basis | None = None  # what they were measured on
    conditions: Floors = Floors()  # the entry's floors per condition
    conditions_measured_on: Basis | None = None


class FloorCheck(Part):
    """One floor against the run's figure."""

    what: Line
    floor: float
    measured: float | None  # null: nothing of that condition was measured
    difference: float | None  # measured - floor
    met: bool | None
    source: Literal["command line", "registry"]
    gated: bool  # false: compared only (another prompt set, a part of it, another engine)


class GateResult(Part):
    """The verdict: PASS or FAIL where a floor gated the run, else why the entry's floors were compared only."""

    verdict: Literal["PASS", "FAIL", "compared, not gated", "no floors"]
    entry_floors: Literal["gated", "compared", "none"] = "none"
    why_compared: list[Line] = []  # why the entry's floors did not gate this run
    measured_on: Line | None = None  # what the entry's floors were measured on
    checks: list[FloorCheck] = []


class Origin(BaseModel):
    """Where the drafter and target came from (a registry entry, Hub commits), and what the resolver noted."""

    model_config = ConfigDict(frozen=True)

    registry_id: str | None = None
    drafter_revision: str | None = None
    target_revision: str | None = None
    notes: tuple[str, ...] = ()


NO_GATE, NO_ORIGIN = Gate(), Origin()  # the defaults: no floors stated, nothing known of where the files came from


class VerifyReport(BaseModel):
    """One verify run, whatever the engine (docs/report.md, generated from this model)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: Literal["verify"] = "verify"
    """Which command wrote it."""
    drafter: Line
    """The drafter measured: its folder (a Hub drafter: the cached snapshot)."""
    target: Line
    """The target as the engine loaded it: a path or a Hub repo id."""
    device: Line
    """Where it ran (`remote` for a server)."""
    dtype: Line
    """The precision the target and drafter ran in."""
    num_spec_tokens: Annotated[int, Field(ge=1, le=MAX_K)]
    """K: tokens drafted per verify step."""
    max_new_tokens: Annotated[int, Field(ge=1, le=MAX_NEW_TOKENS)]
    """Tokens generated per prompt."""
    num_prompts: Count
    """Prompts measured (after skipping those that do not fit)."""
    acceptance_per_position: list[Rate]
    """Accepted at draft position i / drafts (engines: their own counters, as deltas)."""
    mean_acceptance_length: Length
    """1 + accepted / drafts, pooled over every verify step, as vLLM counts it."""
    mean_acceptance_length_per_prompt: Length | None
    """The mean of the per-prompt acceptance lengths (null without per-request figures)."""
    mean_acceptance_length_interval: Interval | None = None
    """The pooled length's bootstrap interval over prompts (drift.interval says how)."""
    num_drafts: Count
    """Verify steps that drafted (engines: their counters)."""
    num_accepted: Count
    """Draft tokens accepted."""
    histogram: list[Count]
    """Verify steps by accepted count 0..K (from per-request figures; empty without them)."""
    all_positions: Tallied | None
    """Native only: teacher-forced statistics over every slot of the continuation."""
    acceptance_by_k: ByK | None = None
    """The acceptance length at every K up to this one: exact (replayed) or estimated."""
    drift: Drift
    """Per prompt bucket, and the fed-back hidden state's RMS per depth (native)."""
    target_distinct_token_ratio: Rate | None
    """Output diversity: a target that loops inflates acceptance."""
    lint: list[Finding]
    """The drafter's lint findings against this target."""
    timing: dict[str, Seconds]
    """Seconds: native load/target_generate/drafter/total; vllm engine_start/measure/total; endpoint measure/total."""
    engine: Engine = Engine()
    """Which engine measured, and how it ran."""
    sampling: Sampling = Sampling()
    """Temperature and seed (request i is seeded with seed + i)."""
    per_prompt: Annotated[list[PromptResult], Field(max_length=MAX_PROMPTS)] = []
    """Every measured prompt's accepted length per verify step (engines: with per-request metrics)."""
    skipped_prompts: Annotated[list[Skipped], Field(max_length=MAX_PROMPTS)] = []
    """Prompts that do not fit the context or the engine: reported with the reason, never truncated."""
    notes: list[str] = []
    """What the reader must know (counters moved by another client, no per-request metrics, floors not checked)."""
    speedup: Speedup | None = None
    """`--speedup`: the same engine and prompts with and without the drafter, per load."""
    comparison: Comparison | None = None
    """`--engine native,vllm`: the two engines compared count for count."""
    thresholds: Thresholds = Thresholds()
    """The floors held against the run (whether they gated or were only compared: `gate`)."""
    failures: list[Line] = []
    """Why the gate failed (exit 1); empty when it passed or applied no floor."""
    gate: GateResult | None = None
    """PASS or FAIL where a floor gated, or "compared, not gated" and why; every floor with the figure and the
    difference (absent from reports written before it)."""
    prompt_set: PromptSet | None = None
    """The prompt set by name and hash, its size, and which rows this run took."""
    reproduction: Reproduction | None = None
    """What it takes to run it again: the command, versions, the prompt set's hash, seeds, the machine."""
    serve: list[Line] = []
    """How to serve what was measured on vLLM: `eaglezoo convert` first where the engine would not read the drafter
    as given, then `vllm serve` (pages add the command to diagnose with, dev mode on, labelled)."""
    registry_id: Line | None = None
    """The registry entry measured, for `registry record`."""
    drafter_revision: Line | None = None
    """The Hub commit of the drafter measured."""
    target_revision: Line | None = None
    """The Hub commit of the target measured."""
    eaglezoo_version: Line = __version__
    """The eaglezoo that measured."""
    created: Line = Field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    """When the report was written (ISO 8601, UTC)."""

    @model_validator(mode="after")
    def _consistent(self) -> VerifyReport:
        problem = consistency_problem(self)
        if problem:
            raise ValueError(problem)
        return self


def consistency_problem(r: VerifyReport) -> str | None:
    """What a schema cannot say: the figures agree with each other (as 'FIELD is ...; expected ...'), or None."""
    k, al, rates = r.num_spec_tokens, r.mean_acceptance_length, r.acceptance_per_position
    if len(rates) != k:
        return f"acceptance_per_position holds {len(rates)} values; expected a list of num_spec_tokens ({k}) rates"
    if al > k + 1:
        return f"mean_acceptance_length is {al:g}; expected a number from 1 to K+1 ({k + 1})"
    # vLLM and an endpoint report counters: a server without the per-position counter leaves the rates at 0
    uncounted = r.engine.name in ("vllm", "endpoint") and not any(rates)
    if abs(al - 1 - sum(rates)) > TOLERANCE * k and not uncounted:
        return (
            f"mean_acceptance_length is {al:g} but 1 + the sum of acceptance_per_position is "
            f"{1 + sum(rates):g}; expected them equal"
        )
    if r.num_accepted > k * r.num_drafts:
        return (
            f"num_accepted is {r.num_accepted}; expected a whole number from 0 to K x num_drafts ({k * r.num_drafts})"
        )
    expected_al = 1 + r.num_accepted / r.num_drafts if r.num_drafts else 1.0
    if abs(al - expected_al) > TOLERANCE:
        return (
            f"mean_acceptance_length is {al:g} but 1 + num_accepted / num_drafts is {expected_al:g}; "
            "expected them equal"
        )
    if r.histogram and len(r.histogram) != k + 1:
        return f"histogram holds {len(r.histogram)} counts; expected K+1 ({k + 1}) counts of at least 0, or none"
    for name, value in (("mean_acceptance_length_per_prompt", r.mean_acceptance_length_per_prompt),):
        if value is not None and value > k + 1:
            return f"{name} is {value:g}; expected a number from 1 to K+1 ({k + 1}) or null"
    return (
        _created_problem(r.created) or _drift_problem(r.drift, k, r.num_prompts) or _by_k_problem(r.acceptance_by_k, k)
    )


def _created_problem(created: str) -> str | None:
    try:
        when = dt.datetime.fromisoformat(created)
    except ValueError:
        when = None
    if when is None or len(created) < 16:  # a date-time, not a date alone
        return f"created is {created[:40]!r}; expected an ISO date-time such as 2026-01-31T12:00:00+00:00"
    now = dt.datetime.now(dt.UTC)
    if (when if when.tzinfo else when.replace(tzinfo=dt.UTC)) > now + FUTURE_SLACK:
        return f"created is {created!r}, in the future; expected the time the report was written"
    return None


def _drift_problem(drift: Drift, k: int, num_prompts: int) -> str | None:
    for name in ("acceptance_per_position_by_bucket", "mean_acceptance_length_by_bucket"):
        if len(getattr(drift, name)) > max(1, num_prompts):
            return f"drift.{name} holds more buckets than prompts; expected one value per prompt bucket"
    for bucket, rates in drift.acceptance_per_position_by_bucket.items():
        if len(rates) != k:
            return f"drift.acceptance_per_position_by_bucket[{bucket!r}] holds {len(rates)} rates; expected K ({k})"
    for bucket, al in drift.mean_acceptance_length_by_bucket.items():
        if al > k + 1:
            return f"drift.mean_acceptance_length_by_bucket[{bucket!r}] is {al:g}; expected a number from 1 to {k + 1}"
    return None


def _by_k_problem(table: ByK | None, k: int) -> str | None:
    if table is None:
        return None
    if len(table.rows) > k or any(row.k > k or row.mean_acceptance_length > row.k + 1 for row in table.rows):
        return f"acceptance_by_k holds a K above {k} or a length above its K + 1; expected what verify writes"
    return None


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
    per_prompt: list[dict[str, Any]] = []
    for i, p, ids, steps in zip(work.indices, work.prompts, work.encoded, m.accepted, strict=True):
        if steps is None:
            continue
        tally.add(steps)
        buckets.setdefault(p.bucket, Tally(k)).add(steps)
        earlier = {"answers": work.answers[i]} if i in work.answers else {}  # the target's own earlier turns
        own = {"temperature": p.temperature} if p.temperature is not None else {}
        per_prompt.append(
            {"index": i, "bucket": p.bucket, "prompt_tokens": len(ids), **earlier, "accepted": steps, **own}
        )
    s = tally.summary()
    notes = list(work.notes) + list(m.notes)
    if m.counters is not None:
        s, note = headline_from_counters(m.counters, tally, k)
        notes += [note] if note else []
    als = [1 + sum(x["accepted"]) / len(x["accepted"]) for x in per_prompt if x["accepted"]]
    steps_by_bucket: dict[str, list[list[int]]] = {}
    for x in per_prompt:
        steps_by_bucket.setdefault(x["bucket"], []).append(x["accepted"])
    new = [t[: work.max_new_tokens] for t in m.tokens]
    drift = Drift(
        feedback_rms_per_depth=m.feedback_rms,
        acceptance_per_position_by_bucket={b: t.per_position() for b, t in buckets.items()},
        mean_acceptance_length_by_bucket={b: t.mean_acceptance_length() for b, t in buckets.items()},
        mean_acceptance_length_interval_by_bucket={b: interval(steps_by_bucket[b]) for b in buckets},
        interval=INTERVAL,
    )
    thresholds, failures, gate_notes, verdict = gated(
        gate, s, drift.mean_acceptance_length_by_bucket, work.findings, work.prompt_set, m.engine.get("name", "native")
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
        acceptance_per_position=s["acceptance_per_position"],
        mean_acceptance_length=s["mean_acceptance_length"],
        mean_acceptance_length_per_prompt=sum(als) / len(als) if als else None,
        num_drafts=s["num_drafts"],
        num_accepted=s["num_accepted"],
        histogram=s["histogram"],
        all_positions=m.all_positions,
        mean_acceptance_length_interval=interval([x["accepted"] for x in per_prompt]),
        drift=drift,
        target_distinct_token_ratio=sum(len(set(t)) / max(1, len(t)) for t in new) / len(new) if new else None,
        lint=work.findings,
        timing=m.timing,
        engine=m.engine,
        speedup=m.speedup,
        comparison=comparison,
        sampling={"temperature": work.temperature, "seed": work.seed},
        per_prompt=per_prompt,
        skipped_prompts=work.skipped,
        notes=notes + gate_notes + list(origin.notes),
        acceptance_by_k=acceptance_by_k(m, s["acceptance_per_position"]),
        thresholds=thresholds,
        failures=failures,
        registry_id=origin.registry_id,
        drafter_revision=origin.drafter_revision,
        target_revision=origin.target_revision,
        serve=serve_path(work, origin),
        prompt_set=ps,
        gate=verdict,
        reproduction=reproduction(
            engine=engine_words(m.engine),
            prompt_set=ps.name if ps else None,
            prompts_sha256=ps.sha256 if ps else None,
            seed=work.seed,
            bootstrap_seed=SEED,
        ),
    )


def engine_words(engine: dict[str, Any]) -> str:
    return f"{engine.get('name', 'native')} {engine.get('version') or ''}".strip()


Model = TypeVar("Model", bound=BaseModel)


def built(model: type[Model], **fields: Any) -> Model:
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


def acceptance_by_k(m: Measurement, per_position: list[float]) -> dict[str, Any] | None:
    if m.by_k is not None:
        return {"basis": EXACT, "rows": m.by_k}
    if not per_position:
        return None
    return {"basis": ESTIMATE, "rows": by_k_estimate(per_position)}


def headline_from_counters(c: dict[str, Any], tally: Tally, k: int) -> tuple[dict[str, Any], str | None]:
    """The engine's counters (deltas over the measured requests) as the report's totals. When the
    per-request metrics add up to something else, another client moved the counters: say so."""
    drafts = c["drafts"]
    per_pos = (c["per_position"] + [0] * k)[:k]
    s = {
        "acceptance_per_position": [x / drafts if drafts else 0.0 for x in per_pos],
        "mean_acceptance_length": 1 + c["accepted"] / drafts if drafts else 1.0,
        "num_drafts": drafts,
        "num_accepted": c["accepted"],
        "histogram": tally.histogram() if tally.num_drafts else [],
    }
    note = None
    if tally.num_drafts and (tally.num_drafts, tally.num_accepted) != (drafts, c["accepted"]):
        note = (
            f"the engine's counters ({drafts} drafts, {c['accepted']} accepted) differ from the sum of this run's "
            f"per-request metrics ({tally.num_drafts}, {tally.num_accepted}): another client may be using it"
        )
    return s, note


def gated(
    gate: Gate,
    s: dict[str, Any],
    by_condition: dict[str, float],
    findings: list[Finding],
    prompt_set: PromptSet | None,
    engine: str,
) -> tuple[Thresholds, list[str], list[str], GateResult]:
    """The floors against the measured figures: (the floors held, why the gate failed, what was not checked, the
    verdict with every floor's check). The command line's floors gate; the entry's gate a run on what they were
    measured on and are compared, with the difference, on anything else."""
    groups = [
        (f, basis, prefix)
        for f, basis, prefix in (
            (gate.entry, gate.measured_on, ""),
            (gate.conditions, gate.conditions_measured_on, "condition floors: "),
        )
        if f
    ]
    whys = [[prefix + w for w in not_like_with_like(basis, prompt_set, engine)] for _, basis, prefix in groups]
    checks = floor_checks(gate.stated, s, by_condition, "command line", True)
    for (floors, _, _), why in zip(groups, whys, strict=True):
        checks += floor_checks(floors, s, by_condition, "registry", not why)
    failures = [failure_of(c) for c in checks if c.gated and c.met is False]
    notes = [
        f"no prompt of {c.what.removesuffix(': acceptance length')} was measured: its floor ({c.floor:g}) was "
        "not checked"
        for c in checks
        if c.measured is None
    ]
    if s["num_drafts"] == 0:
        failures.append("no drafts were measured (continuations too short for K)")
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        failures.append(f"lint found {len(errors)} error(s): {', '.join(sorted({f.code for f in errors}))}")
    held = [gate.stated, gate.entry, gate.conditions]  # gated or compared: `gate` says which
    thresholds = Thresholds(
        min_acceptance=_highest([f.min_acceptance for f in held]),
        min_al=max((f.min_al for f in held if f.min_al is not None), default=None),
        min_al_by_condition=_highest_by_condition([f.condition_floors for f in held]),
    )
    verdict = (
        "FAIL"
        if failures
        else "PASS"
        if any(c.gated for c in checks)
        else "compared, not gated"
        if checks
        else "no floors"
    )
    why = [w for ws in whys for w in ws]
    bases = [basis.words() for _, basis, _ in groups if basis is not None]
    result = GateResult(
        verdict=verdict,
        entry_floors="compared" if why else "gated" if groups else "none",
        why_compared=why,
        measured_on="; ".join(dict.fromkeys(bases)) or None,
        checks=checks,
    )
    return thresholds, failures, notes, result


def not_like_with_like(basis: Basis | None, prompt_set: PromptSet | None, engine: str) -> list[str]:
    """Why an entry's floors cannot gate this run (empty: they can): another prompt set, a part of one, another
    engine. K and temperature match already: the entry's floors are looked up at exactly this run's."""
    if basis is None or prompt_set is None:
        return ["what the floors or this run measured on is not known"]
    why = []
    if basis.prompt_set is None:
        pass  # a condition's floor naming no set: any set that holds the condition, taken whole
    elif basis.prompts_sha256 is None:
        why.append(
            f"the floors' prompt set {basis.prompt_set} cannot be read here, so no run can be shown to measure the same"
        )
    elif basis.prompts_sha256 != prompt_set.sha256:
        why.append(
            f"the floors were measured on {basis.prompt_set}, this run on {prompt_set.name}"
            if basis.prompt_set != prompt_set.name
            else f"{prompt_set.name} has changed since the floors were measured on it (sha256 "
            f"{basis.prompts_sha256[:12]}, now {prompt_set.sha256[:12]})"
        )
    if not prompt_set.complete:
        why.append(
            f"this run took {prompt_set.taken} of the {prompt_set.rows} rows of {prompt_set.name} (--max-prompts)"
        )
    if basis.engine is not None and basis.engine != engine:
        why.append(f"the floors were measured on the {basis.engine} engine, this run on {engine}")
    return why


def floor_checks(
    floors: Floors, s: dict[str, Any], by_condition: dict[str, float], source: str, gates: bool
) -> list[FloorCheck]:
    rates = s["acceptance_per_position"]
    pairs = [
        (f"acceptance at position {i + 1}", floor, rates[i])
        for i, floor in enumerate(floors.min_acceptance or [])
        if i < len(rates)
    ]
    if floors.min_al is not None:
        pairs.append(("mean acceptance length", floors.min_al, s["mean_acceptance_length"]))
    pairs += [
        (f"condition {name}: acceptance length", floor, by_condition.get(name))
        for name, floor in (floors.condition_floors or {}).items()
    ]
    return [
        FloorCheck(
            what=what,
            floor=floor,
            measured=value,
            source=source,
            gated=gates,
            difference=None if value is None else value - floor,
            met=None if value is None else value >= floor,
        )
        for what, floor, value in pairs
    ]


def failure_of(check: FloorCheck) -> str:
    verb = " is" if check.what.startswith("acceptance at position") else ""
    return f"{check.what}{verb} {check.measured:.3f} < {check.floor}"


def _highest(lists: list[list[float] | None]) -> list[float] | None:
    given = [x for x in lists if x]
    if not given:
        return None
    return [max(x[i] for x in given if i < len(x)) for i in range(max(map(len, given)))]


def _highest_by_condition(dicts: list[dict[str, float] | None]) -> dict[str, float] | None:
    merged: dict[str, float] = {}
    for d in dicts:
        for name, floor in (d or {}).items():
            merged[name] = max(floor, merged.get(name, floor))
    return merged or None


def compare_engines(ref: VerifyReport, other: VerifyReport) -> Comparison:
    """ref, other: VerifyReports of the same workload on two engines."""
    a, b = ref.engine.name, other.engine.name
    steps = {p.index: p.accepted for p in ref.per_prompt}
    both = [p for p in other.per_prompt if p.index in steps]
    differing = [p.index for p in both if steps[p.index] != p.accepted]
    counts_equal = (ref.num_drafts, ref.num_accepted) == (other.num_drafts, other.num_accepted)
    return Comparison(
        **{
            "reference": a,
            "engine": b,
            "dtype": {a: ref.dtype, b: other.dtype},
            "acceptance_per_position": {a: ref.acceptance_per_position, b: other.acceptance_per_position},
            "difference_per_position": [
                y - x for x, y in zip(ref.acceptance_per_position, other.acceptance_per_position, strict=True)
            ],
            "mean_acceptance_length": {a: ref.mean_acceptance_length, b: other.mean_acceptance_length},
            "difference_mean_acceptance_length": other.mean_acceptance_length - ref.mean_acceptance_length,
            "num_drafts": {a: ref.num_drafts, b: other.num_drafts},
            "num_accepted": {a: ref.num_accepted, b: other.num_accepted},
            "acceptance_length_by_k": {
                name: {
                    "basis": r.acceptance_by_k.basis.split(":")[0],
                    "values": [x.mean_acceptance_length for x in r.acceptance_by_k.rows],
                }
                for name, r in ((a, ref), (b, other))
                if r.acceptance_by_k
            },
            "prompts_compared": len(both),
            "prompts_identical": len(both) - len(differing),
            "differing_prompts": differing,
            "identical": counts_equal
            and not differing
            and len(both) == len(ref.per_prompt)
            and ref.acceptance_per_position == other.acceptance_per_position,
        }
    )


def speedup_report(with_drafter: dict[str, Any], without: dict[str, Any], temperature: float) -> dict[str, Any]:
    levels = []
    for spec, base in zip(with_drafter["passes"], without["passes"], strict=True):
        a, b = pass_timing(spec), pass_timing(base)
        levels.append(
            {
                "concurrency": spec["concurrency"],
                "with_drafter": a,
                "without_drafter": b,
                "speedup": a["output_tokens_per_s"] / b["output_tokens_per_s"],
            }
        )
    pairs = list(zip(with_drafter["passes"][0]["requests"], without["passes"][0]["requests"], strict=True))
    identical = sum(x["tokens"] == y["tokens"] for x, y in pairs) / len(pairs)
    return {
        "levels": levels,
        # at T > 0 the two runs sample differently by design; equality is a greedy-only check
        "identical_outputs": identical if temperature == 0 else None,
        "engine_start_s": {
            "with_drafter": with_drafter["engine"]["start_s"],
            "without_drafter": without["engine"]["start_s"],
        },
    }


def pass_timing(p: dict[str, Any]) -> dict[str, Any]:
    reqs = p["requests"]
    tokens = sum(len(r["tokens"]) for r in reqs)
    # time per output token after the first, as `vllm bench serve` reports TPOT
    tpot = [
        (r["e2e_s"] - r["ttft_s"]) / (len(r["tokens"]) - 1)
        for r in reqs
        if r["ttft_s"] is not None and len(r["tokens"]) > 1
    ]
    e2e = [r["e2e_s"] for r in reqs]
    return {
        "output_tokens": tokens,
        "wall_s": p["wall_s"],
        "output_tokens_per_s": tokens / p["wall_s"],
        "mean_tpot_ms": 1000 * mean(tpot) if tpot else None,
        "mean_e2e_s": mean(e2e),
        "median_e2e_s": median(e2e),
    }
