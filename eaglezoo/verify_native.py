"""The native engine: the target in transformers and the drafter in eaglezoo's own fp32-exact code.

For each prompt the target generates its greedy continuation once (aux states captured by hooks
during generation, so the target runs exactly as in plain decoding); the drafter then drafts K
tokens from every position in one batched pass (`Eagle3Drafter.draft_chains`). The decoding path
a speculative decoder visits is read off those chains.
"""

from __future__ import annotations

import time

import torch

from .acceptance import Tally, accepted_lengths, decoding_path
from .convert import canonical_state
from .drafter import build_drafter
from .errors import BadInput
from .target import Target, resolve_device, resolve_dtype
from .verify import Measurement, Progress, Workload


def measure_native(work: Workload, device: str, dtype: str, progress: Progress) -> Measurement:
    t_start = time.perf_counter()
    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    k, n_new = work.k, work.max_new_tokens
    target = Target(work.target_dir, device=device, dtype=torch_dtype)
    try:
        drafter = build_drafter(work.spec, canonical_state(work.reading, work.checkpoint), embed=target.input_embeddings().detach(),
                                dtype=torch_dtype, device=device if device != "cuda" else "cuda:0")
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    boundary = work.spec.aux.boundary()
    t_load = time.perf_counter() - t_start

    accepted, tokens, every, rms_sum = [], [], Tally(k), [0.0] * k
    t_target = t_drafter = 0.0
    for i, ids in enumerate(work.encoded):
        t0 = time.perf_counter()
        # K extra tokens judge the drafts of the last rounds, as an engine verifying them would.
        gen = target.greedy(ids, n_new + k, boundary)
        t1 = time.perf_counter()
        seq = gen.tokens.to(drafter.fc.weight.device)
        aux = [a.to(drafter.fc.weight.device, torch_dtype) for a in gen.aux]
        with torch.inference_mode():
            chains = drafter.draft_chains(aux, seq[1:], k)
        first = gen.prompt_len - 1  # the slot of the round started after prefill
        lengths = accepted_lengths(chains.draft_ids, seq, first, first + n_new - 2)
        t_drafter += time.perf_counter() - t1
        t_target += t1 - t0
        accepted.append(decoding_path(lengths, n_new))
        every.add(lengths)
        rms_sum = [a + b for a, b in zip(rms_sum, chains.feedback_rms)]
        tokens.append(seq[gen.prompt_len:gen.prompt_len + n_new].tolist())
        progress(i + 1, len(work.encoded), phase="verifying")
    return Measurement(
        accepted=accepted, tokens=tokens, engine={"name": "native"}, device=device,
        dtype=str(torch_dtype).replace("torch.", ""),
        timing={"load_s": t_load, "target_generate_s": t_target, "drafter_s": t_drafter,
                "total_s": time.perf_counter() - t_start},
        all_positions=every.summary(), feedback_rms=[r / len(work.encoded) for r in rms_sum])
