"""Which DSpark drafters eaglezoo's native engine runs (verify/dspark.py), decided from the spec alone, so that verify
refuses the others before anything loads: the anchor-sampled form (`blocks.anchor_sampled`: stated, else DeepSpec's
default) with the vanilla Markov head and the target's whole vocabulary. A confidence head is no obstacle: it only
truncates drafts below `--spec-draft-p-min` (llama.cpp common/speculative.cpp:1326-1334), and greedy drafts are
measured at 0, as `verify --engine llamacpp` starts llama-server."""

from __future__ import annotations

from ..checkpoint.formats.blocks import anchor_sampled
from ..checkpoint.spec import DrafterSpec


def native_refusal(spec: DrafterSpec, dialect: str | None) -> str | None:
    f = spec.family_fields
    if f is None or not f.markov_rank:
        return "no markov_rank: a DSpark drafter's Markov head needs it"
    if not anchor_sampled(spec, dialect):
        return (
            "a bonus-anchor DSpark (sample_from_anchor false, the speculators default): the native engine runs the "
            "anchor-sampled form"
        )
    if (f.markov_head_type or "vanilla") != "vanilla":
        return f"markov_head_type {f.markov_head_type!r}: the native engine runs the vanilla Markov head"
    if spec.has_vocab_map:
        return "a reduced draft vocabulary (d2t)"
    return None
