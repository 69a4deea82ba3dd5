"""The native engine: the target in transformers and the drafter in eaglezoo's own fp32-exact code.

Prompts go through in batches of up to `--batch-size`, longest first, rows of like length together
(so padding stays small): the target generates their greedy continuations in one `generate`
(aux states captured by hooks during generation, so the target runs exactly as in plain decoding);
the drafter then drafts K tokens from every position of every continuation in one batched pass
(`Eagle3Drafter.draft_chains`). The decoding path a speculative decoder visits is read off those chains.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..checkpoint.spec import DrafterSpec
from ..errors import BadInput, UsageError
from .acceptance import Tally, accepted_lengths, by_k_exact, decoding_path
from .dflash import build_dflash
from .drafter import Eagle3Drafter, build_drafter
from .dspark import build_dspark
from .peagle import build_peagle
from .report.build import built
from .report.models import ByKRow, Engine, Tallied
from .target import Generation, Target, resolve_device, resolve_dtype
from .workload import Measurement, NativeOptions, Progress, Workload

# The drafters the native engine runs, by family; each module's draft_chains(aux, next_tokens, K, start=) gives the
# same Chains, so one judge serves them all.
BUILDERS = {"eagle3": build_drafter, "peagle": build_peagle, "dflash": build_dflash, "dspark": build_dspark}
# Families whose K-token draft is the first K tokens of a longer one (so by_k_exact replays every K from one run);
# a DFlash block is drafted whole, non-causally: its by-K row is the measured K only.
PREFIX_DRAFTS = ("eagle3", "peagle")


@dataclass
class Judged:
    """One prompt's drafts judged against its continuation."""

    lengths: list[int]  # accepted length from every slot of the continuation
    path: list[int]  # the rounds a speculative decoder visits
    feedback_rms: list[float]  # per depth, over the continuation's slots
    tokens: list[int]  # the continuation


def refuse(work: Workload) -> None:
    """A drafter the native engine cannot run, refused before any engine starts (its target's quantization was
    refused before anything was read: `run.check_target`)."""
    if work.spec.arch == "mla":
        raise BadInput(
            "the native engine cannot run MLA (DeepSeek/Kimi-style) drafters",
            hint="use --engine vllm, which serves them",
        )
    if work.spec.family not in BUILDERS:
        raise BadInput(
            f"the native engine cannot run {work.spec.family} drafters yet",
            hint="serve it (eaglezoo serve-config) and measure it with --engine vllm or --endpoint URL",
            code="family-unverified",
        )


def build_for(spec: DrafterSpec, state: dict, target: Target, dtype: torch.dtype, device: str):
    """The drafter module of the spec's family, with its weights (DFlash borrows the target's lm_head too)."""
    embed = target.input_embeddings().detach()
    if spec.family in ("dflash", "dspark"):
        return BUILDERS[spec.family](
            spec,
            state,
            embed=embed,
            dtype=dtype,
            device=device,
            lm_head=target.model.get_output_embeddings().weight.detach(),
        )
    return BUILDERS[spec.family](spec, state, embed=embed, dtype=dtype, device=device)


def measure_native(work: Workload, device: str, dtype: str, options: NativeOptions, progress: Progress) -> Measurement:
    t_start = time.perf_counter()
    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    target = Target(
        work.target_dir,
        device=device,
        dtype=torch_dtype,
        trust_remote_code=work.trust_remote_code,
        dequantize_mxfp4=options.dequantize_mxfp4,
    )
    try:
        drafter = build_for(
            work.spec, work.drafter.state(), target, torch_dtype, device if device != "cuda" else "cuda:0"
        )
    except ValueError as exc:
        raise BadInput(str(exc), hint="run eaglezoo lint on the drafter: its tensors do not fit its config") from None
    t_load = time.perf_counter() - t_start

    try:
        results, t_target, t_drafter = run_batches(target, drafter, work, options.batch_size, progress)
    except torch.OutOfMemoryError:
        raise UsageError(
            f"the {device} device ran out of memory with {options.batch_size} prompts per batch",
            hint="use a smaller --batch-size",
        ) from None
    every = Tally(work.k)
    for r in results:
        every.add(r.lengths)
    return Measurement(
        accepted=[r.path for r in results],
        tokens=[r.tokens for r in results],
        engine=built(
            Engine,
            name="native",
            batch_size=options.batch_size,
            trust_remote_code=work.trust_remote_code,
            target_quantization=target.quantization,
        ),
        device=device,
        dtype=str(torch_dtype).replace("torch.", ""),
        timing={
            "load_s": t_load,
            "target_generate_s": t_target,
            "drafter_s": t_drafter,
            "total_s": time.perf_counter() - t_start,
        },
        all_positions=built(Tallied, **every.summary()),
        by_k=by_k_rows([r.lengths for r in results], work),
        feedback_rms=[sum(col) / len(results) for col in zip(*(r.feedback_rms for r in results), strict=True)],
    )


