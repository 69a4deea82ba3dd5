"""K against a DFlash block: a block of block_size slots drafts at most block_size - 1 tokens (the anchor is the bonus
token, `blocks.max_k`); vLLM 0.32 serves a larger K and its acceptance collapses past the block (vLLM PR #41834).
doctor measures such a server at its K, the native reference at the block's, and names the K to serve."""

from __future__ import annotations

from dataclasses import replace

from ..checkpoint.formats.blocks import max_k
from ..errors import UsageError
from ..verify.run import WorkloadPlan, prepare
from ..verify.workload import Workload
from .report import Acceptance, Finding
from .verdict import figure

PAST_BLOCK = "k-past-block"


def within_block(exc: UsageError, plan: WorkloadPlan) -> WorkloadPlan | None:
    """The plan at the most the drafter's block drafts, where the refusal is the server's K past it (None: another)."""
    if exc.code != "k-beyond-block":
        return None
    drafter = prepare(replace(plan, k=1)).drafter
    return replace(plan, k=max_k(drafter.spec, drafter.dialect))


def past_block(work: Workload, k: int, server: Acceptance | None, reference: Acceptance) -> list[Finding]:
    """The server drafting K past the block the workload (at the block's K) was measured at."""
    if k <= work.k or work.spec.family_fields is None:
        return []
    block = work.spec.family_fields.block_size
    tail = ", ".join(f"{r:.3f}" for r in (server.per_position[work.k :] if server else []))
    where = f"position {k} accepts" if k == work.k + 1 else f"positions {work.k + 1}-{k} accept"
    seen = f": {where} {tail}" if tail else ""
    return [
        Finding(
            cause=PAST_BLOCK,
            verdict="engine-config",
            what=f"the server drafts K={k} with a {work.spec.family} drafter whose block_size {block} drafts at most "
            f"{work.k} tokens a step{seen} (vLLM PR #41834: acceptance collapses past the block)",
            evidence=[
                *([f"server at K={k}: {figure(server)}"] if server else []),
                f"native, the drafter and target named at K={work.k}: {figure(reference)}",
            ],
            fix=f'serve with "num_speculative_tokens": {work.k} in --speculative-config (eaglezoo serve-config '
            "DRAFTER prints the command)",
            restores=reference.mean_acceptance_length,
            confirmed=True,
        )
    ]
