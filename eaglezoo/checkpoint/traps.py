"""The traps publishers' own config files set (found on the real-config corpus: trainer templates and
configs quoted in public issues), as `Finding` data. Each rule reads the config alone, so it runs on a
template before any weight exists, and on every drafter lint reads. Sources: docs/formats.md#traps."""

from __future__ import annotations

from typing import Callable

from .problems import Finding

Rule = Callable[[dict, dict, dict | None], Finding | None]  # (top-level config, decoder-layer config, target's)

KNOWN_ARCHITECTURES = {
    "LlamaForCausalLMEagle3",
    "Eagle3LlamaForCausalLM",
    "Eagle3DeepseekV2ForCausalLM",
    "LlamaForCausalLM",
    "Eagle3Speculator",
    "Eagle3DraftModel",
    "Eagle3Qwen3ForCausalLM",
}
LAYER_MODEL_TYPES = {"llama", "qwen3"}  # the decoder layers engines build an EAGLE-3 drafter from
MOE_KEYS = ("use_moe", "n_routed_experts", "num_experts", "num_local_experts", "moe_intermediate_size")
SHORT_CONTEXT = 4096


def _find(severity, code: str, message: str, hint: str) -> Finding:
    return Finding(severity=severity, code=code, message=message, hint=hint)


def _ids(block: dict) -> list | None:
    ids = block.get("eagle_aux_hidden_state_layer_ids")
    return ids if isinstance(ids, list) else None


def _nested(top: dict) -> dict:
    nested = top.get("eagle_config")
    return nested if isinstance(nested, dict) else {}


def aux_top_level_only(top: dict, layer: dict, target: dict | None) -> Finding | None:
    if _ids(top) is None or _ids(_nested(top)) is not None or "speculators_config" in top:
        return None  # the speculators format is vLLM's alone, and vLLM reads the top level
    return _find(
        "warning",
        "aux-ids-top-level-only",
        "aux ids only at the top level: SGLang captures from eagle_config.eagle_aux_hidden_state_layer_ids "
        "alone and falls back to its default, while vLLM reads the top level",
        "write them in eagle_config too, in the layer-output convention (eaglezoo convert --to eagle31 writes both)",
    )


def aux_count_implicit(top: dict, layer: dict, target: dict | None) -> Finding | None:
    ids = _ids(top) or _ids(_nested(top))
    if ids is None or len(ids) == 3 or "num_aux_hidden_states" in top:
        return None
    return _find(
        "warning",
        "aux-count-implicit",
        f"{len(ids)} aux ids {ids} (fc width {len(ids)} x target_hidden_size) and no num_aux_hidden_states: "
        "vLLM takes the count from that key or the nested ids, else 3; a trainer's extra final-layer id "
        "breaks loading (speculators #1065)",
        "keep only the ids the drafter consumes and write num_aux_hidden_states",
    )


def use_aux_unstated(top: dict, layer: dict, target: dict | None) -> Finding | None:
    nested = top.get("eagle_config")
    if not isinstance(nested, dict) or "use_aux_hidden_state" in nested:
        return None
    return _find(
        "info",
        "use-aux-unstated",
        "eagle_config has no use_aux_hidden_state: engines assume true",
        "write use_aux_hidden_state: true in eagle_config",
    )


def draft_vocab_full(top: dict, layer: dict, target: dict | None) -> Finding | None:
    draft, vocab = top.get("draft_vocab_size", layer.get("draft_vocab_size")), layer.get("vocab_size")
    if draft is not None and draft != vocab:
        return None
    how = "absent" if draft is None else f"equal to vocab_size ({vocab})"
    return _find(
        "info",
        "draft-vocab-full",
        f"draft_vocab_size {how}: the drafter's lm_head spans the whole vocabulary, with no d2t/t2d map",
        "nothing to fix for serving (engines reject identity d2t maps, see "
        "docs/formats.md#identity-vocabulary-maps); a reduced draft "
        "vocabulary (32000 is usual) is a training choice that makes each drafting step cheaper",
    )


def target_hidden_redundant(top: dict, layer: dict, target: dict | None) -> Finding | None:
    th = top.get("target_hidden_size")
    if th is None or th != layer.get("hidden_size"):
        return None
    return _find(
        "warning",
        "target-hidden-redundant",
        f"target_hidden_size is present and equal to hidden_size ({th}): SafeAILab's loader then expects the "
        "drafter's own embed_tokens",
        "drop target_hidden_size (eaglezoo convert omits it), or ship embed_tokens.weight",
    )


