"""DeepSpec's dense DSpark drafters (docs/formats.md#dspark): `Qwen3DSparkModel`, a Qwen3 body and the family keys
at the top level, `target_layer_ids` "after layer i" (vLLM adds 1: v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:
123-127), `block_size`, `mask_token_id`, `markov_rank`, `markov_head_type`, the confidence head's two keys."""

from __future__ import annotations

from ..spec import DrafterSpec
from ..tensors import Checkpoint
from . import aux_ids
from .base import Decisions, Reading, ReadOptions
from .blocks import (
    CARRIED,
    FIELD_KEYS,
    BlockDialect,
    BlockFields,
    carried_in,
    place_extra,
    read_block,
    split_fields,
    stated,
)

NAME = "dspark"
FAMILY = "dspark"
ARCHS = ("Qwen3DSparkModel", "Qwen3OmniDSparkModel")  # vLLM algos.py:174-178
FAMILY_KEYS = {
    "architectures",
    "auto_map",
    "target_layer_ids",
    "num_anchors",
    "draft_vocab_size",
    "target_hidden_size",
    *FIELD_KEYS,
    CARRIED,
}


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    return any(a in ARCHS for a in cfg.get("architectures") or []) and "speculators_model_type" not in cfg


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    d = Decisions()
    layer_cfg = {k: v for k, v in cfg.items() if k not in FAMILY_KEYS}
    extra = carried_in(
        {
            k: v
            for k, v in cfg.items()
            if k in FAMILY_KEYS - set(FIELD_KEYS) - {"architectures", "target_layer_ids", "draft_vocab_size"}
        },
        set(),
        d,
    )
    fields = split_fields(cfg)
    fields.update({k: extra.pop(k) for k in FIELD_KEYS if k in extra and fields.get(k) is None})
    archs = [a for a in cfg.get("architectures") or [] if a in ARCHS]
    if "draft_vocab_size" in cfg:
        extra["draft_vocab_size"] = True  # written back only where it was
    return read_block(
        BlockDialect(NAME, FAMILY, aux_ids.DEEPSPEC_TARGET, archs),
        BlockFields(fields, extra, cfg.get("draft_vocab_size"), cfg.get("target_hidden_size")),
        cfg,
        layer_cfg,
        ckpt,
        d,
    )


def write_config(spec: DrafterSpec, decisions: list[str]) -> dict:
    f = spec.family_fields
    assert f is not None and spec.aux is not None
    extra = dict(f.extra)
    archs = [a for a in spec.architectures if a in ARCHS] or [ARCHS[0]]
    out: dict = {"architectures": archs}
    if "auto_map" in extra:
        out["auto_map"] = extra.pop("auto_map")
    out.update(spec.layer_config)
    out["target_layer_ids"] = aux_ids.DEEPSPEC_TARGET.from_boundary(spec.aux.boundary())
    if extra.pop("draft_vocab_size", False) or spec.has_vocab_map:
        out["draft_vocab_size"] = spec.draft_vocab_size
    out.update(stated({k: getattr(f, k) for k in FIELD_KEYS}))
    return place_extra(out, extra, {"num_anchors", "target_hidden_size"}, decisions)
