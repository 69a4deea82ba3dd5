"""`eaglezoo compare A B`: two drafters of one target on the same prompts, in the paper's style: per bucket the
acceptance length of each and the ratio B/A with a paired bootstrap interval over prompts. Each drafter's
figure is also given as the peers count it from the same steps, so it lines up with a published number:
vLLM and speculators pool (1 + accepted / drafts over every step), SpecForge averages each request's own
acceptance length (vLLM #42508), SGLang divides completion tokens by verify steps (the prefill's token
included), pooled over requests."""

from __future__ import annotations

import math
from statistics import mean
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import __version__
from .errors import BadInput, UsageError
from .limits import MAX_K, MAX_PROMPTS
from .report_versions import SCHEMA_VERSION, SchemaVersion
from .reproduce import Reproduction, reproduction
from .verify.acceptance import INTERVAL, SEED, bootstrap_interval, pooled_length
from .verify.report import VerifyReport
from .verify.report.build import built
from .verify.saved import validated

Verdict = Literal["B above A", "B below A", "indistinguishable"]
Step = tuple[str, list[int], list[int]]  # a prompt's bucket, and its accepted tokens per verify step by A, by B
RELATIVE = 1e-6  # figures written by json round-trip exactly; a ratio recomputed differs by a few ulps


def verdict_of(interval: list[float], prompts: int) -> Verdict:
    """At 95%: B/A's interval wholly above 1, wholly below it, or holding it; one prompt settles nothing (its
    bootstrap interval has no width)."""
    low, high = interval
    if prompts < 2:
        return "indistinguishable"
    return "B above A" if low > 1 else "B below A" if high < 1 else "indistinguishable"


class Row(BaseModel):
    """One bucket (or every prompt): A's and B's acceptance lengths, B/A and what it says at 95%."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    bucket: str
    prompts: int
    a: float
    """A's acceptance length, pooled as vLLM counts it."""
    b: float
    """B's."""
    ratio: float
    """b / a."""
    interval: list[float]
    """B/A's 95% paired bootstrap interval over prompts."""
    verdict: Verdict | None = None
    """B above A, below it, or indistinguishable, from the interval (said when a report written before verdicts is
    read)."""

    @model_validator(mode="after")
    def _said(self) -> Row:
        if len(self.interval) != 2 or not all(map(math.isfinite, self.interval)) or self.interval[0] > self.interval[1]:
            raise ValueError("interval is not [low, high]; expected two numbers, low first")
        if not all(map(math.isfinite, (self.a, self.b, self.ratio))) or self.a < 1 or self.b < 1 or self.prompts < 1:
            raise ValueError(
                f"a is {self.a:g} and b {self.b:g} over {self.prompts} prompts; expected at least 1 "
                "prompt and acceptance lengths of at least 1"
            )
        if not math.isclose(self.ratio, self.b / self.a, rel_tol=RELATIVE):
            raise ValueError(f"ratio is {self.ratio:g}; expected b / a ({self.b / self.a:g})")
        low, high = self.interval
        if not low * (1 - RELATIVE) <= self.ratio <= high * (1 + RELATIVE):
            raise ValueError(f"ratio is {self.ratio:g}, outside its interval [{low:g}, {high:g}]; expected it inside")
        said = verdict_of(self.interval, self.prompts)
        if self.verdict not in (None, said):
            raise ValueError(f"verdict is {self.verdict!r}; expected {said!r}, which its interval says")
        self.verdict = said
        return self


class PerPosition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    a: list[float]
    b: list[float]


