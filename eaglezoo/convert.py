"""`eaglezoo convert`: any dialect -> the canonical EAGLE 3.1 schema, the speculators format, or llama.cpp's GGUF.

`plan()` reads configs and headers only and decides everything (dialect, config diff, renames,
drops with reasons, decisions, warnings); `apply()` streams the tensors into a temporary directory
beside OUT and renames it into place, so OUT either does not exist or is complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from . import __version__
from .checkpoint import formats
from .checkpoint.config import target_config, target_layers, validate_config
from .checkpoint.formats import gguf_dflash, gguf_eagle3, gguf_tokenizer
from .checkpoint.formats.base import ReadOptions
from .checkpoint.formats.blocks import anchor_sampled
from .checkpoint.problems import compare_with_target, refuse_misfit
from .checkpoint.read import Drafter, read_drafter
from .checkpoint.spec import DrafterSpec
from .checkpoint.st_header import FLOAT_CODES, ST_DTYPES, TensorRef
from .checkpoint.st_writer import Loan, OutTensor, plan_output_order, stream_convert
from .checkpoint.tensors import Checkpoint
from .convert_requirements import declared, write_k
from .errors import BadInput, UsageError
from .fsutil import check_out_dir, replace_dir, sha256_file, staging
from .requirements import Requirements

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


@dataclass(frozen=True)
class ConvertRequest:
    source: Path
    to: str = "eagle31"
    dialect: str | None = None
    target: Path | None = None
    options: ReadOptions = field(default_factory=ReadOptions)  # the user's statements, the registry's facts
    dtype: str | None = None
    verifier: str | None = None
    origin: str | None = None  # "owner/name@sha" when the source came from the Hub
    borrow: bool = False  # fill a block drafter's borrowed tensors from `target` (--borrow-from-target)
    requirements: Requirements | None = None  # the registry entry's (convert_requirements.py)


@dataclass
class Prepared:
    """A plan plus what apply() needs that does not belong in the report."""

    plan: Plan
    checkpoint: Checkpoint
    config: dict
    tensors: list[OutTensor]
    metadata: dict[str, str]
    origin: str | None = None
    loan: Loan | None = None  # the target's tensors written after the drafter's own
    gguf: Any = None  # --to gguf: the formats.gguf_eagle3.GgufPlan written in place of config + safetensors
    requirements: Requirements = field(default_factory=Requirements)  # conversion.json's block


def plan(req: ConvertRequest) -> Prepared:
    """Read the source named in `req` and plan its conversion."""
    check_format(req.to)
    tcfg = target_config(req.target) if req.target else None
    drafter = read_drafter(req.source, req.dialect, replace(req.options, target_layers=target_layers(tcfg)))
    if tcfg is not None:
        refuse_misfit(drafter.spec.aux, drafter.spec.target_hidden_size, drafter.spec.vocab_size, tcfg)
    stated = declared(req.requirements, drafter.config)
    if req.to == "gguf":
        return replace(plan_gguf(drafter, req, tcfg), requirements=stated)
    prepared = plan_from(drafter, req.to, dtype=req.dtype, verifier=req.verifier, origin=req.origin, target=tcfg)
    config = write_k(prepared.config, drafter.spec, drafter.dialect, stated, prepared.plan.decisions)
    plan_ = prepared.plan.model_copy(update={"config_diff": config_diff(drafter.config, config)})
    prepared = replace(prepared, plan=plan_, config=config, requirements=stated)
    return borrowing(prepared, drafter, req) if req.borrow else prepared


# What a DFlash or DSpark drafter borrows from its target, and where a target keeps it (its lm_head, where the
# embeddings are tied, is the embedding). speculators' own converter fills these from the verifier.
LENT = {
    "embed_tokens.weight": ("model.embed_tokens.weight",),
    "lm_head.weight": ("lm_head.weight", "model.embed_tokens.weight"),
    "verifier_norm.weight": ("model.norm.weight",),
}


def borrowing(prepared: Prepared, drafter: Drafter, req: ConvertRequest) -> Prepared:
    """The plan with the target's embedding, lm_head and final norm lent to a block drafter that has none, each
    checked against the drafter's geometry and recorded as a decision."""
    spec = drafter.spec
    if spec.family not in ("dflash", "dspark"):
        raise UsageError(
            f"--borrow-from-target fills a DFlash or DSpark drafter's borrowed tensors; this is a "
            f"{spec.family} drafter",
            hint="drop --borrow-from-target",
        )
    if req.to != "speculators":
        raise UsageError(
            "only the speculators form carries borrowed tensors (the native form takes them from the "
            "target when it loads)",
            hint="add --to speculators",
        )
    if req.target is None:
        raise UsageError("--borrow-from-target needs the target to borrow from", hint="add --target TARGET")
    lender = Checkpoint(req.target)
    lender.check_index()
    lent, decisions = [], []
    for name, sources in LENT.items():
        if name in drafter.refs:
            continue  # the drafter's own
        source = next((s for s in sources if s in lender.refs), None)
        if source is None:
            raise BadInput(
                f"the target {req.target} has no {sources[0]} to lend as {name}",
                hint="give the target the drafter was trained for (--target)",
            )
        ref = lender.refs[source]
        _check_lent(name, source, ref, spec)
        lent.append(OutTensor(name, ref, ref.dtype))  # (a block drafter's conversion never casts: family_config)
        decisions.append(f"{name} borrowed from the target's {source} {list(ref.shape)} (--borrow-from-target)")
    plan = prepared.plan.model_copy(
        update={
            "decisions": prepared.plan.decisions + decisions,
            "num_tensors": prepared.plan.num_tensors + len(lent),
            "num_bytes": prepared.plan.num_bytes + sum(t.nbytes for t in lent),
        }
    )
    return replace(prepared, plan=plan, loan=Loan(lender, tuple(lent)))


