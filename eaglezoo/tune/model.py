"""The tune report and its parts (docs/report.md is generated from these models: each field says what it means).
Fields added after the first tune reports are optional, so those reports still read. The figures are checked
against each other in the models (a median is its repeats' median, inside its interval; the grid is whole and
the decisions are its cells), so a report tune could not have written is refused when it is read, as when built."""

from __future__ import annotations

import math
from statistics import median
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .. import __version__
from ..limits import MAX_CONCURRENCY, MAX_LEVELS, MAX_TUNE_K
from ..report_versions import SCHEMA_VERSION, SchemaVersion
from ..reproduce import Reproduction
from ..verify.report import PassTiming
from .stats import spread_pct

Verdict = Literal["wins", "loses", "too close to call"]
Pair = Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(min_length=2, max_length=2)]  # [low, high]
Throughput = Annotated[float, Field(gt=0, allow_inf_nan=False)]  # output tokens/s
RELATIVE = 1e-9  # figures written by json round-trip exactly


def median_problem(value: float, repeats: list[float] | None, interval: list[float] | None) -> str | None:
    """A median figure against its repeats and its interval (as 'FIELD is ...; expected ...'), or None."""
    if interval is not None and interval[0] > interval[1]:
        return f"interval is {interval}; expected [low, high], low first"
    if repeats is None:
        return None
    if not repeats:
        return "repeats is empty; expected the tokens/s of each repeat"
    mid = median(repeats)
    if not math.isclose(value, mid, rel_tol=RELATIVE):
        return f"output_tokens_per_s is {value:g}; expected the median of its repeats ({mid:g})"
    if interval is not None and not (min(repeats) <= interval[0] <= mid <= interval[1] <= max(repeats)):
        return (
            f"interval is [{interval[0]:g}, {interval[1]:g}]; expected two of its repeats around their median ({mid:g})"
        )
    return None


class Latency(BaseModel):
    """Per-request latencies over every measured repeat, as `vllm bench serve`, GuideLLM and AIPerf name them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    ttft_p50_ms: float
    """Time to first token, median (ms): from the request's submission to its first token."""
    ttft_p90_ms: float
    """Time to first token, 90th percentile (ms)."""
    tpot_p50_ms: float | None
    """Time per output token after the first, median over requests (ms): each request's mean inter-token latency.
    vLLM 0.32's offline engine keeps no per-token timestamps, so the per-token ITL distribution is not reported."""
    tpot_p90_ms: float | None
    """Time per output token after the first, 90th percentile over requests (ms)."""
    e2e_p50_s: float
    """End-to-end request latency, median (s)."""
    e2e_p90_s: float
    """End-to-end request latency, 90th percentile (s)."""


class Cell(BaseModel):
    """One (K, load) cell: measured in repeats after a warm-up pass."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    k: int
    """Speculative tokens; 0: without the drafter."""
    concurrency: int
    """Requests in flight."""
    output_tokens_per_s: Throughput
    """The median over the repeats of output tokens per second."""
    mean_tpot_ms: float | None
    """Mean time per output token after the first (ms), over every request measured."""
    acceptance_length: float | None
    """The engine's own mean acceptance length at this K and load (null at K = 0)."""
    acceptance_per_position: list[float] | None = None
    """The engine's acceptance rate at each draft position."""
    repeats: list[Throughput] | None = None
    """Output tokens/s of each repeat, in the order measured: repeat i of every cell at one load is from round i."""
    interval: Pair | None = None
    """The interval of the median (order statistics of the repeats; coverage in interval_coverage)."""
    interval_coverage: float | None = None
    """How often such an interval covers the true median (1 - 2 P(Binomial(n, 1/2) < j))."""
    spread_pct: float | None = None
    """The repeats' range as a percentage of their median."""
    passes_per_repeat: int | None = None
    """Passes of the prompt set in each repeat (enough for the minimum tokens and seconds)."""
    latency: Latency | None = None
    """TTFT, TPOT and end-to-end latency percentiles over every request measured."""

    @model_validator(mode="after")
    def _consistent(self) -> Cell:
        problem = median_problem(self.output_tokens_per_s, self.repeats, self.interval)
        if (
            problem is None
            and self.repeats
            and self.spread_pct is not None
            and not math.isclose(self.spread_pct, spread_pct(self.repeats), rel_tol=RELATIVE, abs_tol=RELATIVE)
        ):
            problem = f"spread_pct is {self.spread_pct:g}; expected its repeats' ({spread_pct(self.repeats):g})"
        if problem:
            raise ValueError(problem)
        return self


