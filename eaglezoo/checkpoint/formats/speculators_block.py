"""The speculators form of the block families (docs/formats.md#families): the body in `transformer_layer_config`,
the family keys at the top level, ids in `aux_hidden_state_layer_ids` (boundary: vLLM maps them to
`target_layer_ids = id - 1`, transformers_utils/configs/speculators/algos.py:113-122 and 190-195), and a
`speculators_config` envelope. Shared by the dflash and dspark dialect modules (not a dialect itself)."""

from __future__ import annotations

from typing import Any

from ...errors import BadInput
from ..spec import DrafterSpec, Family
from ..tensors import Checkpoint
from . import aux_ids
from .base import NAME_THE_DIALECT, Decisions, Reading
from .blocks import FIELD_KEYS, BlockDialect, BlockFields, carried_in, place_extra, read_block, split_fields, stated

OWN = {"speculators_config", "speculators_version"}
ARCHITECTURES = {"dflash": "DFlashSpeculator", "dspark": "DSparkSpeculator"}  # the speculators config defaults


def detect(cfg: dict, model_type: str) -> bool:
    return cfg.get("speculators_model_type") == model_type


def read(name: str, family: Family, cfg: dict, ckpt: Checkpoint) -> Reading:
    d = Decisions()
    layer_cfg = cfg.get("transformer_layer_config")
    if not isinstance(layer_cfg, dict):
        raise BadInput(
            "config.json: speculators format without a transformer_layer_config object",
            hint=f"fix config.json; if the dialect was misdetected, {NAME_THE_DIALECT}",
        )
    interpreted = {
        "architectures",
        "speculators_model_type",
        "transformer_layer_config",
        "draft_vocab_size",
        "target_hidden_size",
        "aux_hidden_state_layer_ids",
        *FIELD_KEYS,
    }
    extra = carried_in(cfg, interpreted, d)
    fields = split_fields(cfg)
    fields.update({k: extra.pop(k) for k in FIELD_KEYS if k in extra})
    if cfg.get("architectures") != [ARCHITECTURES[family]]:
        extra["architectures"] = cfg.get("architectures")
    if "target_hidden_size" in cfg:
        extra["target_hidden_size"] = cfg["target_hidden_size"]  # written back as found (null or a number)
    reading = read_block(
        BlockDialect(name, family, aux_ids.SPECULATORS, [ARCHITECTURES[family]]),
        BlockFields(fields, extra, cfg.get("draft_vocab_size"), cfg.get("target_hidden_size")),
        cfg,
        layer_cfg,
        ckpt,
        d,
    )
    if extra.get("speculators_config") == envelope(reading.spec, None):
        del reading.spec.family_fields.extra["speculators_config"]  # what the writer regenerates: nothing to carry
        reading.decisions.append("speculators_config is the one eaglezoo writes for these keys: regenerated on output")
    return reading


def write_config(spec: DrafterSpec, verifier: str | None, decisions: list[str], warnings: list[str]) -> dict:
    f = spec.family_fields
    assert f is not None and spec.aux is not None
    extra = dict(f.extra)
    out: dict[str, Any] = {
        "architectures": extra.pop("architectures", [ARCHITECTURES[spec.family]]),
        "speculators_model_type": spec.family,
        "transformer_layer_config": dict(spec.layer_config),
        "draft_vocab_size": spec.draft_vocab_size,
    }
    if "target_hidden_size" in extra:
        out["target_hidden_size"] = extra.pop("target_hidden_size")
    elif spec.target_hidden_size != spec.hidden_size:
        out["target_hidden_size"] = spec.target_hidden_size
    out["aux_hidden_state_layer_ids"] = aux_ids.SPECULATORS.from_boundary(spec.aux.boundary())
    fields = stated({k: getattr(f, k) for k in FIELD_KEYS})
    fields.pop("num_target_layers", None)
    out.update(fields)
    if f.num_target_layers is not None:
        extra["num_target_layers"] = f.num_target_layers
    if "speculators_config" not in extra:
        out["speculators_config"] = envelope(spec, verifier)
        decisions.append(
            f"speculators_config written: {spec.family}, greedy, K = "
            f"{out['speculators_config']['proposal_methods'][0]['speculative_tokens']}"
        )
        if verifier is None:
            warnings.append(
                "speculators_config.verifier.name_or_path is null: pass --verifier REPO so that "
                "`vllm serve <drafter>` can find the target"
            )
    return place_extra(out, extra, OWN, decisions)


def envelope(spec: DrafterSpec, verifier: str | None) -> dict:
    """K = block_size - 1 with the anchor as the bonus token, block_size when the anchor is sampled too
    (speculators models/dflash/core.py:256-259)."""
    f = spec.family_fields
    block = f.block_size or 8
    anchor = f.sample_from_anchor if f.sample_from_anchor is not None else spec.family == "dspark"
    return {
        "algorithm": spec.family,
        "default_proposal_method": "greedy",
        "proposal_methods": [
            {
                "proposal_type": "greedy",
                "speculative_tokens": block if anchor else block - 1,
                "verifier_accept_k": 1,
                "accept_tolerance": 0.0,
            }
        ],
        "verifier": {"name_or_path": verifier, "architectures": []},
    }