def _check_lent(name: str, source: str, ref: TensorRef, spec: DrafterSpec) -> None:
    """A lent tensor is what the drafter computes with: its shape, and a floating dtype (the lent bytes are copied
    as they are: a complex, integer or bool table would be multiplied as one)."""
    want = (spec.target_hidden_size,) if name == "verifier_norm.weight" else (spec.vocab_size, spec.target_hidden_size)
    if tuple(ref.shape) != want:
        raise BadInput(
            f"the target's tensor for {name} is {list(ref.shape)}, the drafter needs {list(want)}",
            hint="give the target the drafter was trained for (--target)",
        )
    if not ref.is_float:
        raise BadInput(
            f"the target's {source} is {ST_DTYPES[ref.dtype][0]}; lent as {name} it must be a floating "
            f"dtype ({', '.join(sorted(FLOAT_CODES))})",
            hint="give the target the drafter was trained for (--target), in its floating-point weights",
        )


def check_format(to: str) -> None:
    if to not in (*formats.WRITERS, "gguf"):
        raise UsageError(
            f"unknown --to {to!r}",
            hint="use eagle31, speculators, native (P-EAGLE, DFlash, DSpark) or gguf (llama.cpp)",
        )


def plan_gguf(drafter: Drafter, req: ConvertRequest, tcfg: dict | None) -> Prepared:
    """The drafter as llama.cpp reads it (formats/gguf_eagle3.py): every key written from the Drafter, the target's
    tokenizer, each tensor renamed or dropped with its reason."""
    if req.borrow:
        raise UsageError("--borrow-from-target fills a speculators form", hint="drop --borrow-from-target")
    if drafter.spec.family in ("dflash", "dspark"):
        gguf_dflash.refuse(drafter.spec, drafter.refs)
        planner = partial(gguf_dflash.plan, anchor=anchor_sampled(drafter.spec, drafter.reading.dialect))
    else:
        gguf_eagle3.refuse(drafter.spec)
        planner = gguf_eagle3.plan
    if req.target is None or tcfg is None:
        raise UsageError(
            "--to gguf needs the target: llama.cpp loads its tokenizer with the drafter, and the taps are "
            "checked against its layers",
            hint="add --target TARGET",
        )
    spec = drafter.spec
    gp = planner(
        spec,
        drafter.refs,
        gguf_eagle3.GgufTarget(
            gguf_tokenizer.tokenizer_keys(req.target, spec.vocab_size), tcfg.get("model_type"), target_layers(tcfg)
        ),
        req.dtype and _cast_code(req.dtype),
        drafter.path.name if isinstance(drafter.path, Path) else str(drafter.path),
    )
    written = {t.canonical: t.name for t in gp.tensors if t.canonical}
    drops = dict(drafter.reading.drops)
    drops.update({drafter.source_name(c): gguf_eagle3.NOT_READ[c] for c in drafter.refs if c in gguf_eagle3.NOT_READ})
    p = Plan(
        source=str(drafter.path),
        dialect=drafter.reading.dialect,
        to="gguf",
        source_files=[f.name for f in drafter.checkpoint.files],
        spec=spec,
        config_diff=[],
        renames=[Rename(source=drafter.source_name(c), output=n) for c, n in written.items()],
        drops=[Drop(name=n, reason=r) for n, r in sorted(drops.items())],
        decisions=list(drafter.reading.decisions) + gp.decisions,
        warnings=list(drafter.reading.warnings) + compare_with_target(spec, tcfg) + gp.warnings,
        dtype=req.dtype,
        num_tensors=len(gp.tensors),
        num_bytes=sum(t.nbytes for t in gp.tensors),
        output_files=[GGUF_FILE, "conversion.json"],
    )
    return Prepared(p, drafter.checkpoint, gp.summary(), [], {}, req.origin, gguf=(gp, drafter))


