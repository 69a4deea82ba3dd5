"""`eaglezoo verify`: run the drafter against its target and measure acceptance.

For each prompt the target generates its greedy continuation once (aux states captured by hooks
during generation, so the target runs exactly as in plain decoding); the drafter then drafts K
tokens from every position in one batched pass (`Eagle3Drafter.draft_chains`).
"""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path
from typing import Callable

import torch
from pydantic import BaseModel

from .acceptance import Tally, accepted_lengths, decoding_path
from .convert import canonical_state, read_drafter, target_config
from .drafter import build_drafter
from .errors import BadInput, UsageError
from .formats.base import ReadOptions
from .lint import Finding, lint_reading, provenance_findings
from .target import Target, load_tokenizer, resolve_device, resolve_dtype


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
    mean_acceptance_length_per_prompt: float
    num_drafts: int
    num_accepted: int
    histogram: list[int]
    all_positions: dict
    drift: dict
    target_distinct_token_ratio: float
    lint: list[Finding]
    timing: dict
    skipped_prompts: list[dict] = []  # prompts that do not fit the context: reported, never truncated
    thresholds: dict = {}
    failures: list[str] = []


def load_prompts(path: Path | None) -> list[Prompt]:
    if path is None:
        text = resources.files("eaglezoo").joinpath("data/prompts.jsonl").read_text()
        where = "default prompt set"
    else:
        if not path.is_file():
            raise UsageError(f"prompts file {path} not found (or not a regular file)")
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


def verify_source(drafter: str, target: str | None, *, revision: str | None = None, registry_dir: Path | None = None,
                  prompts_file: Path | None = None, min_acceptance: list[float] | None = None,
                  opts: ReadOptions | None = None, **kwargs) -> VerifyReport:
    """Verify what `drafter` names; a registry entry supplies its target, aux ids, floors and prompts."""
    from .sources import resolve, target_for

    opts = opts or ReadOptions()
    src = resolve(drafter, revision, registry_dir=registry_dir)
    tgt = target_for(src, target, registry_dir)
    if tgt is None:
        raise UsageError("--target is required (or give a registry id, whose entry names the target)")
    if src.entry is not None:
        src.entry.fill_read_options(opts)
        min_acceptance = min_acceptance or src.entry.acceptance_floors
        if prompts_file is None and src.entry.prompts:
            prompts_file = src.registry.path(src.entry.prompts, "prompts")
    return verify(src.path, tgt.path, prompts_file=prompts_file, min_acceptance=min_acceptance, opts=opts, **kwargs)