class Choice(BaseModel):
    """The decision at one load."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    concurrency: int
    """The load."""
    k: int
    """The K chosen: the best median, or where that is too close to call the simpler configuration."""
    output_tokens_per_s: float
    """The chosen cell's median output tokens/s."""
    speedup: float
    """Against K = 0 at this load, medians."""
    best_k: int | None = None
    """The K with the highest median (may differ from k when too close to call)."""
    too_close: bool = False
    """The best K's interval is not told apart from another K's: too close to call."""
    contenders: list[int] = []
    """The Ks whose intervals are not told apart from the best's (the best included)."""
    settled_after: int | None = None
    """Repeats of the contending cells when the decision stopped (settled, or the budget spent)."""


class TuneEngine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Literal["vllm", "llamacpp"] = "vllm"
    version: str | None
    device: str
    dtype: str


class ConfirmedPass(PassTiming):
    """The recommended configuration at one load, measured as the cells are, and judged against their intervals."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    concurrency: int
    """The load."""
    repeats: list[Throughput] | None = None
    """Output tokens/s of each repeat (output_tokens_per_s is their median)."""
    interval: Pair | None = None
    """The interval of the median."""
    latency: Latency | None = None
    """TTFT, TPOT and end-to-end latency percentiles."""
    against_no_speculation: Verdict | None = None
    """Against K = 0's interval at this load."""
    against_best_static: Verdict | None = None
    """Against the best static K's interval at this load."""

    @model_validator(mode="after")
    def _consistent(self) -> ConfirmedPass:
        problem = median_problem(self.output_tokens_per_s, self.repeats, self.interval)
        if problem:
            raise ValueError(problem)
        return self


class StaticPass(BaseModel):
    model_config = ConfigDict(extra="forbid")

    concurrency: int
    output_tokens_per_s: float


class Confirmation(BaseModel):
    """The recommended configuration run once more (with the same repeats), beside the best static K's cells."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schedule: list[ConfirmedPass]
    """Per load: the configuration's figures and verdicts."""
    best_static_k: int
    """The best single K over every load (geometric mean of the speedups)."""
    best_static: list[StaticPass]
    """That K's medians per load."""
    config: dict[Any, Any] | None = None
    """The --speculative-config that was run (an all-zero table where no speculation is recommended)."""
    verdict: Literal["confirmed", "failed", "not judged"] | None = None
    """failed: it loses to no speculation or to the best static K at some load (exit 1, the simpler configuration
    recommended instead); not judged: no speculation was recommended, so the run only shows what a table costs."""


class NoSpeculation(BaseModel):
    """At one load, the K table's throughput against serving with no speculative config at all."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    concurrency: int
    """The load."""
    table_k: int
    """The K the table gives at this load."""
    table_tokens_per_s: float
    """The table's median (the confirmation run)."""
    no_speculation_tokens_per_s: float
    """K = 0's median: the engine started without a speculative config."""
    ratio: float
    """Table / no speculation."""
    verdict: Verdict
    """The table against no speculation, by their intervals; a loss where the table's K is 0 is vLLM #49986."""

    @model_validator(mode="after")
    def _consistent(self) -> NoSpeculation:
        expected = self.table_tokens_per_s / self.no_speculation_tokens_per_s if self.no_speculation_tokens_per_s else 0
        if not math.isclose(self.ratio, expected, rel_tol=RELATIVE):
            raise ValueError(
                f"ratio is {self.ratio:g}; expected table_tokens_per_s / no_speculation_tokens_per_s ({expected:g})"
            )
        return self


class AdaptiveLevel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    concurrency: int
    output_tokens_per_s: float
    interval: Pair
    against_no_speculation: Verdict


