"""`eaglezoo verify`: run the drafter against its target and measure acceptance.

One workload (drafter read and linted once, prompts tokenised once, over-long prompts skipped)
goes to one or more engines, each returning a `Measurement`: the accepted length of every verify
step of every prompt, as a speculative decoder visits them. One report is built from it, whatever
the engine: `native` (transformers, the exact fp32 reference, `verify_native.py`), `vllm` (vLLM's
offline engine in a subprocess, `vllm_engine.py`) or a running server (`endpoint.py`).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from .. import __version__
from ..checkpoint.formats.base import Reading, ReadOptions
from ..checkpoint.spec import DrafterSpec
from ..checkpoint.tensors import Checkpoint
from ..convert import read_drafter, target_config
from ..errors import BadInput, UsageError
from ..fsutil import regular_file
from ..lint import Finding, lint_reading, provenance_findings
from .acceptance import Tally
from .target import load_tokenizer

Progress = Callable[..., None]  # progress(done, total, phase="...")
ENGINES = ("native", "vllm")


class Prompt(BaseModel):
    prompt: str
    bucket: str = "default"


class VerifyReport(BaseModel):
    drafter: str
    target: str
    device: str
    dtype: str
    num_spec_tokens: int
    max_new_tokens: int
    num_prompts: int
    acceptance_per_position: list[float]
    mean_acceptance_length: float
    mean_acceptance_length_per_prompt: float | None
    num_drafts: int
    num_accepted: int
    histogram: list[int]
    all_positions: dict | None  # native only: every slot of the continuation, teacher-forced
    drift: dict
    target_distinct_token_ratio: float | None
    lint: list[Finding]
    timing: dict
    engine: dict = {"name": "native"}
    sampling: dict = {"temperature": 0.0, "seed": None}
    per_prompt: list[dict] = []  # {"index", "bucket", "accepted": [per verify step]}
    skipped_prompts: list[dict] = []  # prompts that do not fit the context: reported, never truncated
    notes: list[str] = []
    speedup: dict | None = None
    comparison: dict | None = None
    thresholds: dict = {}
    failures: list[str] = []
    registry_id: str | None = None  # the entry it measured, for `registry record`
    drafter_revision: str | None = None  # the Hub commit measured, when the drafter came from the Hub
    eaglezoo_version: str = __version__
    created: str = Field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))


@dataclass
class Workload:
    """What every engine measures: the same drafter, target, prompts (tokenised once) and K."""

    drafter_dir: Path
    target_dir: Path  # local: config and tokenizer at least
    target_name: str  # what an engine loads: the local path, or the Hub repo id
    target_revision: str | None
    reading: Reading
    checkpoint: Checkpoint
    opts: ReadOptions
    findings: list[Finding]
    prompts: list[Prompt]
    encoded: list[list[int]]
    skipped: list[dict]
    k: int
    max_new_tokens: int
    temperature: float = 0.0
    seed: int | None = None
    indices: list[int] = field(default_factory=list)  # each measured prompt's line in the prompt set
    trust_remote_code: bool = False  # the target's own code (tokenizer here; the native engine's model)

    @property
    def spec(self) -> DrafterSpec:
        return self.reading.spec

    def seeds(self) -> list[int] | None:
        """Request seeds by the prompt's own index: a skipped prompt never shifts another's seed."""
        return None if self.seed is None else [self.seed + i for i in self.indices]


@dataclass
class NativeOptions:
    """The native engine's settings: prompts per target batch, and consent to dequantise an MXFP4 target."""

    batch_size: int = 32
    dequantize_mxfp4: bool = False


@dataclass
class Measurement:
    """What one engine saw. `accepted[i]` lists the accepted draft tokens of each verify step of
    prompt i; `counters` are the engine's own totals for the run (deltas), when it keeps them."""

    accepted: list[list[int] | None]
    tokens: list[list[int]]
    engine: dict
    device: str
    dtype: str
    timing: dict
    counters: dict | None = None
    all_positions: dict | None = None
    feedback_rms: list[float] | None = None
    speedup: dict | None = None
    notes: list[str] = field(default_factory=list)


