"""`verify --engine vllm`: vLLM's offline engine, in a subprocess under the engine's own interpreter.

The drafter is converted (by eaglezoo's own convert) into the form vLLM reads, in a temporary
folder, once per command; one worker process (`vllm_process.py`, `vllm_worker.py`) serves every run of
that command: a conversation's earlier turns and its measurement on one engine, the runs without the
drafter (speedup, tune's K = 0) on a second one started in the same process. The engine's
parallelism is vLLM's own (tensor, pipeline and expert parallel; Ray across nodes): eaglezoo
passes the settings through and never distributes anything itself.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from ..convert import apply, plan_from
from ..errors import EngineError, UsageError
from ..fsutil import staging
from ..limits import GPU_MEMORY_UTILIZATION, MAX_MODEL_LEN, MIN_MODEL_LEN
from ..serving import engine_support, family_serve_config, serve_config
from .report.build import built
from .report.models import Engine, Parallel
from .report.timing import speedup_report
from .vllm_process import WorkerResult, WorkerSession, finds_vllm, no_vllm
from .workload import Measurement, Progress, Workload, dtype_name

RESERVED = {
    "model",
    "revision",
    "speculative_config",
    "seed",
    "data_parallel_size",
    "disable_log_stats",
    "enable_prefix_caching",
    "per_request_spec_decode_metrics",
}  # eaglezoo sets these itself


class EngineOptions(BaseModel):
    """vLLM's own settings, passed through as `LLM(...)` arguments (vllm/engine/arg_utils.py)."""

    python: str | None = None
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)
    enable_expert_parallel: bool = False
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    max_model_len: int | None = Field(None, ge=MIN_MODEL_LEN, le=MAX_MODEL_LEN)
    dtype: str = "auto"
    quantization: str | None = None
    trust_remote_code: bool = False
    gpu_memory_utilization: float | None = Field(None, ge=GPU_MEMORY_UTILIZATION[0], le=GPU_MEMORY_UTILIZATION[1])
    enforce_eager: bool = False
    extra: dict = {}  # --engine-args JSON: any other LLM(...) argument
    timeout_s: float = Field(3600, gt=0)

    @field_validator("dtype")
    @classmethod
    def one_alias_table(cls, name: str) -> str:
        """ "auto" is the engine's own choice (the model's dtype); other names through the native engine's table
        (its UsageError passes through pydantic, which wraps only ValueError)."""
        return name if name == "auto" else dtype_name(name)

    def llm_args(self) -> dict:
        args = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "enable_expert_parallel": self.enable_expert_parallel,
            "dtype": self.dtype,
            "trust_remote_code": self.trust_remote_code,
            "enforce_eager": self.enforce_eager,
        }
        optional = {
            "distributed_executor_backend": self.distributed_executor_backend,
            "max_model_len": self.max_model_len,
            "quantization": self.quantization,
            "gpu_memory_utilization": self.gpu_memory_utilization,
        }
        args.update({k: v for k, v in optional.items() if v is not None})
        return {**args, **self.extra}

    def parallel(self) -> Parallel:
        return Parallel(
            tensor_parallel_size=self.tensor_parallel_size,
            pipeline_parallel_size=self.pipeline_parallel_size,
            data_parallel_size=self.data_parallel_size,
            enable_expert_parallel=self.enable_expert_parallel,
            distributed_executor_backend=self.distributed_executor_backend or "default",
        )


