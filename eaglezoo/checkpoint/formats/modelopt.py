"""NVIDIA ModelOpt "official format" export (docs/formats.md#modelopt): `midlayer.*`, `d2t` without `t2d`,
nested `eagle_config` (with `use_input_layernorm_in_first_layer` & co.) holding layer-output ids.
ModelOpt's internal names (`input_embeds_norm`, top-level `hidden_norm`, `eagle_lm_head`) are read too."""

from __future__ import annotations

from ..tensors import Checkpoint
from .base import FlatRules, Reading, ReadOptions, read_flat, trivial_vocab_map_drop

NAME = "modelopt"
MARKERS = ("use_input_layernorm_in_first_layer", "use_last_layernorm", "use_mtp_layernorm")


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    nested = cfg.get("eagle_config") or {}
    return (
        isinstance(nested, dict)
        and any(m in nested for m in MARKERS)
        and "t2d" not in names
        and "_torchspec_version" not in cfg
        and "torchspec_version" not in metadata
        and not any(n.startswith("model.") for n in names)
    )


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    return read_flat(
        FlatRules(
            NAME,
            nested_convention="layer-output",
            top_convention=None,
            prefix_renames=[
                ("midlayer.", "layers.0."),
                ("input_embeds_norm.", "layers.0.input_layernorm."),
                ("hidden_norm.", "layers.0.hidden_norm."),
                ("eagle_lm_head.", "lm_head."),
            ],
            flag_defaults={"norm_before_residual": False, "norm_output": False},
        ),
        cfg,
        ckpt,
        opts,
        extra_drops=trivial_vocab_map_drop(ckpt, cfg.get("draft_vocab_size"), cfg.get("vocab_size")),
    )
