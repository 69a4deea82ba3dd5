"""`eaglezoo lint`: static checks of a drafter (and against its target) from configs, safetensors
headers and the few small tensors the value checks need. No forward pass.

Every finding has a severity, a stable code, a message and a hint; errors make `lint` exit 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Literal, TypeVar

import torch
from pydantic import BaseModel

from .checkpoint import formats
from .checkpoint.config import validate_config
from .checkpoint.formats.base import Reading, ReadOptions
from .checkpoint.layout import check_tensors, target_problems
from .checkpoint.spec import DrafterSpec
from .checkpoint.tensors import Checkpoint
from .convert import canonical_refs, compare_with_target, read_drafter, target_config
from .errors import EaglezooError
from .serving import EngineSupport, engine_support, schema_for

Severity = Literal["error", "warning", "info"]
T = TypeVar("T")
AUX_MISSING_HINT = ("engines then fall back to a default guess and acceptance silently collapses (vLLM #50170); "
                    "write eagle_aux_hidden_state_layer_ids explicitly")


class Finding(BaseModel):
    severity: Severity
    code: str
    message: str
    hint: str = ""


class LintReport(BaseModel):
    drafter: str
    target: str | None
    dialect: str | None
    eagle_version: str | None
    spec: DrafterSpec | None
    findings: list[Finding]
    engines: list[EngineSupport]
    bytes_read: int | None = None  # remote lint: bytes downloaded
    weights_bytes: int | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]


def lint(drafter_dir: Path, target_dir: Path | None = None, dialect: str | None = None,
         opts: ReadOptions | None = None) -> LintReport:
    tcfg = target_config(target_dir) if target_dir else None
    target = str(target_dir) if target_dir else None
    read, findings = read_tolerating_missing_aux(lambda o: read_drafter(drafter_dir, dialect, o, strict=False),
                                                 opts or ReadOptions())
    if read is None:
        return LintReport(drafter=str(drafter_dir), target=target, dialect=None, eagle_version=None, spec=None,
                          findings=findings, engines=[])
    reading, ckpt, cfg = read
    findings += lint_reading(reading, ckpt, tcfg, target_dir, cfg)
    findings += provenance_findings(drafter_dir, reading.spec)
    spec = reading.spec
    return LintReport(drafter=str(drafter_dir), target=target, dialect=reading.dialect, eagle_version=spec.eagle_version,
                      spec=spec, findings=findings, engines=engine_support(spec, schema_for(reading.dialect)))


def read_tolerating_missing_aux(read: Callable[[ReadOptions], T], opts: ReadOptions) -> tuple[T | None, list[Finding]]:
    """`read(opts)`; when only the aux ids are missing, that is a finding and the drafter is read again
    without them, so every other check still runs. (None, findings) when it cannot be read as a drafter;
    errors without a finding code (unreadable files, usage) are raised."""
    missing: list[Finding] = []
    for attempt in range(2):
        try:
            return read(opts), missing
        except EaglezooError as exc:
            if exc.code is None:
                raise
            if exc.code != "aux-ids-missing" or attempt:
                return None, [*missing, Finding(severity="error", code=exc.code, message=exc.message, hint=exc.hint or "")]
            missing.append(Finding(severity="error", code=exc.code, message=exc.message, hint=AUX_MISSING_HINT))
            opts.allow_missing_aux = True
    raise AssertionError("unreachable")


def provenance_findings(drafter_dir: Path, spec: DrafterSpec) -> list[Finding]:
    """A converted drafter must still say what conversion.json recorded (hand edits break drafters)."""
    record_path = drafter_dir / "conversion.json"
    if not record_path.is_file():
        return []
    import json
    try:
        recorded = DrafterSpec.model_validate(json.loads(record_path.read_text())["spec"])
    except (ValueError, KeyError, TypeError):
        return [Finding(severity="warning", code="provenance-unreadable", message="conversion.json is not readable")]
    out = []
    if recorded.aux and spec.aux and recorded.aux.boundary() != spec.aux.boundary():
        out.append(Finding(severity="error", code="aux-ids-changed",
                           message=f"the config selects boundary {spec.aux.boundary()}, but conversion.json recorded "
                                   f"{recorded.aux.boundary()}: the ids were edited after conversion",
                           hint="ids copied across conventions are off by one (vLLM #43671, #50170)"))
    changed = [f for f, v in spec.flags().items() if recorded.flags().get(f) != v]
    if changed:
        out.append(Finding(severity="error", code="flags-changed",
                           message=f"{', '.join(changed)} differ from what conversion.json recorded"))
    return out


def lint_reading(reading: Reading, ckpt: Checkpoint, tcfg: dict | None, target_dir: Path | None = None,
                 cfg: dict | None = None, max_value_bytes: int | None = None) -> list[Finding]:
    """All checks on a read drafter. `max_value_bytes` (remote lint) limits value checks to tensors
    up to that size, so that only norms, d2t/t2d and other small tensors are fetched."""
    spec = reading.spec
    out: list[Finding] = []

    def add(severity: Severity, code: str, message: str, hint: str = "") -> None:
        out.append(Finding(severity=severity, code=code, message=message, hint=hint))

    for w in reading.warnings:
        add("warning", "reader", w)
    if spec.aux is not None:
        add("info", "aux-ids", f"aux ids {list(spec.aux.ids)} ({spec.aux.convention}) = boundary {spec.aux.boundary()}; "
                               f"written for vLLM as {spec.aux.boundary()}, for SGLang/TRT-LLM as {spec.aux.layer_output()}")
    if tcfg is not None:
        for p in target_problems(spec.aux, spec.target_hidden_size, spec.vocab_size, tcfg):
            add("error", p.code, p.message, p.hint)
        if spec.aux is not None and 0 in spec.aux.boundary():
            add("warning", "aux-ids-embedding", "boundary id 0 captures the embedding output, not a layer")
        for w in compare_with_target(spec, tcfg):
            add("warning", "context-rope", w)

    refs = canonical_refs(reading, ckpt)
    problems = check_tensors(spec, refs)
    for p in problems:
        add("error", p.code, p.message, p.hint)
    if cfg is not None:
        _config_findings(cfg, reading, add)
    if not problems:
        _value_findings(spec, reading, ckpt, refs, target_dir, add, max_value_bytes)
    for e in engine_support(spec, schema_for(reading.dialect)):
        if not e.faithful:
            add("warning", "engine-unfaithful", f"{e.engine} cannot serve this drafter faithfully: {'; '.join(e.notes)}")
    return out


def _config_findings(cfg: dict, reading: Reading, add) -> None:
    top = cfg
    if "norm_before_residual" not in top:
        add("warning", "norm-before-residual-implicit", "norm_before_residual is not written: vLLM's HF path reads "
            "false, its speculators path true", "convert writes it explicitly (formats.md §14.14)")
    layer = cfg.get("transformer_layer_config", cfg)
    if layer.get("tie_word_embeddings") or top.get("tie_word_embeddings"):
        add("error", "tie-word-embeddings", "tie_word_embeddings is true: SGLang ties lm_head to embed_tokens and "
            "transformers may overwrite the draft-vocab lm_head", "write tie_word_embeddings: false")
    if "target_hidden_size" in top and top["target_hidden_size"] is None and reading.dialect != "speculators":
        add("warning", "target-hidden-null", "target_hidden_size is null: vLLM's HF path computes None * k and crashes")


def _value_findings(spec: DrafterSpec, reading: Reading, ckpt: Checkpoint, refs, target_dir, add,
                    max_bytes: int | None = None) -> None:
    back = {v: k for k, v in reading.renames.items()}
    # Remotely, only vectors (norms, d2t, t2d) are fetched: a tiny share of the weights.
    small = lambda name: max_bytes is None or (len(refs[name].shape) <= 1 and refs[name].nbytes <= max_bytes)  # noqa: E731
    nonfinite, skipped = [], []
    for name, ref in refs.items():
        if not ref.is_float:
            continue
        if not small(name):
            skipped.append(name)
            continue
        t = ckpt.load(back[name]).float()  # fp8 has no isfinite kernel; the float32 copy is exact
        if not torch.isfinite(t).all():
            nonfinite.append(name)
        if name.endswith(".weight") and "norm" in name and t.numel():
            if bool((t == 1).all()):
                add("warning", "norm-untrained", f"{name} is all ones: never trained, or defaulted by a converter "
                    "(speculators #812)")
            elif bool((t == 0).all()):
                add("error", "norm-zero", f"{name} is all zeros: the norm erases its input")
    if nonfinite:
        add("error", "nan-inf", f"NaN or Inf values in {', '.join(nonfinite)}")
    if skipped:
        add("info", "values-skipped", f"remote lint: values of {len(skipped)} large tensor(s) not downloaded "
            "(NaN/Inf and duplicated-slot checks need a local copy)")
    if spec.fc_norm:
        norms = [ckpt.load(back[f"fc_norm.{j}.weight"]) for j in range(spec.num_aux)]
        for a in range(len(norms)):
            for b in range(a + 1, len(norms)):
                if torch.equal(norms[a], norms[b]) and not bool((norms[a] == 1).all()):
                    add("warning", "duplicate-aux-slots", f"fc_norm.{a} and fc_norm.{b} are identical")
    if small("fc.weight"):
        fc = ckpt.load(back["fc.weight"])
        blocks = fc.reshape(fc.shape[0], spec.num_aux, spec.target_hidden_size)
        for a in range(spec.num_aux):
            for b in range(a + 1, spec.num_aux):
                if torch.equal(blocks[:, a], blocks[:, b]):
                    add("error", "duplicate-aux-slots", f"fc columns of aux slots {a} and {b} are identical")
    if spec.has_vocab_map and small("d2t"):
        _vocab_map_findings(spec, ckpt.load(back["d2t"]), ckpt.load(back["t2d"]) if "t2d" in back else None, add)
    if "embed_tokens.weight" in refs and target_dir is not None and small("embed_tokens.weight"):
        _embed_findings(ckpt.load(back["embed_tokens.weight"]), target_dir, add)


def _vocab_map_findings(spec: DrafterSpec, d2t: torch.Tensor, t2d: torch.Tensor | None, add) -> None:
    d2t = d2t.long()
    ids = torch.arange(spec.draft_vocab_size) + d2t
    if bool((d2t == 0).all()):
        add("warning", "vocab-map-trivial", f"d2t is all zeros: draft ids map to target ids 0..{spec.draft_vocab_size - 1}",
            "a real map keeps the most frequent tokens (SafeAILab #222, verl-SpeCo #66)")
    problems = []
    if (ids < 0).any() or (ids >= spec.vocab_size).any():
        problems.append("arange(V_d) + d2t leaves [0, vocab_size)")
    if len(ids) > 1 and not bool((ids[1:] > ids[:-1]).all()):
        problems.append("arange(V_d) + d2t is not strictly increasing")
    if t2d is not None:
        t2d = t2d.bool()
        if int(t2d.sum()) != spec.draft_vocab_size:
            problems.append(f"t2d marks {int(t2d.sum())} tokens, not draft_vocab_size {spec.draft_vocab_size}")
        elif not problems and not bool(t2d[ids].all()):
            problems.append("t2d does not mark the tokens d2t maps to")
    for p in problems:
        add("error", "vocab-map-invalid", p, "formats.md §3.3 invariants")


def _embed_findings(embed: torch.Tensor, target_dir: Path, add) -> None:
    try:
        target = Checkpoint(target_dir)
    except EaglezooError:
        return
    name = next((n for n in ("model.embed_tokens.weight", "embed_tokens.weight", "model.language_model.embed_tokens.weight")
                 if n in target.refs), None)
    if name is None:
        return
    theirs = target.load(name)
    if theirs.shape != embed.shape:
        add("error", "embed-shape", f"embed_tokens {list(embed.shape)} vs the target's {list(theirs.shape)}")
    elif not torch.equal(theirs.to(embed.dtype), embed):
        add("warning", "embed-differs", "embed_tokens differs from the target's: engines will not share it "
            "(vLLM compares with torch.equal); fine only if the drafter was trained with its own")


SMALL = 4 * 1024 * 1024  # value checks fetch tensors up to this size


def remote_lint(repo: str, target: str | None, revision: str | None = None, dialect: str | None = None,
                opts: ReadOptions | None = None):
    """Lint a drafter on the Hub from its config, safetensors headers and small tensors (range requests)."""
    from .hub.remote import RemoteCheckpoint, remote_target_config

    ckpt = RemoteCheckpoint(repo, revision)
    validate_config(ckpt.config, f"{repo}/config.json", "drafter")
    tcfg = remote_target_config(target, ckpt) if target else None
    name = dialect or formats.detect(ckpt.config, set(ckpt.refs), ckpt.metadata)
    reading, findings = read_tolerating_missing_aux(lambda o: formats.get(name).read(ckpt.config, ckpt, o),
                                                    opts or ReadOptions())
    spec = reading.spec if reading else None
    if reading is not None:
        findings += lint_reading(reading, ckpt, tcfg, None, ckpt.config, max_value_bytes=SMALL)
    return LintReport(drafter=repo, target=target, dialect=reading.dialect if reading else name,
                      eagle_version=spec.eagle_version if spec else None, spec=spec, findings=findings,
                      engines=engine_support(spec, schema_for(reading.dialect)) if spec else [],
                      bytes_read=ckpt.bytes_read, weights_bytes=ckpt.weights_bytes)