def load_prompts(path: Path | None) -> list[Prompt]:
    if path is None:
        text = resources.files("eaglezoo").joinpath("data/prompts.jsonl").read_text()
        where = "default prompt set"
    else:
        regular_file(path, "prompts file")
        try:
            text, where = path.read_text(encoding="utf-8"), str(path)
        except UnicodeDecodeError:
            raise BadInput(f"prompts file {path} is not UTF-8 text") from None
    prompts = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise BadInput(f"{where}: line {n} is not JSON") from None
        if isinstance(row, str):
            row = {"prompt": row}
        if not isinstance(row, dict) or not isinstance(row.get("prompt", row.get("text")), str):
            raise BadInput(f"{where}: line {n} needs a string field 'prompt'")
        prompts.append(Prompt(prompt=row.get("prompt", row.get("text")), bucket=str(row.get("bucket", "default"))))
    if not prompts:
        raise BadInput(f"{where}: no prompts")
    return prompts


def parse_engines(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in ENGINES]
    if not names or unknown or len(set(names)) != len(names) or len(names) > 2:
        raise UsageError(f"--engine {text!r}: give native, vllm or native,vllm")
    return names


def verify_source(drafter: str, target: str | None, *, revision: str | None = None, registry_dir: Path | None = None,
                  prompts_file: Path | None = None, min_acceptance: list[float] | None = None,
                  opts: ReadOptions | None = None, engine: str = "native", endpoint: str | None = None,
                  engine_options=None, **kwargs) -> VerifyReport:
    """Verify what `drafter` names; a registry entry supplies its target, aux ids, floors and prompts."""
    from ..cli.sources import resolve, target_for

    engines = ["endpoint"] if endpoint else parse_engines(engine)
    opts = opts or ReadOptions()
    src = resolve(drafter, revision, registry_dir=registry_dir)
    tgt = target_for(src, target, registry_dir, weights="native" in engines)
    if tgt is None:
        raise UsageError("--target is required (or give a registry id, whose entry names the target)")
    floors_note = None
    if src.entry is not None:
        src.entry.fill_read_options(opts)
        if min_acceptance is None and kwargs.get("min_al") is None:
            min_acceptance, kwargs["min_al"], floors_note = registry_floors(src.entry, kwargs.get("k", 3),
                                                                            kwargs.get("temperature", 0.0))
        if prompts_file is None and src.entry.prompts:
            prompts_file = src.registry.path(src.entry.prompts, "prompts")
    report = verify(src.path, tgt.path, target_name=tgt.repo or str(tgt.path), target_revision=tgt.commit,
                    prompts_file=prompts_file, min_acceptance=min_acceptance, opts=opts, engines=engines,
                    endpoint=endpoint, engine_options=engine_options, **kwargs)
    report.notes += [floors_note] if floors_note else []
    report.registry_id = src.entry.id if src.entry else None
    report.drafter_revision = src.commit
    return report


def registry_floors(entry, k: int, temperature: float) -> tuple[list[float] | None, float | None, str | None]:
    """The entry's floors for exactly this K and temperature (floors compare like with like)."""
    floor = entry.floor_for(k, temperature)
    if floor is not None:
        return floor.per_position, floor.mean_acceptance_length, None
    if not entry.acceptance_floors:
        why = entry.null_reasons.get("acceptance_floors", "none recorded")
        return None, None, f"the registry entry has no acceptance floors ({why})"
    have = ", ".join(f"K={f.k} T={f.temperature:g}" for f in entry.acceptance_floors)
    return None, None, f"the registry's acceptance floors are for {have}: none applied at K={k} T={temperature:g}"


def verify(drafter_dir: Path, target_dir: Path, *, engines: list[str] = ("native",), endpoint: str | None = None,
           engine_options=None, device: str = "auto", dtype: str = "auto", k: int = 3, max_new_tokens: int = 64,
           prompts_file: Path | None = None, max_prompts: int | None = None, opts: ReadOptions | None = None,
           min_acceptance: list[float] | None = None, min_al: float | None = None, temperature: float = 0.0,
           seed: int | None = None, speedup: list[int] | None = None, target_name: str | None = None,
           target_revision: str | None = None, trust_remote_code: bool = False, native: NativeOptions | None = None,
           progress: Progress = lambda *a, **kw: None) -> VerifyReport:
    engines = list(engines)
    native = native or NativeOptions()
    check_request(k, max_new_tokens, max_prompts, min_acceptance, temperature, engines, speedup)
    if native.dequantize_mxfp4 and "native" not in engines:
        raise UsageError("--dequantize-mxfp4 is for the native engine", hint="vLLM runs MXFP4 weights as they are")
    work = prepare(drafter_dir, target_dir, target_name or str(target_dir), target_revision, opts or ReadOptions(),
                   prompts_file, max_prompts, k, max_new_tokens, temperature, seed, engines,
                   engine_options.max_model_len if engine_options else None, trust_remote_code)
    if "native" in engines:
        from .native import refuse

        refuse(work, native)
    # Engines first: what they refuse is refused before a long native pass, and the GPU is free after them.
    measured = {name: report_for(work, measure(name, work, device, dtype, endpoint, engine_options, native, speedup,
                                               progress))
                for name in sorted(engines, key=lambda name: name == "native")}
    report = measured[engines[-1]]
    if len(measured) == 2:
        from .compare import compare

        report.comparison = compare(measured["native"], measured["vllm"])
    apply_thresholds(report, min_acceptance, min_al)
    return report