def by_k_rows(lengths: list[list[int]], work: Workload) -> list[ByKRow]:
    rows = [built(ByKRow, **row) for row in by_k_exact(lengths, work.k, work.max_new_tokens)]
    return rows if work.spec.family in PREFIX_DRAFTS else rows[-1:]


def run_batches(
    target: Target, drafter: Eagle3Drafter, work: Workload, batch_size: int, progress: Progress = lambda *a, **kw: None
):
    """Every prompt of the workload judged, batch by batch: (results in prompt order, target s, drafter s)."""
    boundary, prompts, k, n_new = work.spec.aux.boundary(), work.encoded, work.k, work.max_new_tokens
    judged: dict[int, Judged] = {}
    t_target = t_drafter = 0.0
    for batch in batches([len(p) + n_new + k for p in prompts], batch_size):
        t0 = time.perf_counter()
        # K extra tokens judge the drafts of the last rounds, as an engine verifying them would.
        gens = target.greedy([prompts[i] for i in batch], n_new + k, boundary)
        t1 = time.perf_counter()
        judged.update(zip(batch, judge(drafter, gens, k, n_new), strict=True))
        t_target += t1 - t0
        t_drafter += time.perf_counter() - t1
        progress(len(judged), len(prompts), phase="verifying")
    return [judged[i] for i in range(len(prompts))], t_target, t_drafter


def batches(lengths: list[int], size: int) -> list[list[int]]:
    """Indices in batches of at most `size`, longest first. A sequence less than half as long as its
    batch's longest starts a new batch: padding costs attention over the longest row."""
    out: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if out and len(out[-1]) < size and 2 * lengths[i] >= lengths[out[-1][0]]:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def judge(drafter: Eagle3Drafter, gens: list[Generation], k: int, n_new: int) -> list[Judged]:
    """Drafts K tokens from every slot of every continuation at once, the rows padded on the right
    (a slot attends only to earlier ones, so padding never reaches a real slot), then reads each
    prompt's accepted lengths and feedback off its own continuation's slots."""
    device, dtype = drafter.fc.weight.device, drafter.fc.weight.dtype
    slots = [len(g.tokens) - 1 for g in gens]
    width = max(slots)
    aux = [
        torch.stack([F.pad(g.aux[j], (0, 0, 0, width - n)) for g, n in zip(gens, slots, strict=True)]).to(device, dtype)
        for j in range(len(gens[0].aux))
    ]
    rows = [F.pad(g.tokens[1:], (0, width - n)) for g, n in zip(gens, slots, strict=True)]
    next_tokens = torch.stack(rows).to(device)
    firsts = [g.prompt_len - 1 for g in gens]  # the slot of the round started after prefill: the first chain judged
    with torch.inference_mode():  # every row gets N + K chains, from its first on
        chains = drafter.draft_chains(aux, next_tokens, k, start=torch.tensor(firsts))
    out = []
    for j, (g, first) in enumerate(zip(gens, firsts, strict=True)):
        seq = g.tokens.to(device)
        lengths = accepted_lengths(chains.draft_ids[:, j], seq, first, first + n_new - 2, first)
        rms = chains.feedback_sq[:, j].mean(-1).sqrt().tolist()
        out.append(
            Judged(lengths, decoding_path(lengths, n_new), rms, seq[g.prompt_len : g.prompt_len + n_new].tolist())
        )
    return out