class CompareReport(BaseModel):
    """Two drafters of one target (or one drafter on two engines) on the same prompts."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: Literal["compare"] = "compare"
    """Which command wrote it."""
    schema_version: SchemaVersion = SCHEMA_VERSION
    """The layout it was written in (absent: 0); a saved report is upgraded to this version's when read."""
    a: str
    """The reference drafter."""
    b: str
    """The drafter compared with it."""
    target: str
    """The target both were measured against."""
    engine: str
    """A's engine: name and version."""
    engine_b: str
    """B's engine."""
    num_spec_tokens: int
    """K."""
    rows: Annotated[list[Row], Field(max_length=MAX_PROMPTS + 1)]
    """Per bucket, then the row of every prompt: each acceptance length, B/A, its interval and the verdict."""
    per_position: PerPosition
    """Each side's per-position acceptance."""
    peers: dict[Literal["a", "b"], dict[Literal["vllm", "specforge", "sglang"], float]]
    """Each side's acceptance length as vLLM, SpecForge and SGLang count it."""
    interval: str = INTERVAL.replace("over prompts", "over prompts, paired")
    """How the intervals were computed."""
    serve: list[str] = []
    """B's serving path, as serve-config prints it."""
    reproduction: Reproduction | None = None
    """What it takes to run it again: the command, versions, the prompt set's hash, seeds, the machine (absent from
    reports written before it)."""
    eaglezoo_version: str = __version__
    """The eaglezoo that measured."""

    @model_validator(mode="after")
    def _consistent(self) -> CompareReport:
        problem = compare_problem(self)
        if problem:
            raise ValueError(problem)
        return self


def compare_problem(r: CompareReport) -> str | None:
    """What compare's figures say of each other (as 'FIELD is ...; expected ...'), or None: K in range, a row per
    bucket and the last one over every prompt (the peers' vLLM figure), lengths up to K+1, K rates a side."""
    k = r.num_spec_tokens
    if not 1 <= k <= MAX_K:
        return f"num_spec_tokens is {k}; expected a whole number from 1 to {MAX_K}"
    if not r.rows:
        return "rows is empty; expected a row per bucket and one for all prompts"
    for i, row in enumerate(r.rows):
        if max(row.a, row.b) > k + 1:
            return f"rows[{i}] holds lengths {row.a:g}, {row.b:g}; expected acceptance lengths from 1 to K+1 ({k + 1})"
    every = r.rows[-1]
    if len(r.rows) > 1 and every.prompts != sum(row.prompts for row in r.rows[:-1]):
        return (
            f"rows[{len(r.rows) - 1}].prompts is {every.prompts}; expected the row of every prompt, the sum of "
            f"the buckets' ({sum(row.prompts for row in r.rows[:-1])})"
        )
    for side in ("a", "b"):
        rates = getattr(r.per_position, side)
        if len(rates) != k or not all(math.isfinite(x) and 0 <= x <= 1 for x in rates):
            return f"per_position.{side} is not K ({k}) rates; expected K numbers from 0 to 1"
        counted, pooled = r.peers.get(side, {}), getattr(every, side)
        if "vllm" in counted and not math.isclose(counted["vllm"], pooled, rel_tol=RELATIVE):
            return (
                f"peers.{side}.vllm is {counted['vllm']:g}; expected the pooled length of every prompt "
                f"(rows[{len(r.rows) - 1}].{side}, {pooled:g})"
            )
        # SGLang's counts each request's prefill token too: up to one more than K+1 (a request of one full step)
        if not all(math.isfinite(x) and 1 <= x <= k + (2 if peer == "sglang" else 1) for peer, x in counted.items()):
            return f"peers.{side} holds a length outside 1 to K+1 ({k + 1}; K+2 as SGLang counts); expected lengths"
    return None


def same_target(a: VerifyReport, b: VerifyReport) -> None:
    if a.target != b.target:
        raise UsageError(
            f"the two drafters were measured against different targets ({a.target} and {b.target})",
            hint="compare drafters of one target: give --target, or two registry ids of one target",
        )
    if [p.index for p in a.per_prompt] != [p.index for p in b.per_prompt]:
        raise UsageError(
            "the two runs measured different prompts (a prompt fits one side's context, not the other's)",
            hint="give prompts both sides' contexts fit (--max-new-tokens, --prompts, --max-model-len)",
        )


