"""The canonical tensor layout a `DrafterSpec` implies: names, shapes and dtypes
(docs/formats.md#tensor-names). What does not fit it is a problem (problems.py)."""

from __future__ import annotations

from .spec import DrafterSpec


def expected_shapes(spec: DrafterSpec) -> dict[str, tuple[int, ...] | None]:
    """Every tensor the drafter must have (embed_tokens excepted: it is optional). None = shape not checked."""
    cfg = spec.layer_config
    h, ht, k = spec.hidden_size, spec.target_hidden_size, spec.num_aux
    out: dict[str, tuple[int, ...] | None] = {
        "fc.weight": (h, k * ht),
        "norm.weight": (h,),
        "lm_head.weight": (spec.draft_vocab_size, h),
    }
    if spec.fc_norm:
        out.update({f"fc_norm.{j}.weight": (ht,) for j in range(k)})
    if spec.norm_before_fc:
        out["input_norm.weight"] = (k * ht,)
    if spec.has_vocab_map:
        out["d2t"] = (spec.draft_vocab_size,)
    inter = cfg.get("intermediate_size")
    for i in range(spec.num_layers):
        p = f"layers.{i}."
        width = 2 * h if i == 0 else h
        out[p + "input_layernorm.weight"] = (h,)
        out[p + "post_attention_layernorm.weight"] = (h,)
        if i == 0:
            out[p + "hidden_norm.weight"] = (h,)
        out.update(_attention_shapes(spec, p + "self_attn.", width))
        if inter:
            out[p + "mlp.gate_proj.weight"] = (int(inter), h)
            out[p + "mlp.up_proj.weight"] = (int(inter), h)
            out[p + "mlp.down_proj.weight"] = (h, int(inter))
            if cfg.get("mlp_bias"):
                out.update({p + f"mlp.{n}_proj.bias": None for n in ("gate", "up", "down")})
    return out


def _attention_shapes(spec: DrafterSpec, p: str, width: int) -> dict[str, tuple[int, ...] | None]:
    cfg = spec.layer_config
    n_h = int(cfg.get("num_attention_heads", 0) or 0)
    if spec.arch == "mla":
        nope, rope = cfg.get("qk_nope_head_dim"), cfg.get("qk_rope_head_dim")
        v_head, q_rank, kv_rank = cfg.get("v_head_dim"), cfg.get("q_lora_rank"), cfg.get("kv_lora_rank")
        qk = (nope or 0) + (rope or 0)
        shapes: dict[str, tuple[int, ...] | None] = {
            p + "kv_a_proj_with_mqa.weight": (kv_rank + rope, width) if kv_rank and rope else None,
            p + "kv_a_layernorm.weight": (kv_rank,) if kv_rank else None,
            p + "kv_b_proj.weight": (n_h * (nope + v_head), kv_rank) if kv_rank and nope and v_head else None,
            p + "o_proj.weight": (spec.hidden_size, n_h * v_head) if v_head else None,
        }
        if q_rank:
            shapes.update(
                {
                    p + "q_a_proj.weight": (q_rank, width),
                    p + "q_a_layernorm.weight": (q_rank,),
                    p + "q_b_proj.weight": (n_h * qk, q_rank) if qk else None,
                }
            )
        else:
            shapes[p + "q_proj.weight"] = (n_h * qk, width) if qk else None
        return shapes
    n_kv = int(cfg.get("num_key_value_heads") or n_h)
    d = spec.head_dim
    shapes = {
        p + "q_proj.weight": (n_h * d, width),
        p + "k_proj.weight": (n_kv * d, width),
        p + "v_proj.weight": (n_kv * d, width),
        p + "o_proj.weight": (spec.hidden_size, n_h * d),
    }
    if cfg.get("attention_bias"):
        shapes.update({p + "q_proj.bias": (n_h * d,), p + "k_proj.bias": (n_kv * d,), p + "v_proj.bias": (n_kv * d,)})
    if spec.arch == "qwen3":
        shapes.update({p + "q_norm.weight": (d,), p + "k_norm.weight": (d,)})
    return shapes


def optional_shapes(spec: DrafterSpec) -> dict[str, tuple[int, ...]]:
    """Engines share a missing embed_tokens from the target and ignore t2d (ModelOpt does not export it). A P-EAGLE's
    mask_hidden (k x target hidden values; speculators saves [1, 1, n], vLLM views any shape as [1, n],
    model_executor/models/llama_eagle3.py:440) is what vLLM's parallel drafting needs, and the native engine."""
    out = {"embed_tokens.weight": (spec.vocab_size, spec.hidden_size)}
    if spec.has_vocab_map:
        out["t2d"] = (spec.vocab_size,)
    if spec.family == "peagle":
        out["mask_hidden"] = (spec.num_aux * spec.target_hidden_size,)
    return out


def flat_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape as checked: mask_hidden's leading ones dropped (see optional_shapes)."""
    while name == "mask_hidden" and len(shape) > 1 and shape[0] == 1:
        shape = shape[1:]
    return tuple(shape)