class Adaptive(BaseModel):
    """vLLM's online K selection (enable_adaptive_verification) measured as one more column."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    config: dict[Any, Any]
    """The --speculative-config run."""
    levels: list[AdaptiveLevel]
    """Per load: its median, interval, and verdict against no speculation."""


class PMinLevel(BaseModel):
    """llama.cpp's --spec-draft-p-min tried at one load, at the K decided there (where that is 0, the drafting K
    with the best median), measured as the cells are."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    concurrency: int
    """The load (and the server's slots, -np)."""
    k: int
    """The K it was tried at."""
    p_min: float
    """The p-min tried."""
    output_tokens_per_s: Throughput
    """The median over the repeats."""
    repeats: list[Throughput] | None = None
    """Output tokens/s of each repeat."""
    interval: Pair | None = None
    """The interval of the median."""
    acceptance_length: float | None = None
    """The server's mean acceptance length with this p-min."""
    against_p_min_0: Verdict
    """Against the grid's cell at this K and load (p-min 0), by their intervals: chosen only where it wins."""

    @model_validator(mode="after")
    def _consistent(self) -> PMinLevel:
        problem = median_problem(self.output_tokens_per_s, self.repeats, self.interval)
        if problem:
            raise ValueError(problem)
        return self


class LlamacppLevel(BaseModel):
    """The llama-server to run at one load: as many slots as the load, K and p-min as tune chose them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    concurrency: int
    """The load: the server's parallel slots (-np)."""
    k: int
    """--spec-draft-n-max (0: the target served alone, no drafter)."""
    p_min: float
    """--spec-draft-p-min."""
    command: str
    """The llama-server command (serving.llamacpp_serve_command)."""


class LlamacppTune(BaseModel):
    """tune on llama.cpp: one server per load, since llama-server takes one K for all its slots."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    build: str
    """The llama.cpp build whose source the flags were read from."""
    p_min_grid: list[float]
    """The p-min values measured: 0 on the whole grid, the others at the decided K per load."""
    p_min: list[PMinLevel]
    """Per load: the other p-min, measured and judged against p-min 0 at the same K."""
    levels: list[LlamacppLevel]
    """Per load: the command to run."""
    steps: list[str]
    """The target's and the drafter's GGUF first (as serve-config --engine llamacpp prints them)."""


class Placement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    measured: str  # where this ran
    entry: str | None  # the registry entry's runner class


class KFloor(BaseModel):
    model_config = ConfigDict(extra="forbid")

    per_position: list[float] | None
    mean_acceptance_length: float | None


class Sampling(BaseModel):
    """How every cell was measured: the rule that decides when to stop."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    warmup_passes: int
    """Passes of the prompt set run and discarded before each cell's repeats."""
    min_tokens: int
    """Each repeat generates at least this many tokens (passes of the prompt set added until it does)."""
    min_seconds: float
    """Each repeat lasts at least this long (judged on the warm-up pass)."""
    min_repeats: int
    """Repeats of every cell before any decision."""
    max_repeats: int
    """The budget: a contending cell is repeated up to this many times, then the decision says too close to call."""
    budget_s: float | None = None
    """The wall time tune was given (--budget, seconds; null: no limit or a report from before it): a round it could
    not pay for was cut, and the notes say so."""
    interval_level: float
    """The coverage the interval of a median is chosen for, where the repeats allow it."""
    separation_margin: float
    """Two intervals are told apart only if they stand this share of the lower median apart."""


class CellRepeats(BaseModel):
    """The repeats one cell of the grid took (the contending cells take more)."""

    model_config = ConfigDict(extra="forbid")

    k: int
    concurrency: int
    repeats: int = Field(ge=1)


