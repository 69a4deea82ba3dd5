"""Is the target served the one the drafter was trained for? A fingerprint of each folder: its config (the keys
that shape the model), its quantization, tokenizer and chat template, and its weights (every tensor's name,
dtype and shape, with sampled bytes: a fine-tune moves nearly every element of the tensors it trains, so a few
evenly spaced 4 KiB samples per tensor see it without reading a large target whole)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..checkpoint.config import target_config
from ..checkpoint.st_header import read_safetensors_header

Fit = Literal["fits", "fine-tuned", "quantized", "different"]
UNSHAPING = ("_name_or_path", "transformers_version", "torch_dtype", "dtype", "quantization_config", "use_cache")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "special_tokens_map.json")
SAMPLES, SAMPLE_BYTES = 8, 4096


@dataclass(frozen=True)
class Fingerprint:
    config: str
    quantization: str | None
    tokenizer: str
    template: str | None
    weights: str | None  # None: no safetensors weights here to read


def fingerprint(folder: Path) -> Fingerprint:
    cfg = target_config(folder)
    shaping = {k: v for k, v in cfg.items() if k not in UNSHAPING}
    quant = cfg.get("quantization_config")
    tok_cfg = _json(folder / "tokenizer_config.json")
    template = tok_cfg.pop("chat_template", None) or _text(folder / "chat_template.jinja")
    tokenizer = hashlib.sha256(json.dumps(tok_cfg, sort_keys=True).encode())
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            tokenizer.update(name.encode() + (folder / name).read_bytes())
    return Fingerprint(
        config=_digest(shaping),
        quantization=_digest(quant) if quant else None,
        tokenizer=tokenizer.hexdigest(),
        template=hashlib.sha256(str(template).encode()).hexdigest() if template else None,
        weights=_weights(folder),
    )


def classify(served: Fingerprint, named: Fingerprint) -> tuple[Fit, list[str]]:
    """How the served target relates to the named one, with the parts that differ."""
    parts = [
        name
        for name in ("config", "quantization", "tokenizer", "template", "weights")
        if getattr(served, name) != getattr(named, name)
    ]
    if not parts:
        return "fits", []
    if "config" in parts or "tokenizer" in parts:
        return "different", parts
    if "quantization" in parts:
        return "quantized", parts
    return ("fine-tuned" if "weights" in parts else "different"), parts


def _weights(folder: Path) -> str | None:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as f:

            def read(start: int, end: int, f=f) -> bytes:
                f.seek(start)
                return f.read(end - start)

            header = read_safetensors_header(read, os.fstat(f.fileno()).st_size, file)
            for name in sorted(header.refs):
                ref = header.refs[name]
                digest.update(f"{name}:{ref.dtype}:{ref.shape}".encode())
                step = max(1, (ref.end - ref.start) // SAMPLES)
                for start in range(ref.start, ref.end, step):
                    digest.update(read(start, min(start + SAMPLE_BYTES, ref.end)))
    return digest.hexdigest()


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