def head_dim_explicit(top: dict, layer: dict, target: dict | None) -> Finding | None:
    heads, head_dim, hidden = layer.get("num_attention_heads"), layer.get("head_dim"), layer.get("hidden_size")
    if not all(isinstance(v, int) for v in (heads, head_dim, hidden)) or heads * head_dim == hidden:
        return None
    return _find(
        "info",
        "head-dim-explicit",
        f"num_attention_heads x head_dim = {heads * head_dim} != hidden_size {hidden}: the attention is "
        "wider than the hidden state; SafeAILab's loader assumes head_dim = hidden_size / heads",
        "keep head_dim explicit and serve with vLLM or SGLang, which read it (see docs/formats.md#head-dim)",
    )


def context_short(top: dict, layer: dict, target: dict | None) -> Finding | None:
    mpe = layer.get("max_position_embeddings")
    if "max_position_embeddings" not in layer:
        return _find(
            "warning",
            "context-unstated",
            "no max_position_embeddings: a loader takes LlamaConfig's default (2048) or the target's",
            "write the context the drafter was trained for",
        )
    target_mpe = (target or {}).get("max_position_embeddings")
    short = mpe < target_mpe if isinstance(target_mpe, int) else mpe <= SHORT_CONTEXT
    if not isinstance(mpe, int) or not short:
        return None
    than = f" (the target's is {target_mpe})" if isinstance(target_mpe, int) else ""
    return _find(
        "warning",
        "context-short",
        f"max_position_embeddings {mpe}{than}: prompts beyond it run the drafter past its stated context (vLLM #48894)",
        "verify at the context you serve (eaglezoo verify reports over-long prompts); raise the key only if "
        "the drafter was trained longer",
    )


def _rope_theta(layer: dict):
    params = layer.get("rope_parameters")
    return layer.get("rope_theta") or (params.get("rope_theta") if isinstance(params, dict) else None)


def rope_theta_unstated(top: dict, layer: dict, target: dict | None) -> Finding | None:
    if _rope_theta(layer) is not None or (target is not None and _rope_theta(target) in (None, 10000)):
        return None  # stated, or the target's base is the default too
    return _find(
        "warning",
        "rope-theta-unstated",
        "no rope_theta: the drafter's RoPE base is the loaders' default 10000"
        + (f", the target's is {_rope_theta(target)}" if target else ", whatever the target uses"),
        "write rope_theta explicitly: 10000 if the drafter was trained from this file, never the target's "
        "value by guess (see docs/formats.md#rope-theta-default)",
    )


def rope_scaling_legacy(top: dict, layer: dict, target: dict | None) -> Finding | None:
    scaling = layer.get("rope_scaling")
    if not isinstance(scaling, dict) or "type" not in scaling or "rope_type" in scaling:
        return None
    return _find(
        "info",
        "rope-scaling-legacy",
        f"rope_scaling uses the legacy key type={scaling['type']!r}",
        "write rope_type (transformers maps type for now; SafeAILab's EConfig reads only {type, factor})",
    )


def sliding_window(top: dict, layer: dict, target: dict | None) -> Finding | None:
    window, use = layer.get("sliding_window"), layer.get("use_sliding_window")
    windowed = use is True or "sliding_attention" in (layer.get("layer_types") or [])
    if windowed and window:
        return _find(
            "warning",
            "drafter-sliding-window",
            f"the drafter layer attends through a sliding window of {window} tokens",
            "fine if it was trained so; check that the engine applies the window (verify at long context)",
        )
    if use is False and window:
        return _find(
            "info",
            "sliding-window-contradiction",
            f"use_sliding_window is false but sliding_window={window}",
            "set sliding_window to null so that no loader reading it alone applies a window",
        )
    return None


def layer_model_type(top: dict, layer: dict, target: dict | None) -> Finding | None:
    model_type = layer.get("model_type")
    if model_type is None or model_type in LAYER_MODEL_TYPES:
        return None
    return _find(
        "info",
        "model-type-unusual",
        f"model_type {model_type!r}: engines build a Llama-style drafter layer; keys of another model type "
        "may be read with other defaults",
        "write model_type llama unless the engine has a drafter class for this type (MLA: deepseek_v3, kimi_k2)",
    )


def nonstandard_keys(top: dict, layer: dict, target: dict | None) -> Finding | None:
    keys = sorted(k for k in top if k == "target_model_type" or k.startswith("_comment"))
    if not keys:
        return None
    return _find(
        "info",
        "nonstandard-keys",
        f"keys no engine reads: {', '.join(keys)} (carried through unchanged)",
        "nothing to fix; engines ignore them",
    )


