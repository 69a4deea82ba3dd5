"""The verify report's models: `VerifyReport` and its typed parts, with the cross-field checks a schema cannot
say (`consistency_problem`), so a report verify could not read back cannot be built. Built by `build.py`."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from ... import __version__
from ...checkpoint.problems import Finding
from ...limits import MAX_K, MAX_LEVELS, MAX_NEW_TOKENS, MAX_PROMPTS, MAX_TEMPERATURE
from ...names import Thinking, VerifyEngine
from ...report_versions import SCHEMA_VERSION, SchemaVersion
from ...reproduce import Reproduction
from ..prompt_set import Bucket, PromptSet, Skipped

TOLERANCE = 1e-6  # floats written by json round-trip exactly; sums of K rates differ by a few ulps
FUTURE_SLACK = dt.timedelta(days=1)  # another machine's clock


def _one_line(text: str) -> str:
    if not (text.strip() and text.isprintable()):
        raise ValueError("expected one line of printable text")
    return text


Line = Annotated[str, AfterValidator(_one_line)]
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

    name: VerifyEngine = "native"
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


class VerifyReport(BaseModel):
    """One verify run, whatever the engine (docs/report.md, generated from this model)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: Literal["verify"] = "verify"
    """Which command wrote it."""
    schema_version: SchemaVersion = SCHEMA_VERSION
    """The layout it was written in (absent: 0); a saved report is upgraded to this version's when read."""
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
    gate: GateResult
    """PASS or FAIL where a floor gated, or "compared, not gated" and why; every floor with the figure and the
    difference (a report written before it: its verdict from its failures and floors, report_versions.py)."""
    prompt_set: PromptSet | None = None
    """The prompt set by name and hash, its size, and which rows this run took."""
    thinking: Thinking | None = None
    """The target's thinking mode in the chat prompts measured: the switch each sent, else the chat template's default
    (rendered with the switch on and off); unknown where the template has no switch or the prompts differ; null where
    no prompt went through a chat template (raw text sets no switch), and in a report written before it was kept."""
    reproduction: Reproduction | None = None
    """What it takes to run it again: the command, versions, the prompt set's hash, seeds, the machine."""
    serve: list[Line] = []
    """How to serve what was measured on vLLM: `eaglezoo convert` first where the engine would not read the drafter
    as given, then `vllm serve` (pages add the command to diagnose with, dev mode on, labelled; a report written
    before it: the `vllm serve` command of the drafter as measured, report_versions.py)."""
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
