"""SpecForge (sgl-project/SpecForge) drafters (docs/formats.md#specforge): `LlamaForCausalLMEagle3`, `midlayer.*`,
always-present `d2t`/`t2d`, nested `eagle_config` ids in the layer-output convention, and a
`norm_output` key whose meaning changed with SpecForge PR #879."""

from __future__ import annotations

from ..tensors import Checkpoint
from .base import FlatRules, Reading, ReadOptions, read_flat, trivial_vocab_map_drop

NAME = "specforge"

NORM_OUTPUT_AMBIGUITY = (
    "SpecForge checkpoints written before PR #879 (2026-09-15) were trained with pre-norm feedback "
    "whatever norm_output said, and norm_output=false then meant 'no final norm' "
    "(see docs/formats.md#specforge-norm-output)"
)


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    archs = " ".join(cfg.get("architectures") or [])
    return (
        "LlamaForCausalLMEagle3" in archs
        and any(n.startswith("midlayer.") for n in names)
        and "t2d" in names
        and "_torchspec_version" not in cfg
        and "torchspec_version" not in metadata
    )


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    return read_flat(
        FlatRules(
            NAME,
            nested_convention="layer-output",
            top_convention=None,
            prefix_renames=[("midlayer.", "layers.0.")],
            flag_defaults={"norm_before_residual": False, "norm_output": False},
            ambiguous_flags={"norm_output": NORM_OUTPUT_AMBIGUITY},
        ),
        cfg,
        ckpt,
        opts,
        extra_drops=trivial_vocab_map_drop(ckpt, cfg.get("draft_vocab_size"), cfg.get("vocab_size")),
    )
