"""SafeAILab/EAGLE original EAGLE-3 drafters (docs/formats.md#safeailab): `pytorch_model.bin` (or
`model.safetensors`), `midlayer.*`, no `embed_tokens`, `LlamaForCausalLM`, no aux ids in the config."""

from __future__ import annotations

from ..tensors import Checkpoint
from .base import FlatRules, Reading, ReadOptions, read_flat, trivial_vocab_map_drop

NAME = "safeai"


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    archs = " ".join(cfg.get("architectures") or [])
    return (
        any(n.startswith("midlayer.") for n in names)
        and "eagle_config" not in cfg
        and "Eagle3" not in archs
        and not _torchspec(cfg, metadata)
    )


def _torchspec(cfg: dict, metadata: dict) -> bool:
    return "_torchspec_version" in cfg or "torchspec_version" in metadata


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    # SafeAILab configs carry no ids; SafeAILab captures before layers 2, L//2, L-3 (boundary).
    return read_flat(
        FlatRules(
            NAME,
            nested_convention=None,
            top_convention=None,
            prefix_renames=[("midlayer.", "layers.0.")],
            flag_defaults={"norm_before_residual": False, "norm_output": False},
        ),
        cfg,
        ckpt,
        opts,
        extra_drops=trivial_vocab_map_drop(ckpt, cfg.get("draft_vocab_size"), cfg.get("vocab_size")),
    )
