"""The doctor's report: a verdict, the findings that explain it, and the acceptance each trial measured."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from .. import __version__
from ..errors import BadInput

Verdict = Literal["healthy", "engine-config", "drafter", "target-mismatch", "workload"]
VERDICTS: tuple[Verdict, ...] = ("healthy", "engine-config", "drafter", "target-mismatch", "workload")


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
    per_position: list[float]
    """Acceptance rate at draft positions 1..K."""
    prompts: int
    drafts: int
    """Verify steps that drafted."""
    per_prompt: list[float] = []
    """Each prompt's acceptance length, in the prompts' order (empty where only counters were read)."""


class Finding(_Model):
    """One cause: what is wrong, the numbers that show it, and the exact change that fixes it."""

    cause: str
    """Stable cause code (docs/doctor.md lists every one)."""
    verdict: Verdict
    """The kind of problem this cause is."""
    what: str
    """One sentence: what the engine does and what the drafter was trained for."""
    evidence: list[str]
    """Numbers from both sides."""
    fix: str
    """The exact change: a flag, a config key and value, a command."""
    restores: float | None = None
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
    k: int
    k_table: list[list[int]] | None
    draft_sample_method: str | None
    max_model_len: int | None
    per_request_metrics: bool
    """Each response carried its own acceptance (vLLM's --per-request-spec-decode-metrics detailed)."""
    config_readable: bool
    """Its speculative config could be read (vLLM's /server_info, VLLM_SERVER_DEV_MODE=1)."""


class DoctorReport(_Model):
    kind: Literal["doctor"] = "doctor"
    eaglezoo_version: str = __version__
    verdict: Verdict
    summary: str
    """The verdict in one sentence, with the measured acceptance."""
    server: Server
    drafter: str
    """The drafter named (or the server's own, read from its folder)."""
    target: str
    """The target named (or the server's own)."""
    prompts: int
    max_new_tokens: int
    measured: list[Acceptance]
    findings: list[Finding]
    floors: list[float] | None = None
    """The registry entry's per-position floors, where the drafter is an entry."""
    notes: list[str] = []
    timing: dict[str, float] = {}
    """Seconds: server, reference (every native trial), total; `target_passes` counts the target's native runs."""


def doctor_from(data: dict, where: str) -> DoctorReport:
    """A saved doctor report, read strictly; the first problem named by its field."""
    try:
        return DoctorReport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"])) or "the report"
        raise BadInput(f"{where}: {field}: {first['msg']}", hint="give a report written by doctor --report") from None
