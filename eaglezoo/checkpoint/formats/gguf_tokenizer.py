"""The target's tokenizer as GGUF keys, for a drafter GGUF llama.cpp b11434 loads
(docs/commands/convert-lint.md#gguf-llamacpp).

llama.cpp loads a vocabulary for every model, the drafter too: `tokenizer.ggml.model` is required
(src/llama-vocab.cpp:1974), and the EAGLE-3 graph scatters the draft logits into that vocabulary's token count
(src/models/eagle3.cpp:310). Its converter takes the tokenizer from `--target-model-dir` (conversion/llama.py:107-113)
and names the pre-tokenizer by hashing the tokenisation of a fixed text (conversion/base.py:1631-1640); a tokenizer
whose hash it does not know is refused ("BPE pre-tokenizer was not recognized", conversion/base.py:1958).

eaglezoo names the pre-tokenizer from what the tokenizer IS, and only where that is exact: a byte-level BPE whose
only pre-tokenizer is `ByteLevel` with `use_regex` (GPT-2's split) and no normaliser is llama.cpp's `gpt-2`
(src/llama-vocab.cpp:2247 maps it to LLAMA_VOCAB_PRE_TYPE_GPT2, whose regex is GPT-2's: src/llama-vocab.cpp:372-380).
Any other tokenizer is refused with the way round it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import BadInput, UsageError

# gguf-py/gguf/constants.py, class Keys.Tokenizer
SPECIAL_KEYS = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "sep": "tokenizer.ggml.seperator_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
    "mask": "tokenizer.ggml.mask_token_id",
}
TOKEN_TYPE = {"normal": 1, "control": 3, "user_defined": 4, "unused": 5}  # gguf-py/gguf/constants.py TokenType


def pre_tokenizer(tok: dict) -> str | None:
    """llama.cpp's name for this tokenizer.json's pre-tokenizer, where eaglezoo can tell it exactly."""
    model, pre = tok.get("model") or {}, tok.get("pre_tokenizer") or {}
    if model.get("type") != "BPE" or tok.get("normalizer") is not None:
        return None
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space", False):
        return "gpt-2"
    return None


OTHER_TOKENIZER = (
    "convert with llama.cpp's convert_hf_to_gguf.py --target-model-dir TARGET, then fix its keys as "
    "`eaglezoo lint DRAFT.gguf` says"
)


def tokenizer_keys(target_dir: Path, vocab_size: int, hint: str = OTHER_TOKENIZER) -> dict[str, tuple[str, object]]:
    """tokenizer.* keys from the target's tokenizer, built as llama.cpp's converter builds a GPT-2 style vocabulary
    (conversion/base.py:1583-1625 tokens and types, 1969-1977 the keys; gguf-py/gguf/vocab.py SpecialVocab)."""
    path = target_dir / "tokenizer.json"
    if not path.is_file():
        raise UsageError(
            f"{target_dir} has no tokenizer.json: llama.cpp loads a vocabulary with every drafter",
            hint="give the target folder with its tokenizer (--target)",
        )
    tok = json.loads(path.read_text(encoding="utf-8"))
    pre = pre_tokenizer(tok)
    if pre is None:
        raise UsageError(
            "the target's tokenizer is not a plain byte-level BPE, the one kind eaglezoo names for llama.cpp exactly",
            hint=hint,
        )
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(str(target_dir))
    if max(t.vocab.values()) >= vocab_size:
        raise BadInput(
            f"the target's tokenizer has ids up to {max(t.vocab.values())}, the drafter's vocabulary is {vocab_size}",
            hint="give the target the drafter was trained for (--target)",
        )
    tokens, types = _tokens(t, vocab_size)
    keys: dict[str, tuple[str, object]] = {
        "tokenizer.ggml.model": ("STRING", "gpt2"),
        "tokenizer.ggml.pre": ("STRING", pre),
        "tokenizer.ggml.tokens": ("ARRAY_STRING", tokens),
        "tokenizer.ggml.token_type": ("ARRAY_INT32", types),
    }
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"].get("merges") or []]
    if merges:
        keys["tokenizer.ggml.merges"] = ("ARRAY_STRING", merges)
    keys.update(_specials(target_dir))
    return keys


def _tokens(t, vocab_size: int) -> tuple[list[str], list[int]]:
    reverse = {i: s for s, i in t.vocab.items()}
    added, decoder = t.get_added_vocab(), t.added_tokens_decoder
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(TOKEN_TYPE["unused"])
            continue
        s = reverse[i]
        if s in added:
            if not decoder[i].normalized:
                s = t.decode(t.encode(s, add_special_tokens=False))
            types.append(
                TOKEN_TYPE["control"] if decoder[i].special or _looks_special(s) else TOKEN_TYPE["user_defined"]
            )
        else:
            types.append(TOKEN_TYPE["normal"])
        tokens.append(s)
    return tokens, types


def _looks_special(s: str) -> bool:
    """conversion/base.py:1559-1580 (does_token_look_special), as written there."""
    return (
        s in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (s.startswith("<|") and s.endswith("|>"))
        or (s.startswith("<\uff5c") and s.endswith("\uff5c>"))
        or (s.startswith("<unused") and s.endswith(">"))
    )


def _specials(target_dir: Path) -> dict[str, tuple[str, object]]:
    import gguf

    sv = gguf.SpecialVocab(target_dir, load_merges=False)
    out: dict[str, tuple[str, object]] = {}
    for typ, tid in sv.special_token_ids.items():
        if typ in SPECIAL_KEYS:
            out[SPECIAL_KEYS[typ]] = ("UINT32", int(tid))
    for typ, value in sv.add_special_token.items():
        out[f"tokenizer.ggml.add_{typ}_token"] = ("BOOL", bool(value))
    if isinstance(sv.chat_template, str):
        out["tokenizer.chat_template"] = ("STRING", sv.chat_template)
    return out