def dtype_keys(top: dict, layer: dict, target: dict | None) -> Finding | None:
    dtype = top.get("torch_dtype") or layer.get("torch_dtype")
    if dtype is None and (top.get("dtype") or layer.get("dtype")):
        return _find(
            "info",
            "dtype-key-v5",
            "the dtype is under `dtype` (transformers v5) only",
            "write torch_dtype as well for loaders before transformers 4.56",
        )
    if dtype == "float16":
        return _find(
            "info",
            "dtype-float16",
            "torch_dtype float16 (SafeAILab's trainer): a bf16 server casts the weights",
            "serve with --dtype float16 where the target allows it, or state the dtype the weights are in",
        )
    return None


def moe_layer(top: dict, layer: dict, target: dict | None) -> Finding | None:
    keys = [k for k in MOE_KEYS if layer.get(k)]
    if not keys:
        return None
    return _find(
        "warning",
        "moe-drafter",
        f"a mixture-of-experts drafter layer ({', '.join(keys)}): the engines' EAGLE-3 Llama drafter layer is dense",
        "serve it with the engine class its trainer names, or train a dense drafter",
    )


def architecture_unknown(top: dict, layer: dict, target: dict | None) -> Finding | None:
    archs = top.get("architectures") or []
    unknown = [a for a in archs if a not in KNOWN_ARCHITECTURES]
    if not unknown:
        return None
    return _find(
        "warning",
        "architecture-unknown",
        f"architecture {', '.join(unknown)}: no engine registers it as an EAGLE-3 drafter",
        "write an architecture the engine registers (LlamaForCausalLMEagle3 for "
        "SGLang, Eagle3LlamaForCausalLM for vLLM; eaglezoo convert --to eagle31 picks one)",
    )


def eagle31_flags(top: dict, layer: dict, target: dict | None) -> Finding | None:
    on = [f for f in ("fc_norm", "norm_output") if top.get(f) is True]
    if not on or "speculators_config" in top:
        return None
    return _find(
        "info",
        "eagle31-flags",
        f"EAGLE 3.1 flags set: {', '.join(on)}",
        "serve with vLLM >= 0.22 (MLA >= 0.23) or SGLang >= 0.5.23; older engines run it as EAGLE-3 and "
        "acceptance drops",
    )


def speculators_variant(top: dict, layer: dict, target: dict | None) -> Finding | None:
    if "speculators_config" not in top or not (top.get("norm_before_fc") and top.get("norm_output")):
        return None
    if top.get("fc_norm"):
        return None
    return _find(
        "info",
        "speculators-3.1-variant",
        "norm_before_fc + norm_output with fc_norm false: speculators' one norm over the concatenated aux "
        "states, not the paper's EAGLE 3.1 (per-slot fc_norm)",
        "nothing to fix; record it as eagle_version 3.1-variant (see docs/formats.md#speculators-norm-variant)",
    )


def verifier_local(top: dict, layer: dict, target: dict | None) -> Finding | None:
    config = top.get("speculators_config")
    verifier = config.get("verifier") if isinstance(config, dict) else None
    path = verifier.get("name_or_path") if isinstance(verifier, dict) else None
    if not isinstance(path, str) or not path.startswith(("/", ".", "~")):
        return None
    return _find(
        "warning",
        "verifier-local-path",
        f"speculators_config.verifier.name_or_path is a local path ({path}): vLLM resolves it as a Hub repo id",
        "write the target's Hub repo id there (see docs/formats.md#method-and-verifier-path)",
    )


RULES: list[Rule] = [
    aux_top_level_only,
    aux_count_implicit,
    use_aux_unstated,
    draft_vocab_full,
    target_hidden_redundant,
    head_dim_explicit,
    context_short,
    rope_theta_unstated,
    rope_scaling_legacy,
    sliding_window,
    layer_model_type,
    nonstandard_keys,
    dtype_keys,
    moe_layer,
    architecture_unknown,
    eagle31_flags,
    speculators_variant,
    verifier_local,
]


def trap_findings(cfg: dict, target: dict | None = None) -> list[Finding]:
    """Every trap the config sets (against the target's config where it is known); decoder keys are read where
    the dialect keeps them."""
    layer = cfg.get("transformer_layer_config")
    layer = layer if isinstance(layer, dict) else cfg
    return [f for rule in RULES if (f := rule(cfg, layer, target))]
