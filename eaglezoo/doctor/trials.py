"""The native reference, run once per target for every variant of the drafter: the target generates its greedy
continuations once, capturing every aux layer any variant reads, and each variant (as served, as named, each
suspected cause fixed alone) drafts from the same states. A fix trial costs a drafter pass, not a target pass."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..checkpoint.spec import DrafterSpec
from ..errors import BadInput
from ..verify.acceptance import Tally, bootstrap_interval, pooled_length
from ..verify.native import batches, build_for, judge
from ..verify.target import Generation, Target, resolve_device, resolve_dtype
from ..verify.workload import Progress
from .report import Acceptance


@dataclass(frozen=True)
class Variant:
    """A drafter as some engine would run it: its config, its tensors (canonical names) and the boundary ids of
    the target layers it is fed."""

    source: str
    spec: DrafterSpec
    state: dict[str, torch.Tensor]
    boundary: tuple[int, ...]


@dataclass(frozen=True)
class Prompts:
    encoded: list[list[int]]
    k: int
    max_new_tokens: int


@dataclass(frozen=True)
class Reference:
    """How the native reference runs the trials: its device and dtype, prompts per target batch, and whether the
    target's own code may run."""

    device: str = "auto"
    dtype: str = "float32"
    batch_size: int = 32
    trust_remote_code: bool = False


def run_trials(
    target_dir: Path,
    variants: list[Variant],
    prompts: Prompts,
    reference: Reference,
    progress: Progress = lambda *a, **kw: None,
) -> dict[str, list[list[int]]]:
    """Each variant's accepted draft tokens at every verify step of every prompt, keyed by its source."""
    device = resolve_device(reference.device)
    torch_dtype = resolve_dtype(reference.dtype, device)
    target = Target(target_dir, device=device, dtype=torch_dtype, trust_remote_code=reference.trust_remote_code)
    drafters = {}
    for v in variants:
        try:
            drafters[v.source] = build_for(  # the variant's family: P-EAGLE's and DFlash's own modules
                v.spec, v.state, target, torch_dtype, device if device != "cuda" else "cuda:0"
            )
        except ValueError as exc:
            raise BadInput(
                f"the drafter {v.source} cannot run natively: {exc}",
                hint="run eaglezoo lint on it: its tensors do not fit its config",
            ) from None
    union = sorted({b for v in variants for b in v.boundary})
    paths: dict[str, list] = {v.source: [None] * len(prompts.encoded) for v in variants}
    n_new, k = prompts.max_new_tokens, prompts.k
    done = 0
    for batch in batches([len(p) + n_new + k for p in prompts.encoded], reference.batch_size):
        gens = target.greedy([prompts.encoded[i] for i in batch], n_new + k, union)
        for v in variants:
            fed = [Generation(g.tokens, [g.aux[union.index(b)] for b in v.boundary], g.prompt_len) for g in gens]
            for i, judged in zip(batch, judge(drafters[v.source], fed, k, n_new), strict=True):
                paths[v.source][i] = judged.path
        done += len(batch)
        progress(done, len(prompts.encoded), phase=f"native reference on {target_dir.name}")
    return paths


def acceptance(source: str, requests: list[list[int]], k: int) -> Acceptance:
    """Acceptance as vLLM pools it, with its interval over prompts."""
    tally = Tally(k)
    for steps in requests:
        tally.add(steps)
    return Acceptance(
        source=source,
        mean_acceptance_length=pooled_length(requests),
        interval=bootstrap_interval(requests, pooled_length) if requests else [1.0, 1.0],
        per_position=tally.per_position(),
        prompts=len(requests),
        drafts=tally.num_drafts,
        per_prompt=[pooled_length([steps]) for steps in requests],
    )
