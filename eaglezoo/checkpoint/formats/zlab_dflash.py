"""z-lab DFlash drafters (docs/formats.md#dflash-z-lab): `DFlashDraftModel`, a Qwen3 body at the top level,
`dflash_config: {target_layer_ids, mask_token_id}` (ids "after layer i"; `layer_ids`, boundary ids, where it holds
no target_layer_ids: vLLM's V2 runner reads it so, eagle3_utils.py:128-134), `block_size` at the top level (inside
`dflash_config` from Qwen3.5 on), `num_target_layers`; no embedding or lm_head (the target's are used).
The keys that are not the body are those speculators' converter sets apart (convert/dflash/converter.py:31-33)."""

from __future__ import annotations

from ..spec import DrafterSpec
from ..tensors import Checkpoint
from . import aux_ids
from .base import Decisions, Reading, ReadOptions
from .blocks import CARRIED, FIELD_KEYS, BlockDialect, BlockFields, carried_in, place_extra, read_block

NAME = "dflash"
FAMILY = "dflash"
ARCH = "DFlashDraftModel"
NON_BODY = {"architectures", "auto_map", "block_size", "dflash_config", "num_target_layers", CARRIED}
NESTED_READ = {"target_layer_ids", "mask_token_id", "block_size"}


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    return ARCH in (cfg.get("architectures") or []) and "speculators_model_type" not in cfg


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    d = Decisions()
    nested = cfg.get("dflash_config") if isinstance(cfg.get("dflash_config"), dict) else {}
    layer_cfg = {k: v for k, v in cfg.items() if k not in NON_BODY}
    extra = carried_in({k: v for k, v in cfg.items() if k in ("auto_map", CARRIED)}, set(), d)
    read = NESTED_READ | ({"layer_ids"} if "target_layer_ids" not in nested else set())  # vLLM V2's alternate
    extra.update({f"dflash_config.{k}": v for k, v in nested.items() if k not in read})
    if "block_size" in nested:
        extra["dflash_config.block_size"] = True  # where it was written (Qwen3.5 on)
    fields = {
        "block_size": cfg.get("block_size", nested.get("block_size")),
        "mask_token_id": nested.get("mask_token_id"),
        "num_target_layers": cfg.get("num_target_layers"),
    }
    fields.update({k: extra.pop(k) for k in FIELD_KEYS if k in extra and fields.get(k) is None})
    return read_block(
        BlockDialect(NAME, FAMILY, aux_ids.DFLASH_TARGET, [ARCH], (aux_ids.DFLASH_LAYER_IDS,)),
        BlockFields(fields, extra),
        cfg,
        layer_cfg,
        ckpt,
        d,
    )


def write_config(spec: DrafterSpec, decisions: list[str]) -> dict:
    f = spec.family_fields
    assert f is not None and spec.aux is not None
    extra = dict(f.extra)
    nested_block = extra.pop("dflash_config.block_size", False)
    nested = {"target_layer_ids": aux_ids.DFLASH_TARGET.from_boundary(spec.aux.boundary())}
    if f.mask_token_id is not None:
        nested["mask_token_id"] = f.mask_token_id
    if nested_block:
        nested["block_size"] = f.block_size
    for k in [k for k in extra if k.startswith("dflash_config.")]:
        nested[k.split(".", 1)[1]] = extra.pop(k)
    out: dict = {"architectures": [ARCH]}
    if "auto_map" in extra:
        out["auto_map"] = extra.pop("auto_map")
    out.update(spec.layer_config)
    if f.block_size is not None and not nested_block:
        out["block_size"] = f.block_size
    out["dflash_config"] = nested
    if f.num_target_layers is not None:
        out["num_target_layers"] = f.num_target_layers
    for key in ("sample_from_anchor", "sliding_window_non_causal"):
        if getattr(f, key) is not None:
            extra[key] = getattr(f, key)
    return place_extra(out, extra, set(), decisions)