def check_request(k, max_new_tokens, max_prompts, min_acceptance, temperature, engines, speedup) -> None:
    if k < 1 or max_new_tokens < 1 or (max_prompts is not None and max_prompts < 1):
        raise UsageError("K, --max-new-tokens and --max-prompts must be at least 1")
    if min_acceptance and len(min_acceptance) > k:
        raise UsageError(f"{len(min_acceptance)} acceptance floors for K={k}", hint="give at most K floors")
    if not 0.0 <= temperature <= 100.0:
        raise UsageError(f"--temperature {temperature}: give a value from 0 to 100")
    if temperature > 0 and "native" in engines:
        raise UsageError("the native engine measures greedy acceptance only (temperature 0)",
                         hint="use --engine vllm (or --endpoint URL) for rejection-sampling acceptance at T > 0")
    if speedup and engines != ["vllm"]:
        raise UsageError("--speedup runs the engine with and without the drafter: it needs --engine vllm")


def prepare(drafter_dir: Path, target_dir: Path, target_name: str, target_revision: str | None, opts: ReadOptions,
            prompts_file: Path | None, max_prompts: int | None, k: int, max_new_tokens: int, temperature: float,
            seed: int | None, engines: list[str], max_model_len: int | None, trust_remote_code: bool = False) -> Workload:
    tcfg = target_config(target_dir)
    opts.target_config = tcfg
    reading, ckpt, _ = read_drafter(drafter_dir, None, opts)
    findings = lint_reading(reading, ckpt, tcfg, target_dir) + provenance_findings(drafter_dir, reading.spec)
    prompts = load_prompts(prompts_file)[:max_prompts]
    tokenizer = load_tokenizer(target_dir, trust_remote_code)
    encoded = [tokenizer(p.prompt, add_special_tokens=False)["input_ids"] for p in prompts]
    context = prompt_context(reading.spec, tcfg, engines, max_model_len)
    skipped = too_long(prompts, encoded, context, max_new_tokens + k)
    kept = [i for i in range(len(prompts)) if i not in {s["index"] for s in skipped}]
    if not kept:
        raise UsageError(f"every prompt is too long for the context ({context} tokens) with {max_new_tokens} new tokens",
                         hint="use shorter prompts, a smaller --max-new-tokens or a larger --max-model-len")
    return Workload(drafter_dir, target_dir, target_name, target_revision, reading, ckpt, opts, findings,
                    [prompts[i] for i in kept], [encoded[i] for i in kept], skipped, k, max_new_tokens,
                    temperature, seed, kept, trust_remote_code)


def prompt_context(spec: DrafterSpec, tcfg: dict, engines: list[str], max_model_len: int | None) -> int:
    """Native runs the drafter at its own context; engines raise the drafter's to max_model_len
    (vllm/config/speculative.py), which defaults to the target's."""
    limits = [tcfg.get("max_position_embeddings")]
    if "native" in engines:
        limits.append(spec.max_position_embeddings)
    if any(e != "native" for e in engines):
        limits.append(max_model_len)
    return min([x for x in limits if x] or [1 << 62])


def too_long(prompts: list[Prompt], encoded: list[list[int]], context: int, extra: int) -> list[dict]:
    skipped = []
    for n, (p, ids) in enumerate(zip(prompts, encoded)):
        if not ids:
            raise BadInput(f"prompt {n + 1} ({p.prompt[:30]!r}) is empty after tokenisation")
        if len(ids) + extra > context:
            skipped.append({"index": n, "tokens": len(ids), "bucket": p.bucket,
                            "reason": f"{len(ids)} + {extra} new and draft tokens exceed the context of {context}"})
    return skipped