GGUF_FILE = "drafter.gguf"


def plan_from(
    drafter: Drafter,
    to: str = "eagle31",
    *,
    dtype: str | None = None,
    verifier: str | None = None,
    origin: str | None = None,
    target: dict | None = None,
) -> Prepared:
    """The conversion of a drafter already read: config, tensor order, renames, drops, decisions, warnings
    (`target`: its config, when the conversion was asked against one)."""
    check_format(to)
    spec, reading, ckpt = drafter.spec, drafter.reading, drafter.checkpoint
    warnings = list(reading.warnings)
    if target is not None:
        warnings += compare_with_target(spec, target)
    names = plan_output_order(ckpt, reading.renames)
    cast = _cast_code(dtype)
    tensors = [
        OutTensor(reading.renames[n], ckpt.refs[n], cast if cast and ckpt.refs[n].is_float else ckpt.refs[n].dtype)
        for n in names
    ]
    decisions = list(reading.decisions)
    if spec.family == "eagle3":
        out_cfg = _output_config(spec, to, dtype or _config_dtype(spec, tensors, warnings), verifier, warnings)
    else:
        out_cfg = family_config(
            spec,
            to,
            dtype if spec.family != "peagle" else dtype or _config_dtype(spec, tensors, warnings),
            verifier,
            decisions,
            warnings,
        )
    p = Plan(
        source=str(drafter.path),
        dialect=reading.dialect,
        to=to,
        source_files=[f.name for f in ckpt.files],
        spec=spec,
        config_diff=config_diff(drafter.config, out_cfg),
        renames=[Rename(source=s, output=reading.renames[s]) for s in names if reading.renames[s] != s],
        drops=[Drop(name=n, reason=r) for n, r in sorted(reading.drops.items())],
        decisions=decisions,
        warnings=warnings,
        dtype=dtype,
        num_tensors=len(tensors),
        num_bytes=sum(t.nbytes for t in tensors),
    )
    return Prepared(p, ckpt, out_cfg, tensors, {**ckpt.metadata, "format": "pt"}, origin)


def family_config(
    spec: DrafterSpec, to: str, dtype: str | None, verifier: str | None, decisions: list[str], warnings: list[str]
) -> dict:
    """The config of a P-EAGLE, DFlash or DSpark drafter in its native or speculators form (a P-EAGLE also in the
    EAGLE 3.1 form vLLM 0.32 loads): the same tensors, every family key written where that form keeps it
    (docs/formats.md#families)."""
    if to == "eagle31" and spec.family != "peagle":
        raise UsageError(
            f"a {spec.family} drafter has no EAGLE 3.1 form: it would lose its block drafting",
            hint="convert it with --to native or --to speculators",
        )
    if spec.family != "peagle" and dtype is not None:  # (a P-EAGLE's dtype is always given: the weights')
        raise UsageError(
            f"--dtype on a {spec.family} drafter: its conversion only moves keys between forms",
            hint="convert without --dtype",
        )
    if spec.family == "peagle":
        if to == "native":
            return validate_config(formats.peagle.write_config(spec, dtype), "to be written (--to native)", "drafter")
        if to == "eagle31":  # the copy vLLM 0.32 loads (serving.peagle_copy)
            return validate_config(
                formats.peagle.write_vllm_config(spec, dtype), "to be written (--to eagle31)", "drafter"
            )
        cfg, more = formats.peagle.write_speculators(spec, dtype, verifier)
        warnings += more
        return validate_config(cfg, "to be written (--to speculators)", "drafter")
    native = {"dflash": formats.zlab_dflash, "dspark": formats.deepspec_dspark}[spec.family]
    if to == "native":
        return native.write_config(spec, decisions)
    spec_form = {"dflash": formats.speculators_dflash, "dspark": formats.speculators_dspark}[spec.family]
    return spec_form.write_config(spec, verifier, decisions, warnings)


