"""`eaglezoo convert`: any dialect -> the canonical EAGLE 3.1 schema or the speculators format.

`plan()` reads configs and headers only and decides everything (dialect, config diff, renames,
drops with reasons, decisions, warnings); `apply()` streams the tensors into a temporary directory
beside OUT and renames it into place, so OUT either does not exist or is complete.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from . import __version__, formats
from .config_schema import validate_config
from .errors import BadInput, UsageError
from .formats.base import Reading, ReadOptions
from .fsutil import regular_file, staging, temp_dir_beside
from .layout import check_tensors
from .spec import DrafterSpec, effective_rope
from .st_writer import OutTensor, plan_output_order, stream_convert
from .tensors import Checkpoint, TensorRef

CONFIG_DTYPE_CODES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64"}


class Change(BaseModel):
    key: str
    before: Any = None
    after: Any = None


class Rename(BaseModel):
    source: str
    output: str


class Drop(BaseModel):
    name: str
    reason: str


class Plan(BaseModel):
    source: str
    dialect: str
    to: str
    source_files: list[str]
    spec: DrafterSpec
    config_diff: list[Change]
    renames: list[Rename]
    drops: list[Drop]
    decisions: list[str]
    warnings: list[str]
    dtype: str | None
    num_tensors: int
    num_bytes: int
    output_files: list[str] = ["config.json", "model.safetensors", "conversion.json"]


@dataclass
class ConvertRequest:
    source: Path
    to: str = "eagle31"
    dialect: str | None = None
    target: Path | None = None
    aux_layers: list[int] | None = None
    aux_convention: str | None = None
    flags: dict[str, bool] = field(default_factory=dict)
    dtype: str | None = None
    verifier: str | None = None
    origin: str | None = None  # "owner/name@sha" when the source came from the Hub


@dataclass
class Prepared:
    """A plan plus what apply() needs that does not belong in the report."""

    plan: Plan
    checkpoint: Checkpoint
    config: dict
    tensors: list[OutTensor]
    metadata: dict[str, str]
    origin: str | None = None


def read_json(path: Path, what: str) -> dict:
    regular_file(path, what)
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"{what}: {path} is not valid UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{what}: {path} is not valid JSON ({exc.args[0]})") from None
    except RecursionError:
        raise BadInput(f"{what}: {path} is nested too deeply to read") from None
    if not isinstance(value, dict):
        raise BadInput(f"{what}: {path} is not a JSON object")
    return value


def target_config(target: Path) -> dict:
    if not target.is_dir():
        raise UsageError(f"target {target}: not a directory")
    path = target / "config.json"
    cfg = validate_config(read_json(path, "target config"), str(path), "target")
    return cfg.get("text_config") or cfg  # multimodal targets keep the LM under text_config


def read_drafter(source: Path, dialect: str | None, opts: ReadOptions,
                 strict: bool = True) -> tuple[Reading, Checkpoint, dict]:
    """Config + headers -> a Reading with canonical names; with `strict`, the tensors must fit the config."""
    if not source.is_dir():
        raise UsageError(f"{source}: not a directory")
    path = source / "config.json"
    cfg = validate_config(read_json(path, "drafter config"), str(path), "drafter")
    ckpt = Checkpoint(source)
    ckpt.check_index()
    name = dialect or formats.detect(cfg, set(ckpt.refs), ckpt.metadata)
    reading = formats.get(name).read(cfg, ckpt, opts)
    spec = reading.spec
    if "model_type" not in spec.layer_config:
        spec.layer_config["model_type"] = {"mla": "deepseek_v3"}.get(spec.arch, spec.arch)
        reading.decisions.append(f"model_type absent: {spec.layer_config['model_type']!r} from the architecture")
    if not strict:
        return reading, ckpt, cfg
    problems = check_tensors(spec, canonical_refs(reading, ckpt))
    if problems:
        unexpected = [p.message.split()[1] for p in problems if p.code == "unexpected"]
        if unexpected:
            raise BadInput(f"{len(unexpected)} tensor(s) neither mapped nor dropped with a reason: "
                           f"{', '.join(_source_names(reading, unexpected))}")
        first = problems[0]
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise BadInput(first.message + more, hint=first.hint or None)
    return reading, ckpt, cfg


def canonical_refs(reading: Reading, ckpt: Checkpoint) -> dict[str, TensorRef]:
    return {reading.renames[src]: ref for src, ref in ckpt.refs.items() if src in reading.renames}


def canonical_state(reading: Reading, ckpt: Checkpoint) -> dict:
    """Every mapped tensor, loaded, under its canonical name (the drafter module's own names)."""
    return {reading.renames[src]: t for src, t in ckpt.load_all().items() if src in reading.renames}


def _source_names(reading: Reading, canonical: list[str]) -> list[str]:
    back = {v: k for k, v in reading.renames.items()}
    return [back.get(n, n) for n in canonical]


def plan(req: ConvertRequest) -> Prepared:
    if req.to not in formats.WRITERS:
        raise UsageError(f"unknown --to {req.to!r}", hint="use eagle31 or speculators")
    tcfg = target_config(req.target) if req.target else None
    opts = ReadOptions(aux_layers=req.aux_layers, aux_convention=req.aux_convention,  # type: ignore[arg-type]
                       flags=req.flags, target_config=tcfg)
    reading, ckpt, src_cfg = read_drafter(req.source, req.dialect, opts)
    spec = reading.spec
    warnings = list(reading.warnings)
    if tcfg is not None:
        warnings += compare_with_target(spec, tcfg)

    cast = None
    if req.dtype is not None:
        if req.dtype not in CONFIG_DTYPE_CODES:
            raise UsageError(f"unknown --dtype {req.dtype!r}", hint=f"use one of {', '.join(CONFIG_DTYPE_CODES)}")
        cast = CONFIG_DTYPE_CODES[req.dtype]
    names = plan_output_order(ckpt, reading.renames)
    tensors = [OutTensor(reading.renames[n], ckpt.refs[n], cast if cast and ckpt.refs[n].is_float else ckpt.refs[n].dtype)
               for n in names]
    dtype = req.dtype or _config_dtype(spec, tensors, warnings)

    if req.to == "eagle31":
        out_cfg = formats.eagle31.write_config(spec, dtype)
    else:
        out_cfg, more = formats.speculators.write_config(spec, dtype, req.verifier)
        warnings += more
    validate_config(out_cfg, f"to be written (--to {req.to})", "drafter")
    p = Plan(
        source=str(req.source), dialect=reading.dialect, to=req.to, source_files=[f.name for f in ckpt.files],
        spec=spec, config_diff=config_diff(src_cfg, out_cfg),
        renames=[Rename(source=s, output=reading.renames[s]) for s in names if reading.renames[s] != s],
        drops=[Drop(name=n, reason=r) for n, r in sorted(reading.drops.items())],
        decisions=reading.decisions, warnings=warnings, dtype=req.dtype,
        num_tensors=len(tensors), num_bytes=sum(t.nbytes for t in tensors),
    )
    metadata = {**ckpt.metadata, "format": "pt"}
    return Prepared(p, ckpt, out_cfg, tensors, metadata, req.origin)


def _config_dtype(spec: DrafterSpec, tensors: list[OutTensor], warnings: list[str]) -> str | None:
    floats = {t.dtype for t in tensors if t.source.is_float}
    actual = next((name for name, code in CONFIG_DTYPE_CODES.items() if floats == {code}), None)
    if spec.dtype and actual and spec.dtype != actual:
        warnings.append(f"config says torch_dtype {spec.dtype!r} but the weights are {actual}: written as {actual!r}")
    return actual or spec.dtype


def compare_with_target(spec: DrafterSpec, tcfg: dict) -> list[str]:
    warnings = []
    d_ctx, t_ctx = spec.max_position_embeddings, tcfg.get("max_position_embeddings")
    if d_ctx and t_ctx and d_ctx < t_ctx:
        warnings.append(f"drafter max_position_embeddings {d_ctx} < target's {t_ctx}: long prompts run the drafter "
                        "past its trained context (vLLM #48894)")
    d_rope, t_rope = effective_rope(spec.layer_config), effective_rope(tcfg)
    if d_rope != t_rope:
        warnings.append(f"drafter RoPE {d_rope} differs from the target's {t_rope} (kept: the drafter was trained "
                        "with it; speculators #574)")
    return warnings


def config_diff(before: dict, after: dict) -> list[Change]:
    a, b = _flatten(before), _flatten(after)
    return [Change(key=k, before=a.get(k), after=b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)
            or (k in a) != (k in b)]


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# --------------------------------------------------------------------------------------------
# Applying


def check_destination(source: Path, out: Path, force: bool) -> None:
    src, dst = source.resolve(), out.resolve()
    if dst == src or src in dst.parents or dst in src.parents:
        raise UsageError(f"OUT {out} overlaps SRC {source}: SRC is never modified")
    if out.exists() and not force:
        raise _out_exists(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory")
    existing = next(p for p in out.absolute().parents if p.exists())
    if not existing.is_dir():
        raise UsageError(f"cannot write {out}: {existing} is not a directory")


def _out_exists(out: Path) -> UsageError:
    return UsageError(f"{out} already exists", hint="choose a new OUT or pass --force to replace it")


def apply(prep: Prepared, out: Path, force: bool = False, progress: Callable[[int], None] = lambda n: None) -> dict:
    """Write the conversion atomically; returns the conversion record (conversion.json)."""
    check_destination(Path(prep.plan.source), out, force)
    with staging(out) as tmp:  # like `git clone URL a/b`, missing parents are made
        config_bytes = (json.dumps(prep.config, indent=2) + "\n").encode()
        _write(tmp / "config.json", config_bytes)
        weights_sha, source_sha = stream_convert(prep.checkpoint, prep.tensors, tmp / "model.safetensors",
                                                 prep.metadata, progress)
        record = conversion_record(prep, source_sha, {"config.json": _sha(config_bytes), "model.safetensors": weights_sha})
        _write(tmp / "conversion.json", (json.dumps(record, indent=2) + "\n").encode())
        _replace_dir(tmp, out, force)
    return record


def conversion_record(prep: Prepared, source_sha: dict[str, str], output_sha: dict[str, str]) -> dict:
    """conversion.json. Source files are named relative to the source folder and the folder itself is
    never recorded: the record is published with the drafter, and local paths are nobody's business."""
    source = {"dialect": prep.plan.dialect, "files": source_sha}
    if prep.origin:
        source["hub"] = prep.origin
    return {
        "eaglezoo_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "to": prep.plan.to,
        "dtype": prep.plan.dtype,
        "decisions": prep.plan.decisions,
        "warnings": prep.plan.warnings,
        "renames": {r.source: r.output for r in prep.plan.renames},
        "drops": {d.name: d.reason for d in prep.plan.drops},
        "spec": prep.plan.spec.model_dump(mode="json"),
        "output": output_sha,
    }


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _sha(data: bytes) -> str:
    import hashlib
    return hashlib.sha256(data).hexdigest()


def _replace_dir(tmp: Path, out: Path, force: bool) -> None:
    if out.exists() and force:
        old = temp_dir_beside(out)
        os.rename(out, old / out.name)
        os.rename(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        _rename_new(tmp, out)


def _rename_new(tmp: Path, out: Path) -> None:
    """Renames tmp to out, which was absent when checked: a convert racing to the same OUT may have
    made it since (rename then fails on a folder with files, or a file), and that one's output stays."""
    try:
        os.rename(tmp, out)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR) and os.path.lexists(out):
            raise _out_exists(out) from None
        raise
