"""The canonical EAGLE 3.1 schema (docs/formats.md#canonical-schema): a flat config with the four norm flags always
explicit, aux ids top-level in the boundary convention (vLLM) *and* nested in `eagle_config` in the
layer-output convention (SGLang/ModelOpt/TRT-LLM), `num_aux_hidden_states`, `tie_word_embeddings:
false`, `target_hidden_size` only when it differs, and `d2t`/`t2d` only when the draft vocab is smaller."""

from __future__ import annotations

from ...errors import UsageError
from ..spec import DrafterSpec
from ..tensors import Checkpoint
from .base import FLAGS, FlatRules, Reading, ReadOptions, read_flat

NAME = "eagle31"

ARCH_NAMES = {
    "llama": "LlamaForCausalLMEagle3",
    "qwen3": "Eagle3Qwen3ForCausalLM",
    "mla": "Eagle3DeepseekV2ForCausalLM",
}


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    return (
        all(f in cfg for f in FLAGS)
        and "num_aux_hidden_states" in cfg
        and "eagle_aux_hidden_state_layer_ids" in cfg
        and "speculators_config" not in cfg
        and not any(n.startswith(("midlayer.", "model.")) for n in names)
    )


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    return read_flat(
        FlatRules(NAME, nested_convention="layer-output", top_convention="boundary", prefix_renames=[]),
        cfg,
        ckpt,
        opts,
    )


def architecture(spec: DrafterSpec) -> str:
    """Keep a name engines already register as EAGLE-3; otherwise the registered name for the arch."""
    for name in spec.architectures:
        if name.startswith("Eagle3") or name.endswith("Eagle3"):
            return name
    return ARCH_NAMES[spec.arch]


def write_config(spec: DrafterSpec, dtype: str | None) -> dict:
    if spec.aux is None:
        raise UsageError(
            "cannot write the EAGLE 3.1 schema without aux-layer ids",
            hint="give them: --aux-layers 2,3,4 --aux-convention boundary (or --target DIR for the documented default)",
        )
    layer_output = spec.aux.layer_output()
    if min(layer_output) < 0:
        raise UsageError(
            f"boundary id 0 (the embeddings) has no layer-output form for eagle_config: {spec.aux.boundary()}",
            hint="aux ids start at boundary 1 (the first layer's output): check --aux-layers and --aux-convention",
        )
    cfg = {"architectures": [architecture(spec)], **{k: v for k, v in spec.layer_config.items() if k != "eagle_config"}}
    cfg.update(
        {
            "hidden_size": spec.hidden_size,
            "num_hidden_layers": spec.num_layers,
            "vocab_size": spec.vocab_size,
            "draft_vocab_size": spec.draft_vocab_size,
        }
    )
    if spec.target_hidden_size != spec.hidden_size:
        cfg["target_hidden_size"] = spec.target_hidden_size
    cfg.update(
        {
            "num_aux_hidden_states": spec.num_aux,
            "eagle_aux_hidden_state_layer_ids": spec.aux.boundary(),
            "eagle_config": {
                **spec.layer_config.get("eagle_config", {}),
                "eagle_aux_hidden_state_layer_ids": layer_output,
                "use_aux_hidden_state": True,
                "norm_before_fc": spec.norm_before_fc,
            },
            **spec.flags(),
            "tie_word_embeddings": False,
        }
    )
    if dtype:
        cfg["torch_dtype"] = dtype
    return cfg