def verify(drafter_dir: Path, target_dir: Path, *, device: str = "auto", dtype: str = "auto", k: int = 3,
           max_new_tokens: int = 64, prompts_file: Path | None = None, max_prompts: int | None = None,
           opts: ReadOptions | None = None, min_acceptance: list[float] | None = None, min_al: float | None = None,
           progress: Callable[[int, int], None] = lambda i, n: None) -> VerifyReport:
    t_start = time.perf_counter()
    if k < 1 or max_new_tokens < 1 or (max_prompts is not None and max_prompts < 1):
        raise UsageError("K, --max-new-tokens and --max-prompts must be at least 1")
    if min_acceptance and len(min_acceptance) > k:
        raise UsageError(f"{len(min_acceptance)} acceptance floors for K={k}", hint="give at most K floors")
    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    tcfg = target_config(target_dir)
    opts = opts or ReadOptions()
    opts.target_config = tcfg
    reading, ckpt, _ = read_drafter(drafter_dir, None, opts)
    spec = reading.spec
    findings = lint_reading(reading, ckpt, tcfg, target_dir) + provenance_findings(drafter_dir, spec)
    prompts = load_prompts(prompts_file)[:max_prompts]

    tokenizer = load_tokenizer(target_dir)
    encoded = [tokenizer(p.prompt, add_special_tokens=False)["input_ids"] for p in prompts]
    context = min(x for x in (spec.max_position_embeddings, tcfg.get("max_position_embeddings"), 1 << 62) if x)
    skipped = []
    for n, (p, ids) in enumerate(zip(prompts, encoded)):
        if not ids:
            raise BadInput(f"prompt {n + 1} ({p.prompt[:30]!r}) is empty after tokenisation")
        if len(ids) + max_new_tokens + k > context:
            skipped.append({"index": n, "tokens": len(ids), "bucket": p.bucket,
                            "reason": f"{len(ids)} + {max_new_tokens} new + K tokens exceed the context of {context}"})
    kept = [i for i in range(len(prompts)) if i not in {s["index"] for s in skipped}]
    if not kept:
        raise UsageError(f"every prompt is too long for the context ({context} tokens) with {max_new_tokens} new tokens",
                         hint="use shorter prompts or a smaller --max-new-tokens")
    prompts, encoded = [prompts[i] for i in kept], [encoded[i] for i in kept]

    target = Target(target_dir, device=device, dtype=torch_dtype)
    state = canonical_state(reading, ckpt)
    try:
        drafter = build_drafter(spec, state, embed=target.input_embeddings().detach(), dtype=torch_dtype,
                                device=device if device != "cuda" else "cuda:0")
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    boundary = spec.aux.boundary()
    t_load = time.perf_counter() - t_start

    path, every = Tally(k), Tally(k)
    per_prompt_al, rms_sum, distinct = [], [0.0] * k, []
    buckets: dict[str, Tally] = {}
    t_target = t_drafter = 0.0
    for i, (p, ids) in enumerate(zip(prompts, encoded)):
        t0 = time.perf_counter()
        # K extra tokens judge the drafts of the last rounds, as an engine verifying them would.
        gen = target.greedy(ids, max_new_tokens + k, boundary)
        t1 = time.perf_counter()
        tokens = gen.tokens.to(drafter.fc.weight.device)
        aux = [a.to(drafter.fc.weight.device, torch_dtype) for a in gen.aux]
        with torch.inference_mode():
            chains = drafter.draft_chains(aux, tokens[1:], k)
        first = gen.prompt_len - 1  # the slot of the round started after prefill
        lengths = accepted_lengths(chains.draft_ids, tokens, first, first + max_new_tokens - 2)
        t_drafter += time.perf_counter() - t1
        t_target += t1 - t0
        visited = decoding_path(lengths, max_new_tokens)
        path.add(visited)
        every.add(lengths)
        buckets.setdefault(p.bucket, Tally(k)).add(visited)
        if visited:
            per_prompt_al.append(1 + sum(visited) / len(visited))
        rms_sum = [a + b for a, b in zip(rms_sum, chains.feedback_rms)]
        new = tokens[gen.prompt_len:gen.prompt_len + max_new_tokens].tolist()
        distinct.append(len(set(new)) / max(1, len(new)))
        progress(i + 1, len(prompts))

    s = path.summary()
    report = VerifyReport(
        drafter=str(drafter_dir), target=str(target_dir), device=device, dtype=str(torch_dtype).replace("torch.", ""),
        num_spec_tokens=k, max_new_tokens=max_new_tokens, num_prompts=len(prompts),
        acceptance_per_position=s["acceptance_per_position"], mean_acceptance_length=s["mean_acceptance_length"],
        mean_acceptance_length_per_prompt=sum(per_prompt_al) / max(1, len(per_prompt_al)),
        num_drafts=s["num_drafts"], num_accepted=s["num_accepted"], histogram=s["histogram"],
        all_positions=every.summary(),
        drift={"feedback_rms_per_depth": [r / len(prompts) for r in rms_sum],
               "acceptance_per_position_by_bucket": {b: t.per_position() for b, t in sorted(buckets.items())},
               "mean_acceptance_length_by_bucket": {b: t.mean_acceptance_length() for b, t in sorted(buckets.items())}},
        target_distinct_token_ratio=sum(distinct) / len(distinct),
        lint=findings, skipped_prompts=skipped,
        timing={"load_s": t_load, "target_generate_s": t_target, "drafter_s": t_drafter,
                "total_s": time.perf_counter() - t_start},
    )
    apply_thresholds(report, min_acceptance, min_al)
    return report


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