def engine_options(**given) -> EngineOptions:
    reserved = sorted(RESERVED & set(given.get("extra") or {}))
    if reserved:
        raise UsageError(
            f"--engine-args cannot set {', '.join(reserved)}: eaglezoo sets it (use its own option)",
            hint="use eaglezoo's own option for it (eaglezoo verify --help lists them)",
        )
    try:
        return EngineOptions(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(
            f"--{'-'.join(map(str, first['loc'])).replace('_', '-')}: {first['msg']}",
            hint="eaglezoo verify --help lists the engine options and their ranges",
        ) from None


def engine_python(given: str | None) -> str:
    """The interpreter that runs vLLM: --engine-python, else this one when it can import vllm."""
    if given:
        path = shutil.which(given) or given
        if not Path(path).is_file() or not os.access(path, os.X_OK):
            raise UsageError(
                f"--engine-python {given}: no such executable",
                hint="give the path of a Python interpreter that has vLLM installed",
            )
        if not finds_vllm(path):
            raise no_vllm(path)
        return path
    if importlib.util.find_spec("vllm") is None:
        raise UsageError(
            "vLLM is not installed in eaglezoo's environment",
            hint="install vllm, or give --engine-python PATH of an interpreter that has it",
        )
    return sys.executable


def check_vllm_options(opts: EngineOptions) -> str:
    """What the options alone refuse (data parallel, the interpreter): checked before anything is read."""
    if opts.data_parallel_size > 1:
        raise UsageError(
            "vLLM's offline engine does not run data parallel in one process (it raises for LLM(data_parallel_size>1))",
            hint="serve with `vllm serve ... --data-parallel-size N` and measure it with --endpoint URL; "
            "data parallelism does not change acceptance",
        )
    return engine_python(opts.python)


def preflight(work: Workload, opts: EngineOptions) -> tuple[str, str | None]:
    """Everything that can be refused before any engine runs: the options, then the drafter."""
    python = check_vllm_options(opts)
    support = next(e for e in engine_support(work.spec) if e.engine == "vllm")
    if not support.faithful:
        raise UsageError(
            f"vLLM cannot serve this drafter faithfully: {'; '.join(support.notes)}",
            hint="serve it with another engine (eaglezoo lint lists which can), or use --engine native",
        )
    return python, support.min_version


class VllmSession:
    """vLLM for one command: its worker process and the drafter converted for it."""

    def __init__(self, worker: WorkerSession, drafter: Path, opts: EngineOptions, opened: float, hold: int = 1):
        self.worker, self.drafter, self.opts = worker, drafter, opts
        self.hold = hold  # engines (one per speculative config) the worker may keep warm at once, while they fit
        self.opened = opened  # timing's total_s counts from here: checks, conversion, start, every run so far

    def run(
        self, work: Workload, config: dict | None, label: str, concurrency: list[int], progress: Progress | None = None
    ) -> WorkerResult:
        request = {
            "prompts": work.encoded,
            "max_tokens": work.max_new_tokens,
            "temperatures": work.temperatures(),
            "seeds": work.seeds(),
            "concurrency": concurrency,
            "speculative_config": config,
            "label": label,
            "hold": self.hold,
        }
        return self.worker.run(request, progress)

    def measure(self, work: Workload, speedup: list[int] | None, progress: Progress) -> Measurement:
        config = engine_config(work, str(self.drafter))
        concurrency = work.reachable(speedup) if speedup else [len(work.encoded)]
        spec_run = self.run(work, config, "with the drafter", concurrency, progress)
        base_run = self.run(work, None, "without the drafter", concurrency, progress) if speedup else None
        return measurement(work, spec_run, base_run, self.opts, self.worker.python, time.perf_counter() - self.opened)


@contextmanager
def vllm_session(work: Workload, opts: EngineOptions, progress: Progress, hold: int = 1) -> Iterator[VllmSession]:
    """Refuses what can be refused before vLLM starts, then one worker process for every run of the command
    (`hold`: how many engines it may keep warm at once, one per speculative config, while they fit in memory)."""
    opened = time.perf_counter()
    python, min_version = preflight(work, opts)
    setup = {
        "model": work.target_name,
        "revision": work.target_revision,
        "min_version": min_version,
        "engine_args": opts.llm_args() | ({"seed": work.seed} if work.seed is not None else {}),
        "sampled": max(work.temperatures()) > 0,
    }
    with staging(Path(tempfile.gettempdir()) / "eaglezoo-vllm") as tmp:  # a killed run's folder is swept
        drafter = engine_drafter(work, tmp / "drafter")
        with WorkerSession(python, setup, tmp, opts.timeout_s, progress) as worker:
            yield VllmSession(worker, drafter, opts, opened, hold)


def measurement(
    work: Workload,
    spec_run: WorkerResult,
    base_run: WorkerResult | None,
    opts: EngineOptions,
    python: str,
    total_s: float,
) -> Measurement:
    first = spec_run.passes[0]
    if first.counters.num_drafts == 0:
        raise EngineError(
            "vLLM ran no speculative decoding at all (0 drafts)",
            hint="rerun with EAGLEZOO_DEBUG=1 to see the engine's log (vLLM #25250)",
        )
    started = spec_run.engine
    engine = built(
        Engine,
        name="vllm",
        version=started.version,
        python=python,
        parallel=opts.parallel(),
        trust_remote_code=opts.trust_remote_code,
        start_s=started.start_s,
    )
    return Measurement(
        accepted=[r.accepted for r in first.requests],
        tokens=[r.tokens for r in first.requests],
        engine=engine,
        device=started.device,
        dtype=started.dtype,
        notes=[note for note in (started.bound, started.patched) if note],
        counters=first.counters,
        timing={"engine_start_s": started.start_s, "measure_s": first.wall_s, "total_s": total_s},
        speedup=speedup_report(spec_run, base_run, max(work.temperatures())) if base_run else None,
    )


def engine_config(work: Workload, drafter: str) -> dict:
    """vLLM's speculative config for the converted drafter: a family's own (P-EAGLE: eagle3 + parallel_drafting)."""
    if work.spec.family == "eagle3":
        return serve_config(work.spec, "vllm", drafter, work.target_name, work.k).speculative_config
    return family_serve_config(
        work.spec, work.drafter.dialect, "vllm", drafter, work.target_name, work.k
    ).speculative_config


def engine_drafter(work: Workload, out: Path) -> Path:
    """The drafter in the canonical eagle31 form vLLM reads (ids at the top level and in eagle_config); for a
    P-EAGLE that form keeps `mask_token_id` and `mask_hidden` under an EAGLE-3 architecture name, since vLLM 0.32
    prefixes `Eagle3` to any other under `method: eagle3` (transformers_utils/configs/eagle.py:55-64), and
    `Eagle3PeagleLlamaForCausalLM` is no model it has (docs/formats.md#p-eagle; the copy serve-config prints)."""
    apply(plan_from(work.drafter, "native" if work.spec.family == "dflash" else "eagle31"), out)  # dflash: z-lab's
    return out