def _cast_code(dtype: str | None) -> str | None:
    if dtype is None:
        return None
    if dtype not in CONFIG_DTYPE_CODES:
        raise UsageError(f"unknown --dtype {dtype!r}", hint=f"use one of {', '.join(CONFIG_DTYPE_CODES)}")
    return CONFIG_DTYPE_CODES[dtype]


def _output_config(spec: DrafterSpec, to: str, dtype: str | None, verifier: str | None, warnings: list[str]) -> dict:
    if to == "eagle31":
        out_cfg = formats.eagle31.write_config(spec, dtype)
    else:
        out_cfg, more = formats.speculators.write_config(spec, dtype, verifier)
        warnings += more
    return validate_config(out_cfg, f"to be written (--to {to})", "drafter")


def _config_dtype(spec: DrafterSpec, tensors: list[OutTensor], warnings: list[str]) -> str | None:
    floats = {t.dtype for t in tensors if t.source.is_float}
    actual = next((name for name, code in CONFIG_DTYPE_CODES.items() if floats == {code}), None)
    if spec.dtype and actual and spec.dtype != actual:
        warnings.append(f"config says torch_dtype {spec.dtype!r} but the weights are {actual}: written as {actual!r}")
    return actual or spec.dtype


def config_diff(before: dict, after: dict) -> list[Change]:
    a, b = _flatten(before), _flatten(after)
    return [
        Change(key=k, before=a.get(k), after=b.get(k))
        for k in sorted(a.keys() | b.keys())
        if a.get(k) != b.get(k) or (k in a) != (k in b)
    ]


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
    check_out_dir(out, force, source, "SRC")


def apply(prep: Prepared, out: Path, force: bool = False, progress: Callable[[int], None] = lambda n: None) -> dict:
    """Write the conversion atomically; returns the conversion record (conversion.json)."""
    check_destination(Path(prep.plan.source), out, force)
    if prep.gguf is not None:
        return _apply_gguf(prep, out, force, progress)
    with staging(out) as tmp:  # like `git clone URL a/b`, missing parents are made
        config_bytes = (json.dumps(prep.config, indent=2) + "\n").encode()
        _write(tmp / "config.json", config_bytes)
        weights_sha, source_sha = stream_convert(
            prep.checkpoint, prep.tensors, tmp / "model.safetensors", prep.metadata, progress, prep.loan
        )
        record = conversion_record(
            prep, source_sha, {"config.json": _sha(config_bytes), "model.safetensors": weights_sha}
        )
        _write(tmp / "conversion.json", (json.dumps(record, indent=2) + "\n").encode())
        replace_dir(tmp, out, force)
    return record


def _apply_gguf(prep: Prepared, out: Path, force: bool, progress: Callable[[int], None]) -> dict:
    gp, drafter = prep.gguf
    with staging(out) as tmp:
        gguf_eagle3.write(gp, drafter.spec, drafter.load, tmp / GGUF_FILE, progress)
        source_sha = {f.name: sha256_file(f) for f in prep.checkpoint.files}
        record = conversion_record(prep, source_sha, {GGUF_FILE: sha256_file(tmp / GGUF_FILE)})
        record["gguf"] = {
            "llama_cpp": gguf_eagle3.BUILD,
            "keys": prep.config,
            "tensors": {
                t.name: {
                    "from": t.canonical,
                    "dtype": t.dtype,
                    "shape": list(t.shape),
                    **({"transform": t.transform} if t.transform else {}),
                }
                for t in gp.tensors
            },
        }
        _write(tmp / "conversion.json", (json.dumps(record, indent=2) + "\n").encode())
        replace_dir(tmp, out, force)
    return record


def conversion_record(prep: Prepared, source_sha: dict[str, str], output_sha: dict[str, str]) -> dict:
    """conversion.json. Source files are named relative to the source folder and the folder itself is
    never recorded: the record is published with the drafter, and local paths are nobody's business."""
    source = {"dialect": prep.plan.dialect, "files": source_sha}
    if prep.origin:
        source["hub"] = prep.origin
    return {
        "eaglezoo_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": source,
        "to": prep.plan.to,
        "dtype": prep.plan.dtype,
        "decisions": prep.plan.decisions,
        "warnings": prep.plan.warnings,
        "renames": {r.source: r.output for r in prep.plan.renames},
        "drops": {d.name: d.reason for d in prep.plan.drops},
        "spec": prep.plan.spec.model_dump(mode="json"),
        "requirements": prep.requirements.block(),
        "output": output_sha,
    }


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
