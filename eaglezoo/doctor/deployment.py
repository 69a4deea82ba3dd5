"""The deployment about to be started: the drafter's folder as given, served by vLLM's own engine with the
user's engine settings and speculative config, the way `vllm serve` would load it (no conversion)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import EngineError
from ..verify.counters import SpecDecodeCounters
from ..verify.endpoint import ServerFacts
from ..verify.vllm_engine import EngineOptions, vllm_session
from ..verify.vllm_process import refused_input
from ..verify.workload import Progress, Workload


def planned_config(drafter_dir: Path, k: int, overrides: dict | None) -> dict:
    return {"method": "eagle3", "model": str(drafter_dir), "num_speculative_tokens": k, **(overrides or {})}


def measure_deployment(work: Workload, drafter_dir: Path, request, progress: Progress):
    """(what the deployment is, each request's tokens and acceptance, the engine's counters, seconds, vLLM's refusal
    when it would not serve the folder as it is: that is a finding too, once doctor has read why)."""
    config = planned_config(drafter_dir, work.k, request.speculative_config)
    options = request.engine_options or EngineOptions()
    facts = ServerFacts(
        url="(started by eaglezoo)",
        version=None,
        model=work.target_name,
        root=work.target_name,
        max_model_len=options.max_model_len,
        dev_mode=True,
        method=config["method"],
        drafter=str(drafter_dir),
        k=work.k,
        k_table=config.get("num_speculative_tokens_per_batch_size"),
        draft_sample_method=config.get("draft_sample_method"),
    )
    try:
        with vllm_session(work, options, progress) as session:
            run = session.run(work, config, "the planned deployment", [len(work.encoded)], progress)
    except EngineError as refusal:
        if not refused_input(refusal):
            raise  # a timeout, memory, a missing interpreter: said as they are, with their own hint
        return facts, [], SpecDecodeCounters.none(), 0.0, refusal
    first = run.passes[0]
    facts = replace(facts, version=run.engine.version, dtype=run.engine.dtype)
    return facts, first.requests, first.counters, first.wall_s, None
