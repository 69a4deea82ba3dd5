"""P-EAGLE (parallel EAGLE-3; docs/formats.md#p-eagle), in its two forms: native, the canonical EAGLE 3.1 schema
with a `Peagle*ForCausalLM` architecture and a top-level `mask_token_id` (vLLM registers those names as its
EAGLE-3 models, model_executor/models/registry.py:658-666, and reads the mask token from the top level,
v1/worker/gpu/spec_decode/utils.py:92-113); and speculators `peagle`, the speculators EAGLE-3 config plus
`mask_token_id` (speculators models/peagle/config.py; vLLM transformers_utils/configs/speculators/algos.py:53-91,
where an absent norm_before_residual reads as false, unlike eagle3's true)."""

from __future__ import annotations

from ...errors import BadInput
from ..spec import DrafterSpec, FamilyFields
from ..tensors import Checkpoint
from . import eagle31, speculators
from .base import FlatRules, Reading, ReadOptions, read_flat, trivial_vocab_map_drop
from .blocks import check_field_types, check_mask_token

NAME = "peagle"
ARCH_NAMES = {"llama": "PeagleLlamaForCausalLM", "qwen3": "PeagleQwen3ForCausalLM"}
ARCHS = ("PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM", "PEagleDraftModel")


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    """The native form, or the copy vLLM 0.32 loads (`write_vllm_config`: an EAGLE-3 architecture name with a
    top-level mask_token_id, which no EAGLE-3 dialect writes)."""
    archs = cfg.get("architectures") or []
    vllm_copy = cfg.get("mask_token_id") is not None and any(a in eagle31.ARCH_NAMES.values() for a in archs)
    return (any(a in ARCHS for a in archs) or vllm_copy) and "speculators_model_type" not in cfg


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    reading = read_flat(
        FlatRules(
            NAME,
            nested_convention="layer-output",
            top_convention="boundary",
            prefix_renames=[],
            flag_defaults={"norm_before_residual": False, "norm_output": False},
        ),
        cfg,
        ckpt,
        opts,
    )
    return as_peagle(reading, cfg, "mask_token_id")


def as_peagle(reading: Reading, cfg: dict, key: str) -> Reading:
    mask = cfg.get(key)
    check_field_types({"mask_token_id": mask}, "config.json")
    if mask is None:
        raise BadInput(
            "config.json: a P-EAGLE drafter without mask_token_id (the token of its parallel slots)",
            hint="write the mask token the drafter was trained with as mask_token_id",
            code="family-field",
        )
    check_mask_token(mask, reading.spec.vocab_size, "config.json")
    reading.spec.layer_config.pop(key, None)
    reading.spec.family = "peagle"
    reading.spec.family_fields = FamilyFields(mask_token_id=mask)
    return reading


def write_config(spec: DrafterSpec, dtype: str | None) -> dict:
    cfg = eagle31.write_config(spec, dtype)
    cfg["architectures"] = [next((a for a in spec.architectures if a in ARCHS), ARCH_NAMES.get(spec.arch, ARCHS[0]))]
    cfg["mask_token_id"] = spec.family_fields.mask_token_id
    return cfg


def write_vllm_config(spec: DrafterSpec, dtype: str | None) -> dict:
    """`convert --to eagle31`: the native form under the EAGLE-3 architecture name, the copy vLLM 0.32 loads (under
    method eagle3 it prefixes `Eagle3` to `Peagle*ForCausalLM` and finds no such model,
    vllm/transformers_utils/configs/eagle.py:55-64); `detect` reads it back as a P-EAGLE."""
    cfg = eagle31.write_config(spec, dtype)
    cfg["mask_token_id"] = spec.family_fields.mask_token_id
    return cfg


def write_speculators(spec: DrafterSpec, dtype: str | None, verifier: str | None) -> tuple[dict, list[str]]:
    cfg, warnings = speculators.write_config(spec, dtype, verifier)
    cfg["architectures"] = ["PEagleSpeculator"]  # speculators models/peagle/config.py default
    cfg["speculators_model_type"] = "peagle"
    cfg["speculators_config"]["algorithm"] = "peagle"
    cfg["mask_token_id"] = spec.family_fields.mask_token_id
    return cfg, warnings


class Speculators:
    """The speculators form as a dialect of its own (formats.DIALECTS)."""

    NAME = "speculators-peagle"

    @staticmethod
    def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
        return cfg.get("speculators_model_type") == "peagle"

    @staticmethod
    def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
        layer_cfg = cfg.get("transformer_layer_config")
        if not isinstance(layer_cfg, dict):
            raise BadInput(
                "config.json: speculators format without a transformer_layer_config object", hint="fix config.json"
            )
        vocab = layer_cfg.get("vocab_size")
        reading = read_flat(
            FlatRules(
                Speculators.NAME,
                nested_convention=None,
                top_convention="boundary",
                prefix_renames=[],
                flag_defaults={"norm_before_residual": False, "norm_output": False},
            ),
            cfg,
            ckpt,
            opts,
            layer_cfg=layer_cfg,
            extra_drops=lambda n: (
                speculators.TRAINING_ONLY
                if n.startswith(("verifier_lm_head.", "verifier_norm."))
                else trivial_vocab_map_drop(ckpt, cfg.get("draft_vocab_size"), vocab)(n)
            ),
        )
        model_type = layer_cfg.get("model_type", "llama")
        reading.spec.architectures = [ARCH_NAMES.get(model_type, ARCHS[0])]
        return as_peagle(reading, cfg, "mask_token_id")