def both_measured(a: VerifyReport, b: VerifyReport) -> None:
    """A side with no drafts has no acceptance length: a ratio of the 1.0 it would default to is made up."""
    unmeasured = [side for side, r in (("A", a), ("B", b)) if r.num_drafts == 0]
    if unmeasured:
        raise UsageError(
            f"no drafts were measured for {' and '.join(unmeasured)}: every continuation is too short "
            f"for K={a.num_spec_tokens}",
            hint="raise --max-new-tokens above -k",
        )


def compare(a: VerifyReport, b: VerifyReport) -> CompareReport:
    same_target(a, b)
    both_measured(a, b)
    steps = [(p.bucket, p.accepted, q.accepted) for p, q in zip(a.per_prompt, b.per_prompt, strict=True)]
    by_bucket: dict[str, list[Step]] = {}
    for s in steps:
        by_bucket.setdefault(s[0], []).append(s)
    buckets = sorted(by_bucket)
    rows = [row(name, by_bucket[name]) for name in buckets]
    if len(buckets) > 1:  # the row of every prompt, under a name no bucket of the prompts has
        rows.append(row(next(n for n in ("all", "all prompts", "(every prompt)") if n not in buckets), steps))
    return built(
        CompareReport,
        a=a.drafter,
        b=b.drafter,
        target=a.target,
        engine=engine_name(a),
        engine_b=engine_name(b),
        num_spec_tokens=a.num_spec_tokens,
        rows=rows,
        per_position={"a": a.acceptance_per_position, "b": b.acceptance_per_position},
        peers={"a": peers([s[1] for s in steps]), "b": peers([s[2] for s in steps])},
        serve=b.serve,
        reproduction=compared_reproduction(a, b),
    )


def compared_reproduction(a: VerifyReport, b: VerifyReport) -> Reproduction:
    ps = a.prompt_set
    engines = engine_name(a) if engine_name(a) == engine_name(b) else f"{engine_name(a)} (A), {engine_name(b)} (B)"
    return reproduction(
        engine=engines,
        prompt_set=ps.name if ps else None,
        prompts_sha256=ps.sha256 if ps else None,
        seed=a.sampling.seed,
        bootstrap_seed=SEED,
    )


def engine_name(r: VerifyReport) -> str:
    return f"{r.engine.name} {r.engine.version or ''}".strip()


def row(bucket: str, steps: list[Step]) -> Row:
    a, b = [s[1] for s in steps], [s[2] for s in steps]

    def ratio(pick: list[Step]) -> float:
        return pooled_length([s[2] for s in pick]) / pooled_length([s[1] for s in pick])

    return Row(
        bucket=bucket,
        prompts=len(steps),
        a=pooled_length(a),
        b=pooled_length(b),
        ratio=ratio(steps),
        interval=bootstrap_interval(steps, ratio),
    )


def peers(requests: list[list[int]]) -> dict[str, float]:
    """One drafter's acceptance length as each peer defines it, from the same verify steps."""
    measured = [r for r in requests if r]
    completion = [1 + sum(a + 1 for a in r) for r in measured]
    return {
        "vllm": pooled_length(
            measured
        ),  # 1 + accepted / drafts, pooled (also speculators, which reads vLLM's counters)
        "specforge": mean(1 + sum(r) / len(r) for r in measured) if measured else 1.0,  # mean of per-request ALs
        "sglang": sum(completion) / sum(len(r) for r in measured) if measured else 1.0,  # tokens / verify steps
    }


def compare_from(data: dict[str, Any], where: str) -> CompareReport:
    """A saved compare report, refused (one BadInput naming the field) unless its figures are ones compare writes
    (the model's cross-field checks, which its builder meets too): the page is drawn from them."""

    def refuse(what: str) -> BadInput:
        return BadInput(f"{where}: {what}", hint="give the file that eaglezoo compare --report FILE wrote")

    report: CompareReport = validated(CompareReport, data, refuse)
    return report  # the model's own checks: every figure against the others
