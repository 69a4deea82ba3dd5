"""A quantized target in the native engine: what transformers may load, and what only an engine serves.

FP8, compressed-tensors and the other methods transformers knows load through transformers; when it
cannot (a kernel or package missing on this machine) the load fails with one line naming
`--engine vllm`. NVFP4 has no transformers path for a pre-quantized checkpoint: refused up front.
MXFP4 (gpt-oss) would have to be dequantised: refused unless the user asks for it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import BadInput, UsageError
from ..fsutil import read_json
from .report.models import Quantization

VLLM = "use --engine vllm, which runs the quantized weights"


def quantization_config(target_dir: Path) -> dict | None:
    cfg = read_json(target_dir / "config.json", "target config")
    qc = cfg.get("quantization_config") or (cfg.get("text_config") or {}).get("quantization_config")
    return qc if isinstance(qc, dict) else None


def method(qc: dict) -> str:
    return str(qc.get("quant_method") or "unknown").lower()


def is_nvfp4(qc: dict) -> bool:
    """ModelOpt's `quant_algo: NVFP4`, or a compressed-tensors nvfp4 format (top level or any group)."""
    groups = qc.get("config_groups") if isinstance(qc.get("config_groups"), dict) else {}
    formats = [qc.get("format")] + [g.get("format") for g in groups.values() if isinstance(g, dict)]
    return str(qc.get("quant_algo", "")).upper() == "NVFP4" or any("nvfp4" in str(f).lower() for f in formats if f)


def load_kwargs(target_dir: Path, qc: dict | None, dequantize_mxfp4: bool = False) -> dict:
    """Extra `from_pretrained` arguments for the target's quantization (`qc`, its quantization_config);
    refuses what the native engine must not run."""
    kind = None if qc is None else "nvfp4" if is_nvfp4(qc) else method(qc)
    if dequantize_mxfp4 and kind != "mxfp4":
        raise UsageError(
            f"--dequantize-mxfp4 given, but target {target_dir} is not MXFP4-quantized", hint="drop --dequantize-mxfp4"
        )
    if kind == "nvfp4":
        raise BadInput(
            f"target {target_dir} is NVFP4-quantized: transformers cannot load a pre-quantized NVFP4 checkpoint",
            hint=VLLM,
        )
    if kind != "mxfp4":
        return {}
    if not dequantize_mxfp4:
        raise BadInput(
            f"target {target_dir} is MXFP4-quantized: the native engine would have to dequantise it",
            hint=f"{VLLM}, or pass --dequantize-mxfp4 to measure a dequantised copy",
        )
    from transformers import Mxfp4Config

    return {"quantization_config": Mxfp4Config(dequantize=True)}


def load_failure(target_dir: Path, qc: dict) -> BadInput:
    """The quantizer's own exception is internal (a kernel or package missing here): not quoted."""
    return BadInput(
        f"target {target_dir}: transformers cannot load its {method(qc)} quantization on this machine",
        hint=f"{VLLM} (EAGLEZOO_DEBUG=1 shows transformers' reason)",
    )


def describe(model, qc: dict | None) -> Quantization | None:
    """The target's quantization for the report: its method, and whether transformers dequantised the weights
    (it drops its quantizer from a model it dequantised, e.g. FP8 on a machine without FP8 kernels)."""
    if qc is None:
        return None
    return Quantization(method=method(qc), dequantized=getattr(model, "hf_quantizer", None) is None)
