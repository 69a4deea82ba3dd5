"""TorchSpec HF exports (docs/formats.md#torchspec): `_torchspec_version` in the config or `torchspec_version` in
the safetensors metadata; `midlayer.*`, or `layers.0.*` when exported for vLLM. Nested ids are in the
layer-output convention, except that the vLLM export of `kimi_k2` drafters already added +1."""

from __future__ import annotations

from ..tensors import Checkpoint
from .base import FlatRules, Reading, ReadOptions, read_flat, trivial_vocab_map_drop

NAME = "torchspec"


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    return "_torchspec_version" in cfg or "torchspec_version" in metadata


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    vllm_export = any(n.startswith("layers.0.") for n in ckpt.refs)
    shifted = vllm_export and cfg.get("model_type") == "kimi_k2"
    reading = read_flat(
        FlatRules(
            NAME,
            nested_convention="boundary" if shifted else "layer-output",
            top_convention=None,
            prefix_renames=[("midlayer.", "layers.0.")],
            flag_defaults={"norm_before_residual": False, "norm_output": False},
        ),
        cfg,
        ckpt,
        opts,
        extra_drops=trivial_vocab_map_drop(ckpt, cfg.get("draft_vocab_size"), cfg.get("vocab_size")),
    )
    if shifted:
        reading.decisions.insert(
            0,
            "TorchSpec vLLM export of a kimi_k2 drafter: its nested ids were already "
            "shifted +1 (_fixup_export_config), so they are read as boundary ids",
        )
    return reading