class Cost(BaseModel):
    """Where tune's time went: engine starts, measuring, wall time, repeats per cell, beside one pass per cell.
    The fields after `repeats` came later: older reports lack them (null)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    engine_s: float
    """Engine time of the whole tune (starts, warm-ups, repeats, confirmation)."""
    single_pass_s: float
    """What one pass per cell and per confirmation load would have cost, with the same engine starts."""
    repeats: int
    """Repeats measured in all."""
    engine_starts: int | None = Field(None, ge=1)
    """Engines started (a configuration whose engine the worker does not hold warm starts a fresh one)."""
    start_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    """Seconds the engine starts took, together (as each engine measured its own start)."""
    measure_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    """Engine time outside the starts: warm-ups, repeats, the confirmation and the worker's round trips."""
    wall_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    """tune's wall time, from the engine session's opening to the last measurement."""
    repeats_per_cell: list[CellRepeats] | None = None
    """Repeats each grid cell took, K then concurrency."""
    one_pass_starts: int | None = Field(None, ge=1)
    """Engine starts of one pass per cell: one engine per K (0 to k_max) and one for the confirmation."""
    one_pass_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    """One pass per cell with one engine per configuration: one_pass_starts mean starts and one median pass per
    cell and per confirmation load (the hand sweep tune is compared with)."""

    @model_validator(mode="after")
    def _consistent(self) -> Cost:
        if self.repeats_per_cell is not None and sum(x.repeats for x in self.repeats_per_cell) > self.repeats:
            raise ValueError("repeats_per_cell adds up to more than repeats; expected the grid's share of them")
        if self.start_s is not None and self.start_s > self.engine_s * (1 + RELATIVE):
            raise ValueError(f"start_s is {self.start_s:g}; expected at most engine_s ({self.engine_s:g})")
        return self


class TuneReport(BaseModel):
    """One tune run: the grid, the decision as each engine's own config, its confirmation."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: Literal["tune"] = "tune"
    """Which command wrote it."""
    schema_version: SchemaVersion = SCHEMA_VERSION
    """The layout it was written in (absent: 0); a saved report is upgraded to this version's when read."""
    drafter: str
    """The drafter measured."""
    target: str
    """The target as the engine loaded it."""
    engine: TuneEngine
    """The engine measured on: vLLM's version, device and dtype."""
    k_max: int
    """Every K from 0 (no drafter) to this was measured."""
    concurrency: list[int]
    """The loads measured (requests in flight), rising."""
    num_prompts: int
    """Prompts in each pass."""
    max_new_tokens: int
    """Tokens generated per prompt."""
    grid: Annotated[list[Cell], Field(max_length=(MAX_TUNE_K + 1) * MAX_LEVELS)]
    """Every (K, load) cell: median output tokens/s with its interval and repeats, latencies, the engine's
    acceptance."""
    decision: Annotated[list[Choice], Field(max_length=MAX_LEVELS)]
    """Per load, the K with the most output tokens/s (K = 0 where speculation loses; the simpler where too close)."""
    schedule: list[list[int]]
    """vLLM's num_speculative_tokens_per_batch_size: [[first batch size, last batch size, K], ...]."""
    basis: str
    """What the decision rests on, in words."""
    vllm_speculative_config: dict[Any, Any]
    """The --speculative-config that serves the schedule."""
    vllm_command: str
    """The vllm serve command with it (without it where every K of the table is 0: no speculation)."""
    convert_command: str | None = None
    """`eaglezoo convert` first, where vLLM would not read the drafter as given (as serve-config prints it): the
    commands serve the folder it writes."""
    sglang_static_k: int
    """SGLang takes one K: the best over the loads (geometric mean of the speedups)."""
    sglang_command: str | None
    """The SGLang command at that K (null when it is 0)."""
    confirmation: Confirmation
    """The recommended configuration run once more, judged against no speculation and the best static K."""
    recommended: Literal["no speculation", "static", "table"] | None = None
    """What to serve: no speculative config, one static K, or the per-batch-size table (the simplest that the
    measurements support; the simpler one where the table failed its confirmation)."""
    recommended_command: str | None = None
    """The vllm serve command of the recommendation (vllm serve without --speculative-config for none; a report
    written before it: its table's, report_versions.py)."""
    no_speculation: list[NoSpeculation] = []
    """The table against no speculation at all, at every load."""
    adaptive: Adaptive | None = None
    """vLLM's online K selection as one more column, where the hardware allows it (the notes say why not)."""
    sglang_adaptive_config: dict[Any, Any] | None = None
    """SGLang's --speculative-adaptive-config JSON: per batch-size bucket (the smallest batch size it applies
    to), the candidate_steps the decision allows there."""
    sglang_adaptive_command: str | None = None
    """The SGLang command that serves it (the JSON written to sglang-adaptive.json)."""
    llamacpp: LlamacppTune | None = None
    """Where tune measured on llama.cpp: the p-min column and the llama-server command per load."""
    sampling: Sampling | None = None
    """How the cells were measured: warm-up, minimum tokens and seconds per repeat, repeats and their budget."""
    cost: Cost | None = None
    """Where tune's time went (engine starts, measuring, wall time, repeats per cell), beside one pass per cell."""
    hardware: Placement | None = None
    """Where this ran, beside the registry entry's hardware class."""
    floors: dict[str, KFloor] = {}
    """By K: the registry entry's floors, checked at every load."""
    failures: list[str] = []
    """A measured K below its floor, or a confirmation that loses to a simpler configuration (exit 1)."""
    notes: list[str] = []
    """What the reader must know (too close to call, interpolated loads, loads the prompts cannot fill, the
    dialect served, why the adaptive column did not run)."""
    reproduction: Reproduction | None = None
    """What it takes to run it again: the command, versions, the prompt set's hash, seeds, the machine (absent from
    reports written before it)."""
    eaglezoo_version: str = __version__
    """The eaglezoo that measured."""

    @model_validator(mode="after")
    def _consistent(self) -> TuneReport:
        problem = grid_problem(self) or decision_problem(self) or cost_problem(self)
        if problem:
            raise ValueError(problem)
        return self


