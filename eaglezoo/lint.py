"""`eaglezoo lint`: static checks of a drafter (and against its target) from configs, safetensors
headers and the few small tensors the value checks need. No forward pass.

Every finding has a severity, a stable code, a message and a hint; errors make `lint` exit 1.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Literal, TypeVar

from pydantic import BaseModel

from .checkpoint import formats
from .checkpoint.config import target_config, validate_config
from .checkpoint.formats import gguf_read
from .checkpoint.formats.base import ReadOptions
from .checkpoint.formats.blocks import proposal_bound, proposed_k_findings
from .checkpoint.formats.llamacpp_converter import converter_findings
from .checkpoint.problems import (
    Finding,
    Severity,
    borrowed_head_findings,
    check_tensors,
    config_findings,
    family_findings,
    provenance_findings,
    target_findings,
    value_findings,
)
from .checkpoint.read import Drafter, interpret, read_config, read_drafter
from .checkpoint.spec import DrafterSpec
from .checkpoint.st_header import COMPLEX_CODES
from .checkpoint.traps import trap_findings
from .errors import EaglezooError
from .hub.remote import RemoteCheckpoint, remote_target_config
from .requirements import Requirements
from .serving import EngineSupport, engine_support, schema_for

T = TypeVar("T")
AUX_MISSING_HINT = (
    "engines then fall back to a default guess and acceptance silently collapses (vLLM #50170); "
    "write eagle_aux_hidden_state_layer_ids explicitly"
)


class LintReport(BaseModel):
    drafter: str
    target: str | None
    dialect: str | None
    eagle_version: str | None
    spec: DrafterSpec | None
    findings: list[Finding]
    engines: list[EngineSupport]
    level: Literal["checkpoint", "config"] = "checkpoint"  # config: a config alone, no tensors checked
    bytes_read: int | None = None  # remote lint: bytes downloaded
    weights_bytes: int | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]


def lint(
    drafter_dir: Path, target_dir: Path | None = None, dialect: str | None = None, opts: ReadOptions | None = None
) -> LintReport:
    tcfg = target_config(target_dir) if target_dir else None
    target = str(target_dir) if target_dir else None
    drafter, findings = read_tolerating(
        lambda o: read_drafter(drafter_dir, dialect, o, strict=False), opts or ReadOptions()
    )
    if drafter is None:
        return LintReport(
            drafter=str(drafter_dir),
            target=target,
            dialect=None,
            eagle_version=None,
            spec=None,
            findings=findings,
            engines=[],
        )
    findings += lint_drafter(drafter, tcfg, target_dir) + provenance_findings(drafter_dir, drafter.spec)
    return _report(str(drafter_dir), target, drafter, findings)


def lint_gguf(path: Path, target_dir: Path | None = None) -> LintReport:
    """Lint a drafter GGUF as llama.cpp reads it (checkpoint/formats/gguf_read.py): taps against the target's layers,
    flags against tensors, the vocabulary map, the family."""
    tcfg = target_config(target_dir) if target_dir else None
    facts = gguf_read.read(path)
    return LintReport(
        drafter=str(path),
        target=str(target_dir) if target_dir else None,
        dialect=f"gguf ({facts.arch})",
        eagle_version=gguf_read.eagle_version(facts),
        spec=None,
        findings=gguf_read.findings(facts, tcfg),
        engines=[],
    )


def lint_config(
    config_path: Path, target_dir: Path | None = None, dialect: str | None = None, opts: ReadOptions | None = None
) -> LintReport:
    """Lint a drafter's config alone (a trainer's template): its reading, its traps, its fit to the target."""
    tcfg = target_config(target_dir) if target_dir else None
    target = str(target_dir) if target_dir else None
    drafter, findings = read_tolerating(lambda o: read_config(config_path, dialect, o), opts or ReadOptions())
    if drafter is None:
        return LintReport(
            drafter=str(config_path),
            target=target,
            dialect=None,
            eagle_version=None,
            spec=None,
            findings=findings,
            engines=[],
            level="config",
        )
    if drafter.dialect is None:
        findings.append(
            Finding(
                severity="info",
                code="dialect-undetermined",
                message="the config names no dialect eaglezoo knows: read as a flat Llama-style "
                "EAGLE-3 config; the weights' tensor names decide the dialect",
                hint="lint the drafter's folder, or name the dialect with --from DIALECT",
            )
        )
    findings += lint_drafter(drafter, tcfg, target_dir)
    return _report(str(config_path), target, drafter, findings, level="config")


def _report(name: str, target: str | None, drafter: Drafter, findings: list[Finding], **remote) -> LintReport:
    spec = drafter.spec
    engines = engine_support(spec, schema_for(drafter.dialect))
    complex_weights = sorted(name for name, ref in drafter.refs.items() if ref.dtype in COMPLEX_CODES)
    for e in engines if complex_weights else []:  # the config is fine; the weights are what no engine loads
        e.faithful = False
        e.notes.append(f"loads {', '.join(complex_weights)} as real numbers, dropping the imaginary part")
    return LintReport(
        drafter=name,
        target=target,
        dialect=drafter.dialect,
        eagle_version=spec.eagle_version,
        spec=spec,
        findings=findings,
        engines=engines,
        **remote,
    )


# What a lint may read past, each a finding: how the read is relaxed to run every other check
TOLERATED = {
    "aux-ids-missing": "allow_missing_aux",
    "aux-convention-unknown": "allow_missing_aux",
    "flag-ambiguous": "trust_stored_flags",
}


def read_tolerating(read: Callable[[ReadOptions], T], opts: ReadOptions) -> tuple[T | None, list[Finding]]:
    """`read(opts)`; when only the aux ids (missing, or of an unknown convention) or an ambiguous flag stop it,
    that is a finding and the drafter is read again past it, so every other check still runs. (None, findings)
    when it cannot be read as a drafter; errors without a finding code (unreadable files, usage) are raised."""
    findings: list[Finding] = []
    while True:
        try:
            return read(opts), findings
        except EaglezooError as exc:
            if exc.code is None:
                raise
            hint = AUX_MISSING_HINT if exc.code == "aux-ids-missing" else exc.hint or ""
            findings.append(Finding(severity="error", code=exc.code, message=exc.message, hint=hint))
            relax = TOLERATED.get(exc.code)
            if relax is None or getattr(opts, relax):
                return None, findings
            opts = replace(opts, **{relax: True})


def lint_drafter(
    drafter: Drafter, tcfg: dict | None, target_dir: Path | None = None, max_value_bytes: int | None = None
) -> list[Finding]:
    """All checks on a read drafter. `max_value_bytes` (remote lint) limits value checks to tensors
    up to that size, so that only norms, d2t/t2d and other small tensors are fetched."""
    spec = drafter.spec
    out: list[Finding] = []

    def add(severity: Severity, code: str, message: str, hint: str = "") -> None:
        out.append(Finding(severity=severity, code=code, message=message, hint=hint))

    for w in drafter.reading.warnings:
        add("warning", "reader", w)
    if spec.aux is not None:
        add(
            "info",
            "aux-ids",
            f"aux ids {list(spec.aux.ids)} ({spec.aux.convention}) = boundary {spec.aux.boundary()}; "
            f"written for vLLM as {spec.aux.boundary()}, for SGLang/TRT-LLM as {spec.aux.layer_output()}",
        )
    if tcfg is not None:
        out += target_findings(spec, tcfg)
    problems = check_tensors(spec, drafter.refs) if drafter.has_weights else []
    out += problems
    if spec.family == "eagle3":  # the EAGLE-3 config traps; the other families have their own
        config_findings(drafter.config, drafter.dialect, add)
        out += trap_findings(drafter.config, tcfg)
        out += converter_findings(spec, drafter.config, drafter.dialect, tcfg)  # llama.cpp's own converter's bake
    out += family_findings(spec, drafter.dialect, drafter.config, tcfg) + borrowed_head_findings(spec, drafter.refs)
    out += proposed_k_findings(spec, drafter.dialect, drafter.config)
    out += mask_in_template(spec, target_dir)
    if drafter.has_weights and not problems:
        value_findings(spec, drafter.refs, drafter.load, target_dir, add, max_value_bytes)
    for e in engine_support(spec, schema_for(drafter.dialect)):
        if not e.faithful:
            add(
                "warning",
                "engine-unfaithful",
                f"{e.engine} cannot serve this drafter faithfully: {'; '.join(e.notes)}",
                "serve it with another engine (eaglezoo serve-config lists them)"
                + (", or convert it with --to eagle31" if spec.family == "eagle3" else ""),
            )
    return out


def mask_in_template(spec: DrafterSpec, target_dir: Path | None) -> list[Finding]:
    """A mask token the target's chat template writes into every conversation: the mask slots would hold a token
    the text itself carries (a user and an assistant turn, rendered and tokenised by the target's own tokenizer)."""
    mask = spec.family_fields.mask_token_id if spec.family_fields else None
    if mask is None or target_dir is None or not Path(target_dir).is_dir():
        return []
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
        if not tokenizer.chat_template:
            return []
        turns = [{"role": role, "content": "x"} for role in ("user", "assistant")]
        ids = tokenizer.apply_chat_template(turns, tokenize=True)
        ids = list(ids if isinstance(ids, list) else ids["input_ids"])  # a list, or a BatchEncoding (transformers 5)
    except Exception:  # noqa: BLE001 - a target without a usable tokenizer or template has nothing to check here
        return []
    if mask not in ids:
        return []
    return [
        Finding(
            severity="warning",
            code="mask-token-template",
            message=f"mask_token_id {mask} ({tokenizer.convert_ids_to_tokens(mask)!r}) is a token the target's "
            "chat template writes into every conversation",
            hint="the mask slots must hold a token the text never contains: train with one the template never emits",
        )
    ]


SMALL = 4 * 1024 * 1024  # value checks fetch tensors up to this size


def remote_lint(
    repo: str,
    target: str | None,
    revision: str | None = None,
    dialect: str | None = None,
    opts: ReadOptions | None = None,
):
    """Lint a drafter on the Hub from its config, safetensors headers and small tensors (range requests)."""
    ckpt = RemoteCheckpoint(repo, revision)
    validate_config(ckpt.config, f"{repo}/config.json", "drafter")
    tcfg = remote_target_config(target, ckpt) if target else None
    dialect = dialect or formats.detect(ckpt.config, set(ckpt.refs), ckpt.metadata)
    drafter, findings = read_tolerating(
        lambda o: Drafter(repo, ckpt.config, ckpt, interpret(ckpt.config, ckpt, dialect, o), o), opts or ReadOptions()
    )
    counted = {"bytes_read": ckpt.bytes_read, "weights_bytes": ckpt.weights_bytes}
    if drafter is None:
        return LintReport(
            drafter=repo,
            target=target,
            dialect=dialect,
            eagle_version=None,
            spec=None,
            findings=findings,
            engines=[],
            **counted,
        )
    findings += lint_drafter(drafter, tcfg, None, max_value_bytes=SMALL)
    counted["bytes_read"] = ckpt.bytes_read
    return _report(repo, target, drafter, findings, **counted)


def with_requirements(report: LintReport, req: Requirements) -> LintReport:
    """The report with what the drafter's declared requirements (its registry entry's) ask of the drafter itself."""
    if report.spec is None:
        return report
    return report.model_copy(
        update={"findings": report.findings + requirement_findings(report.spec, report.dialect, req)}
    )


def requirement_findings(spec: DrafterSpec, dialect: str | None, req: Requirements) -> list[Finding]:
    """A recommended K beyond what a block drafter drafts in one step (the K-beyond-block trap, as for the K a config
    proposes), and a trained context beyond the drafter's own positions."""
    out: list[Finding] = []
    most = proposal_bound(spec, dialect)
    if req.recommended_k is not None and most is not None and req.recommended_k > most:
        out.append(
            Finding(
                severity="error",
                code="requirement-k-beyond-block",
                message=f"the recommended K={req.recommended_k} ({req.source_of('recommended_k')}) is beyond the "
                f"{spec.family} drafter's block: it drafts at most {most} tokens a step",
                hint=f"fix requirements.recommended_k: {most} or less",
            )
        )
    positions = spec.max_position_embeddings
    if req.context_length is not None and positions and req.context_length > positions:
        out.append(
            Finding(
                severity="warning",
                code="requirement-context",
                message=f"requirements.context_length {req.context_length} ({req.source_of('context_length')}) is "
                f"beyond the drafter's max_position_embeddings {positions}",
                hint="check the trained context against the drafter's config",
            )
        )
    return out
