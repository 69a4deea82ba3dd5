"""The canonical tensor layout a `DrafterSpec` implies: names, shapes and dtypes (formats.md §3.2,
§5.2, §6, §13.2). Convert refuses checkpoints that do not fit it; lint reports the same problems
as findings."""

from __future__ import annotations

from dataclasses import dataclass

from .spec import AuxLayers, DrafterSpec
from .st_header import COMPLEX_CODES
from .tensors import TensorRef

INT_CODES = {"I64", "I32"}


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    hint: str = ""


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
            shapes.update({p + "q_a_proj.weight": (q_rank, width), p + "q_a_layernorm.weight": (q_rank,),
                           p + "q_b_proj.weight": (n_h * qk, q_rank) if qk else None})
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
    """Engines share a missing embed_tokens from the target and ignore t2d (ModelOpt does not export it)."""
    out = {"embed_tokens.weight": (spec.vocab_size, spec.hidden_size)}
    if spec.has_vocab_map:
        out["t2d"] = (spec.vocab_size,)
    return out


def check_tensors(spec: DrafterSpec, refs: dict[str, TensorRef]) -> list[Problem]:
    """Shapes, dtypes, missing and unexpected tensors (names must already be canonical)."""
    problems: list[Problem] = []
    want = expected_shapes(spec)
    optional = optional_shapes(spec)
    k, ht = spec.num_aux, spec.target_hidden_size
    fc = refs.get("fc.weight")
    if fc is not None and len(fc.shape) == 2 and fc.shape[1] != k * ht:
        problems.append(Problem("fc-fan-in", f"fc.weight fan-in is {fc.shape[1]}, but k x target_hidden_size = "
                                f"{k} x {ht} = {k * ht}", "the aux count or target_hidden_size in the config is wrong"))
    lm = refs.get("lm_head.weight")
    if lm is not None and lm.shape and lm.shape[0] != spec.draft_vocab_size:
        problems.append(Problem("lm-head-rows", f"lm_head.weight has {lm.shape[0]} rows, but draft_vocab_size is "
                                f"{spec.draft_vocab_size}", "set draft_vocab_size to the lm_head rows (SafeAILab #249)"))
    for name, shape in want.items():
        ref = refs.get(name)
        if ref is None:
            problems.append(_missing(spec, name))
        elif shape is not None and ref.shape != shape and name not in ("fc.weight", "lm_head.weight"):
            problems.append(Problem("shape", f"{name} has shape {list(ref.shape)}, expected {list(shape)} from the config"))
    for name, shape in optional.items():
        ref = refs.get(name)
        if ref is not None and ref.shape != shape:
            problems.append(Problem("shape", f"{name} has shape {list(ref.shape)}, expected {list(shape)}"))
    problems += _complex_weights(refs, set(want) | set(optional))
    for name in ("d2t",):
        ref = refs.get(name)
        if ref is not None and ref.dtype not in INT_CODES:
            problems.append(Problem("d2t-dtype", f"d2t must hold integer offsets, found {ref.dtype}",
                                    "d2t is int64 offsets: target_id = draft_id + d2t[draft_id] (formats.md §3.3)"))
    ref = refs.get("t2d")
    if ref is not None and ref.dtype not in ("BOOL", "U8"):
        problems.append(Problem("t2d-dtype", f"t2d must be a bool mask, found {ref.dtype}"))
    if "embed_tokens.weight" not in refs and spec.hidden_size != spec.target_hidden_size:
        problems.append(Problem("embed-missing", "hidden_size differs from target_hidden_size, so the drafter must "
                                "ship its own embed_tokens.weight, and it has none", "vLLM #18906"))
    extra = sorted(set(refs) - set(want) - set(optional))
    for name in extra:
        problems.append(_unexpected(spec, name))
    return problems


def _complex_weights(refs: dict[str, TensorRef], known: set[str]) -> list[Problem]:
    """A drafter's weights are real: engines' loaders copy a complex tensor into a real parameter,
    keeping the real part only, so the drafter would run with other weights than it ships."""
    return [Problem("dtype-complex", f"{name} is complex ({ref.dtype}): a drafter's weights are real, and "
                    "engines would drop the imaginary part", "export the drafter again with real float weights, "
                    "e.g. bfloat16")
            for name, ref in refs.items() if name in known and ref.dtype in COMPLEX_CODES]


def _missing(spec: DrafterSpec, name: str) -> Problem:
    if name.startswith("fc_norm."):
        return Problem("flag-without-tensors", f"fc_norm is true but {name} is missing",
                       "never switch fc_norm on without its trained tensors (formats.md §14.1)")
    if name == "input_norm.weight":
        return Problem("flag-without-tensors", "norm_before_fc is true but input_norm.weight is missing")
    if name in ("d2t", "t2d"):
        return Problem("vocab-map-missing", f"draft_vocab_size {spec.draft_vocab_size} < vocab_size "
                       f"{spec.vocab_size}, but {name} is missing", "the draft->target vocabulary map is mandatory")
    return Problem("missing", f"tensor {name} is missing")


def _unexpected(spec: DrafterSpec, name: str) -> Problem:
    if name.startswith("fc_norm."):
        return Problem("tensors-without-flag", f"{name} is present but fc_norm is false or k is smaller",
                       "trained fc_norm tensors need fc_norm: true in the config")
    if name == "input_norm.weight":
        return Problem("tensors-without-flag", "input_norm.weight is present but norm_before_fc is false")
    return Problem("unexpected", f"tensor {name} does not belong to this drafter's config")


def target_problems(aux: AuxLayers | None, target_hidden: int, vocab: int, tcfg: dict) -> list[Problem]:
    """Where the drafter does not fit its target's config: convert refuses the first, lint reports each."""
    n = int(tcfg["num_hidden_layers"])
    problems = []
    if aux is not None and any(not 0 <= i <= n for i in aux.boundary()):
        problems.append(Problem("aux-ids-range", f"aux ids select boundary {aux.boundary()}, outside the target's "
                                f"0..{n} ({n} layers)", "check the convention: layer-output ids are boundary ids "
                                "minus one (formats.md §9)"))
    if int(tcfg["hidden_size"]) != target_hidden:
        problems.append(Problem("target-hidden-mismatch", f"target hidden_size is {tcfg['hidden_size']}, but the "
                                f"drafter's target_hidden_size is {target_hidden}"))
    if int(tcfg["vocab_size"]) != vocab:
        problems.append(Problem("vocab-mismatch", f"target vocab_size is {tcfg['vocab_size']}, but the drafter's "
                                f"vocab_size is {vocab}", "draft and target must share one tokenizer (SafeAILab #258)"))
    return problems
