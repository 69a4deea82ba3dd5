"""What doctor is asked to diagnose, kept free of heavy imports: the command line builds it, and refuses bad
settings, before the diagnosis (torch, the native reference) is imported."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_K = 3  # the draft depth doctor measures where neither the server nor -k says one


@dataclass(frozen=True)
class DoctorRequest:
    """What to diagnose: a running server (`endpoint`), or the deployment eaglezoo starts on vLLM
    (`engine_options`, with `speculative_config` laid over the drafter's own serving config)."""

    endpoint: str | None = None
    engine_options: object = None  # vllm_engine.EngineOptions, for the planned deployment
    speculative_config: dict | None = None
    k: int | None = None  # None: the server's
    max_new_tokens: int = 64
    max_prompts: int | None = None
    device: str = "auto"  # the native reference's
    reference_dtype: str = "float32"  # the exact reference; bfloat16 halves its memory beside a server's GPU
    batch_size: int = 32
    served_gguf: Path | None = None  # the drafter GGUF a llama-server was started with (its /props does not say)
