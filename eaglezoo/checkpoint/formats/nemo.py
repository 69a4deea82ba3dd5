"""NVIDIA NeMo Automodel drafters (docs/formats.md#nemo): HF-nested names with a `model.` prefix
(`model.fc.weight`, `model.layers.0.*`, `model.fc_norm.{i}.weight`), `lm_head.weight` unprefixed.
The prefix breaks vLLM's loader, so it is stripped. NeMo's aux-id convention is not documented:
ids found in its config need `--aux-convention`."""

from __future__ import annotations

from ..tensors import Checkpoint
from .base import FlatRules, Reading, ReadOptions, read_flat, trivial_vocab_map_drop

NAME = "nemo"


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    return "model.fc.weight" in names and "speculators_config" not in cfg


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    return read_flat(
        FlatRules(
            NAME,
            nested_convention=None,
            top_convention=None,
            prefix_renames=[("model.", "")],
            flag_defaults={"norm_before_residual": False, "norm_output": False},
        ),
        cfg,
        ckpt,
        opts,
        extra_drops=trivial_vocab_map_drop(ckpt, cfg.get("draft_vocab_size"), cfg.get("vocab_size")),
    )