def measure(name: str, work: Workload, device: str, dtype: str, endpoint: str | None, engine_options,
            native: NativeOptions, speedup: list[int] | None, progress: Progress) -> Measurement:
    if name == "native":
        from .native import measure_native

        return measure_native(work, device, dtype, native, progress)
    if name == "vllm":
        from .vllm_engine import EngineOptions, measure_vllm

        return measure_vllm(work, engine_options or EngineOptions(), speedup, progress)
    from .endpoint import measure_endpoint

    return measure_endpoint(work, endpoint, progress)


def report_for(work: Workload, m: Measurement) -> VerifyReport:
    """One report from one measurement; the engine's own counters are the headline when it keeps them."""
    k, tally, buckets, per_prompt = work.k, Tally(work.k), {}, []
    for i, p, steps in zip(work.indices, work.prompts, m.accepted):
        if steps is None:
            continue
        tally.add(steps)
        buckets.setdefault(p.bucket, Tally(k)).add(steps)
        per_prompt.append({"index": i, "bucket": p.bucket, "accepted": steps})
    s = tally.summary()
    notes = list(m.notes)
    if m.counters is not None:
        s, note = headline_from_counters(m.counters, tally, k)
        notes += [note] if note else []
    als = [1 + sum(x["accepted"]) / len(x["accepted"]) for x in per_prompt if x["accepted"]]
    new = [t[:work.max_new_tokens] for t in m.tokens]
    return VerifyReport(
        drafter=str(work.drafter_dir), target=work.target_name, device=m.device, dtype=m.dtype, num_spec_tokens=k,
        max_new_tokens=work.max_new_tokens, num_prompts=len(work.prompts),
        acceptance_per_position=s["acceptance_per_position"], mean_acceptance_length=s["mean_acceptance_length"],
        mean_acceptance_length_per_prompt=sum(als) / len(als) if als else None,
        num_drafts=s["num_drafts"], num_accepted=s["num_accepted"], histogram=s["histogram"],
        all_positions=m.all_positions,
        drift={"feedback_rms_per_depth": m.feedback_rms,
               "acceptance_per_position_by_bucket": {b: t.per_position() for b, t in sorted(buckets.items())},
               "mean_acceptance_length_by_bucket": {b: t.mean_acceptance_length() for b, t in sorted(buckets.items())}},
        target_distinct_token_ratio=sum(len(set(t)) / max(1, len(t)) for t in new) / len(new) if new else None,
        lint=work.findings, timing=m.timing, engine=m.engine, speedup=m.speedup,
        sampling={"temperature": work.temperature, "seed": work.seed}, per_prompt=per_prompt,
        skipped_prompts=work.skipped, notes=notes)


def headline_from_counters(c: dict, tally: Tally, k: int) -> tuple[dict, str | None]:
    """The engine's counters (deltas over the measured requests) as the report's totals. When the
    per-request metrics add up to something else, another client moved the counters: say so."""
    drafts = c["drafts"]
    per_pos = (c["per_position"] + [0] * k)[:k]
    s = {"acceptance_per_position": [x / drafts if drafts else 0.0 for x in per_pos],
         "mean_acceptance_length": 1 + c["accepted"] / drafts if drafts else 1.0,
         "num_drafts": drafts, "num_accepted": c["accepted"],
         "histogram": tally.histogram() if tally.num_drafts else []}
    note = None
    if tally.num_drafts and (tally.num_drafts, tally.num_accepted) != (drafts, c["accepted"]):
        note = (f"the engine's counters ({drafts} drafts, {c['accepted']} accepted) differ from the sum of this run's "
                f"per-request metrics ({tally.num_drafts}, {tally.num_accepted}): another client may be using it")
    return s, note


def apply_thresholds(report: VerifyReport, min_acceptance: list[float] | None, min_al: float | None) -> None:
    report.thresholds = {"min_acceptance": min_acceptance, "min_al": min_al}
    if report.num_drafts == 0:
        report.failures.append("no drafts were measured (continuations too short for K)")
    for i, floor in enumerate(min_acceptance or []):
        if i < len(report.acceptance_per_position) and report.acceptance_per_position[i] < floor:
            report.failures.append(f"acceptance at position {i + 1} is {report.acceptance_per_position[i]:.3f} < {floor}")
    if min_al is not None and report.mean_acceptance_length < min_al:
        report.failures.append(f"mean acceptance length {report.mean_acceptance_length:.3f} < {min_al}")
    errors = [f for f in report.lint if f.severity == "error"]
    if errors:
        report.failures.append(f"lint found {len(errors)} error(s): {', '.join(sorted({f.code for f in errors}))}")