def grid_problem(r: TuneReport) -> str | None:
    """The loads rising and bounded, the grid whole: one cell per K (0 to k_max) and load."""
    levels = r.concurrency
    if (
        not 1 <= r.k_max <= MAX_TUNE_K
        or not 1 <= len(levels) <= MAX_LEVELS
        or levels != sorted(set(levels))
        or not 1 <= levels[0] <= levels[-1] <= MAX_CONCURRENCY
    ):
        return (
            f"k_max {r.k_max} or concurrency {levels[:8]}; expected K from 1 to {MAX_TUNE_K} and distinct rising "
            f"levels from 1 to {MAX_CONCURRENCY}"
        )
    cells = {(c.k, c.concurrency) for c in r.grid}
    if len(cells) != len(r.grid) or cells != {(k, c) for k in range(r.k_max + 1) for c in levels}:
        return "grid is not one cell per K (0 to k_max) and concurrency; expected the whole grid"
    return None


def decision_problem(r: TuneReport) -> str | None:
    """Each decision is its cell's figure; the best static K's figures are its cells'."""
    grid = {(c.k, c.concurrency): c for c in r.grid}
    if [d.concurrency for d in r.decision] != r.concurrency:
        return "decision is not one choice per concurrency, in order"
    for d in r.decision:
        cell, base = grid.get((d.k, d.concurrency)), grid[(0, d.concurrency)]
        if (
            cell is None
            or d.output_tokens_per_s != cell.output_tokens_per_s
            or not math.isclose(d.speedup, cell.output_tokens_per_s / base.output_tokens_per_s, rel_tol=1e-6)
        ):
            return (
                f"decision at concurrency {d.concurrency} (K={d.k}) is not the grid's; expected a K from 0 to "
                f"{r.k_max}, its cell's tokens/s and its speedup over K=0"
            )
    static = r.confirmation.best_static_k
    for x in r.confirmation.best_static:
        cell = grid.get((static, x.concurrency))
        if cell is None or x.output_tokens_per_s != cell.output_tokens_per_s:
            return (
                f"confirmation.best_static at concurrency {x.concurrency} is not the grid's cell at K={static}; "
                "expected its tokens/s"
            )
    return None


def cost_problem(r: TuneReport) -> str | None:
    """The repeats per cell are the grid's."""
    if r.cost is None or r.cost.repeats_per_cell is None:
        return None
    grid = {(c.k, c.concurrency): len(c.repeats or []) for c in r.grid}
    given = {(x.k, x.concurrency): x.repeats for x in r.cost.repeats_per_cell}
    if given != grid:
        return "cost.repeats_per_cell is not the grid's; expected one entry per cell with its number of repeats"
    return None
