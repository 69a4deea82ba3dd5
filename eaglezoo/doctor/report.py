"""The doctor's report: a verdict, the findings that explain it, and the acceptance each trial measured."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .. import __version__
from ..errors import BadInput
from ..limits import MAX_K, MAX_PROMPTS
from ..report_versions import SCHEMA_VERSION, SchemaVersion
from ..verify.saved import validated

Verdict = Literal["healthy", "engine-config", "drafter", "target-mismatch", "workload"]
VERDICTS: tuple[Verdict, ...] = ("healthy", "engine-config", "drafter", "target-mismatch", "workload")


Code = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,63}$")]  # a stable cause code: docs/doctor.md lists each
Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]  # a timing's name
Rate = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
MAX_SIDES = 64  # sides measured, findings: one per suspect (a handful), far below this
SLACK = 1e-9  # a figure and its interval, written by json, round-trip exactly; sums differ by a few ulps


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Acceptance(_Model):
    """One side's acceptance on the diagnosis' prompts."""

    source: str
    """`server` (as measured there), `as served` (the native reference running the drafter and target the way
    the server loaded them), `reference` (the drafter and target named), or `fix: CAUSE` (as served, that cause
    alone fixed)."""
    mean_acceptance_length: float
    """1 + accepted / drafts, pooled over every verify step (vLLM's count)."""
    interval: list[float]
    """95% bootstrap interval of the acceptance length over prompts."""
    per_position: Annotated[list[Rate], Field(max_length=MAX_K)]
    """Acceptance rate at draft positions 1..K."""
    prompts: Count
    drafts: Count
    """Verify steps that drafted."""
    per_prompt: Annotated[list[float], Field(max_length=MAX_PROMPTS)] = []
    """Each prompt's acceptance length, in the prompts' order (empty where only counters were read)."""

    @model_validator(mode="after")
    def _consistent(self) -> Acceptance:
        problem = acceptance_problem(self)
        if problem:
            raise ValueError(problem)
        return self


class Finding(_Model):
    """One cause: what is wrong, the numbers that show it, and the exact change that fixes it."""

    cause: Code
    """Stable cause code (docs/doctor.md lists every one)."""
    verdict: Verdict
    """The kind of problem this cause is."""
    what: str
    """One sentence: what the engine does and what the drafter was trained for."""
    evidence: list[str]
    """Numbers from both sides."""
    fix: str
    """The exact change: a flag, a config key and value, a command."""
    restores: Annotated[float, Field(ge=1, le=MAX_K + 1, allow_inf_nan=False)] | None = None
    """Acceptance length measured with this fix applied alone (native trial), where one was run."""
    confirmed: bool
    """True when the fix trial restored the acceptance (or the fault is seen directly, as for a K of 0)."""


class Server(_Model):
    """What the server (or the deployment eaglezoo started) says about itself."""

    url: str | None
    engine: str
    version: str | None
    target: str
    drafter: str | None
    method: str | None
    k: Annotated[int, Field(ge=0, le=MAX_K)]
    k_table: list[Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=3, max_length=3)]] | None
    draft_sample_method: str | None
    max_model_len: int | None
    per_request_metrics: bool
    """Each response carried its own acceptance (vLLM's --per-request-spec-decode-metrics detailed)."""
    config_readable: bool
    """Its speculative config could be read (vLLM's /server_info, VLLM_SERVER_DEV_MODE=1)."""


class DoctorReport(_Model):
    kind: Literal["doctor"] = "doctor"
    schema_version: SchemaVersion = SCHEMA_VERSION
    """The layout it was written in (absent: 0); a saved report is upgraded to this version's when read."""
    eaglezoo_version: str = __version__
    verdict: Verdict
    summary: str
    """The verdict in one sentence, with the measured acceptance."""
    server: Server
    drafter: str
    """The drafter named (or the server's own, read from its folder)."""
    target: str
    """The target named (or the server's own)."""
    prompts: Count
    max_new_tokens: Count
    measured: Annotated[list[Acceptance], Field(max_length=MAX_SIDES)]
    """The server, the native reference of the drafter as served and as named, and each fix's trial."""
    findings: Annotated[list[Finding], Field(max_length=MAX_SIDES)]
    floors: Annotated[list[Rate], Field(max_length=MAX_K)] | None = None
    """The registry entry's per-position floors, where the drafter is an entry."""
    notes: list[str] = []
    timing: dict[Name, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = {}
    """Seconds: server, reference (every native trial), total; `target_passes` counts the target's native runs."""

    @model_validator(mode="after")
    def _consistent(self) -> DoctorReport:
        problem = next(
            (f"measured[{i}].{p}" for i, a in enumerate(self.measured) if (p := _depth_problem(a, self.server.k))), None
        )
        if problem:
            raise ValueError(problem)
        return self


def acceptance_problem(a: Acceptance) -> str | None:
    """What one side's figures must say of each other (as 'FIELD is ...; expected ...'), or None."""
    if len(a.interval) != 2 or not all(map(math.isfinite, a.interval)) or a.interval[0] > a.interval[1]:
        return f"interval is {a.interval[:4]}; expected [low, high], two numbers, low first"
    al, (low, high), top = a.mean_acceptance_length, a.interval, MAX_K + 1
    if not (math.isfinite(al) and 1 <= al <= top + SLACK):
        return f"mean_acceptance_length is {al:g}; expected a number from 1 to K+1 ({top})"
    if not low - SLACK <= al <= high + SLACK:
        return f"mean_acceptance_length is {al:g}, outside its interval [{low:g}, {high:g}]; expected it inside"
    if a.per_prompt and len(a.per_prompt) != a.prompts:
        return f"per_prompt holds {len(a.per_prompt)} values; expected one per prompt ({a.prompts}) or none"
    if not all(math.isfinite(x) and 1 <= x <= top + SLACK for x in a.per_prompt):
        return f"per_prompt holds a length outside 1 to K+1 ({top}); expected each prompt's acceptance length"
    return None


def _depth_problem(a: Acceptance, k: int) -> str | None:
    """A side measured at the server's K: at most K rates, a length of at most K+1 (a server without its K says 0)."""
    if k and len(a.per_position) > k:
        return f"per_position holds {len(a.per_position)} rates; expected at most one per draft position (K={k})"
    if k and a.mean_acceptance_length > k + 1 + SLACK:
        return f"mean_acceptance_length is {a.mean_acceptance_length:g}; expected a number from 1 to K+1 ({k + 1})"
    return None


def doctor_from(data: dict[str, Any], where: str) -> DoctorReport:
    """A saved doctor report, read strictly (its figures checked against each other); the first problem named by
    its field, worded as every report reader words it."""

    def refuse(what: str) -> BadInput:
        return BadInput(f"{where}: {what}", hint="give a report written by doctor --report")

    report: DoctorReport = validated(DoctorReport, data, refuse)
    return report
