"""`verify --engine vllm`: vLLM's offline engine, in a subprocess under the engine's own interpreter.

The drafter is converted (by eaglezoo's own convert) into the form vLLM reads, in a temporary
folder; `vllm_worker.py` runs the engine there and streams JSON events back. The engine's
parallelism is vLLM's own (tensor, pipeline and expert parallel; Ray across nodes): eaglezoo
passes the settings through and never distributes anything itself.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from ..errors import EngineError, UsageError, printable
from ..fsutil import staging
from ..serving import engine_support, serve_config
from .workload import Measurement, Progress, Workload

WORKER = Path(__file__).with_name("vllm_worker.py")
LEAKY_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__")
# A traceback's last line in the engine's log, bare or after vLLM's "(EngineCore pid=1) ERROR ... [core.py:1] "
# prefix: the kinds the worker passes on (vllm_worker.engine_message), "torch." and the like before the name.
LOG_REASON = re.compile(r"(?:^|[)\]] )(?:[\w.]+\.)?(?:ValueError|OutOfMemoryError): (?P<reason>\S.*)")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LOG_TAIL = 1 << 20  # bytes of the log searched for the reason
MAX_REASON = 800
MEMORY_HINT = ("vLLM reserves --gpu-memory-utilization of the GPU's memory (on CPU: of RAM, or "
               "VLLM_CPU_KVCACHE_SPACE GiB for the KV cache where that is set): change it as vLLM says, "
               "lower --max-model-len, or free memory that other processes hold")
OWN_REASON_HINT = ("that is vLLM's own reason: fix the option (--engine-args JSON), drafter or target it names; "
                   "EAGLEZOO_DEBUG=1 shows its whole output")


class EngineEvent(BaseModel):
    version: str
    device: str
    dtype: str
    start_s: float
    patched: str | None = None


class RequestResult(BaseModel):
    tokens: list[int]
    e2e_s: float
    ttft_s: float | None
    accepted: list[int] | None


class Counters(BaseModel):
    drafts: int
    draft_tokens: int
    accepted: int
    per_position: list[int]


class PassEvent(BaseModel):
    concurrency: int
    wall_s: float
    requests: list[RequestResult]
    counters: Counters


class WorkerResult(BaseModel):
    """What the worker reports (vllm_worker.py): checked here, so a malformed event is one sentence."""

    engine: EngineEvent
    passes: list[PassEvent]


RESERVED = {"model", "revision", "speculative_config", "seed", "data_parallel_size", "disable_log_stats",
            "enable_prefix_caching", "per_request_spec_decode_metrics"}  # eaglezoo sets these itself


class EngineOptions(BaseModel):
    """vLLM's own settings, passed through as `LLM(...)` arguments (vllm/engine/arg_utils.py)."""

    python: str | None = None
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)
    enable_expert_parallel: bool = False
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    max_model_len: int | None = Field(None, ge=16)
    dtype: str = "auto"
    quantization: str | None = None
    trust_remote_code: bool = False
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    enforce_eager: bool = False
    extra: dict = {}  # --engine-args JSON: any other LLM(...) argument
    timeout_s: float = Field(3600, gt=0)

    @field_validator("dtype")
    @classmethod
    def one_alias_table(cls, name: str) -> str:
        """"auto" is the engine's own choice (the model's dtype); other names through target's table
        (its UsageError passes through pydantic, which wraps only ValueError)."""
        from .target import resolve_dtype

        return name if name == "auto" else str(resolve_dtype(name, "cpu")).removeprefix("torch.")

    def llm_args(self) -> dict:
        args = {"tensor_parallel_size": self.tensor_parallel_size, "pipeline_parallel_size": self.pipeline_parallel_size,
                "enable_expert_parallel": self.enable_expert_parallel, "dtype": self.dtype,
                "trust_remote_code": self.trust_remote_code, "enforce_eager": self.enforce_eager}
        optional = {"distributed_executor_backend": self.distributed_executor_backend,
                    "max_model_len": self.max_model_len, "quantization": self.quantization,
                    "gpu_memory_utilization": self.gpu_memory_utilization}
        args.update({k: v for k, v in optional.items() if v is not None})
        return {**args, **self.extra}

    def parallel(self) -> dict:
        return {"tensor_parallel_size": self.tensor_parallel_size, "pipeline_parallel_size": self.pipeline_parallel_size,
                "data_parallel_size": self.data_parallel_size, "enable_expert_parallel": self.enable_expert_parallel,
                "distributed_executor_backend": self.distributed_executor_backend or "default"}


def engine_options(**given) -> EngineOptions:
    reserved = sorted(RESERVED & set(given.get("extra") or {}))
    if reserved:
        raise UsageError(f"--engine-args cannot set {', '.join(reserved)}: eaglezoo sets it (use its own option)",
                         hint="use eaglezoo's own option for it (eaglezoo verify --help lists them)")
    try:
        return EngineOptions(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"--{'-'.join(map(str, first['loc'])).replace('_', '-')}: {first['msg']}",
                         hint="eaglezoo verify --help lists the engine options and their ranges") from None


def engine_python(given: str | None) -> str:
    """The interpreter that runs vLLM: --engine-python, else this one when it can import vllm."""
    if given:
        path = shutil.which(given) or given
        if not Path(path).is_file() or not os.access(path, os.X_OK):
            raise UsageError(f"--engine-python {given}: no such executable",
                             hint="give the path of a Python interpreter that has vLLM installed")
        return path
    if importlib.util.find_spec("vllm") is None:
        raise UsageError("vLLM is not installed in eaglezoo's environment",
                         hint="install vllm, or give --engine-python PATH of an interpreter that has it")
    return sys.executable


def preflight(work: Workload, opts: EngineOptions) -> tuple[str, str | None]:
    """Everything that can be refused before any engine runs: interpreter, data parallel, the drafter."""
    python = engine_python(opts.python)
    if opts.data_parallel_size > 1:
        raise UsageError("vLLM's offline engine does not run data parallel in one process (it raises for "
                         "LLM(data_parallel_size>1))",
                         hint="serve with `vllm serve ... --data-parallel-size N` and measure it with --endpoint URL; "
                              "data parallelism does not change acceptance")
    support = next(e for e in engine_support(work.spec) if e.engine == "vllm")
    if not support.faithful:
        raise UsageError(f"vLLM cannot serve this drafter faithfully: {'; '.join(support.notes)}",
                         hint="serve it with another engine (eaglezoo lint lists which can), or use --engine native")
    return python, support.min_version


def measure_vllm(work: Workload, opts: EngineOptions, speedup: list[int] | None, progress: Progress) -> Measurement:
    t_start = time.perf_counter()
    python, min_version = preflight(work, opts)
    with staging(Path(tempfile.gettempdir()) / "eaglezoo-vllm") as tmp:  # a killed run's folder is swept
        drafter = engine_drafter(work, tmp / "drafter")
        config = serve_config(work.spec, "vllm", str(drafter), work.target_name, work.k).speculative_config
        request = {"model": work.target_name, "revision": work.target_revision,
                   "engine_args": opts.llm_args() | ({"seed": work.seed} if work.seed is not None else {}),
                   "prompts": work.encoded, "max_tokens": work.max_new_tokens,
                   "temperatures": work.temperatures(), "seeds": work.seeds(), "min_version": min_version,
                   "concurrency": speedup or [len(work.encoded)]}
        spec_run = run_worker(python, {**request, "speculative_config": config, "label": "with the drafter"},
                              tmp, opts.timeout_s, progress)
        base_run = None
        if speedup:
            base_run = run_worker(python, {**request, "speculative_config": None, "label": "without the drafter"},
                                  tmp, opts.timeout_s, progress)
    first = spec_run["passes"][0]
    if first["counters"]["drafts"] == 0:
        raise EngineError("vLLM ran no speculative decoding at all (0 drafts)",
                          hint="rerun with EAGLEZOO_DEBUG=1 to see the engine's log (vLLM #25250)")
    engine = {"name": "vllm", "version": spec_run["engine"]["version"], "python": python,
              "parallel": opts.parallel(), "trust_remote_code": opts.trust_remote_code,
              "start_s": spec_run["engine"]["start_s"]}
    from .report import speedup_report

    return Measurement(
        accepted=[r["accepted"] for r in first["requests"]], tokens=[r["tokens"] for r in first["requests"]],
        engine=engine, device=spec_run["engine"]["device"], dtype=spec_run["engine"]["dtype"],
        notes=[spec_run["engine"]["patched"]] if spec_run["engine"].get("patched") else [],
        counters=first["counters"], timing={"engine_start_s": engine["start_s"], "measure_s": first["wall_s"],
                                            "total_s": time.perf_counter() - t_start},
        speedup=speedup_report(spec_run, base_run, max(work.temperatures())) if base_run else None)


def engine_drafter(work: Workload, out: Path) -> Path:
    """The drafter in the canonical eagle31 form vLLM reads (ids at the top level and in eagle_config)."""
    from ..convert import apply, plan_from

    apply(plan_from(work.drafter, "eagle31"), out)
    return out


def run_worker(python: str, request: dict, tmp: Path, timeout_s: float, progress: Progress) -> dict:
    """One engine process: start, warm up, measure. Returns its engine and pass events."""
    req_path = tmp / "request.json"
    req_path.write_text(json.dumps(request))
    debug = bool(os.environ.get("EAGLEZOO_DEBUG"))
    label = request["label"]
    progress(0, None, phase=f"starting vLLM ({label})")
    log_path = Path(tempfile.gettempdir()) / f"eaglezoo-vllm-{os.getpid()}.log"  # kept when the engine fails
    keep = False
    try:
        with open(log_path, "w") as log:
            proc = subprocess.Popen([python, str(WORKER), str(req_path)], stdout=subprocess.PIPE,
                                    stderr=None if debug else log, env=engine_env(), start_new_session=True)
            try:
                events = read_events(proc, time.monotonic() + timeout_s, progress, label, len(request["concurrency"]))
            finally:
                stop(proc)
        return worker_result(events, request, python, proc.returncode, log_path)
    except EngineError as exc:
        keep = not debug
        if keep:
            exc.hint = "; ".join(filter(None, [exc.hint, f"the engine's log: {log_path}"]))
        raise
    finally:
        if not keep:
            log_path.unlink(missing_ok=True)


def worker_result(events: list[dict], request: dict, python: str, returncode: int | None, log_path: Path) -> dict:
    for e in events:
        if e["event"] == "error":
            raise worker_error(e, python, log_path)
    try:
        result = WorkerResult(engine=next(e for e in events if e["event"] == "engine"),
                              passes=[e for e in events if e["event"] == "pass"])
    except (StopIteration, ValidationError):
        result = None
    if result is None or len(result.passes) != len(request["concurrency"]):
        raise EngineError(f"the vLLM process ended without a complete result (exit status {returncode})",
                          hint="rerun with EAGLEZOO_DEBUG=1 to see the engine's output")
    return result.model_dump()


def read_events(proc: subprocess.Popen, deadline: float, progress: Progress, label: str, passes: int) -> list[dict]:
    """Events until the worker reported its last pass or an error, or exited. Not until end of file:
    an engine-core process forked by vLLM inherits the pipe and may outlive the worker."""
    events, buffer, fd = [], b"", proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not finished(events, passes):
            left = deadline - time.monotonic()
            if left <= 0:
                raise EngineError("the vLLM process did not finish in time",
                                  hint="raise --engine-timeout (seconds)")
            if not sel.select(timeout=min(left, 1.0)):
                if proc.poll() is not None:
                    return events
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return events
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                event = parse_event(line)
                if event is not None:
                    events.append(event)
                    show(event, progress, label)
    return events


def finished(events: list[dict], passes: int) -> bool:
    return any(e["event"] == "error" for e in events) or sum(e["event"] == "pass" for e in events) >= passes


def parse_event(line: bytes) -> dict | None:
    try:
        event = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None  # not ours: something wrote to the protocol before the worker moved stdout aside
    return event if isinstance(event, dict) and isinstance(event.get("event"), str) else None


def show(event: dict, progress: Progress, label: str) -> None:
    if event["event"] == "engine":
        progress(0, None, phase=f"vLLM started; measuring {label}")
    elif event["event"] == "progress" and isinstance(event.get("done"), int) and isinstance(event.get("total"), int):
        progress(event["done"], event["total"], phase=f"vLLM, {label}")


def stop(proc: subprocess.Popen) -> None:
    """The worker, vLLM's engine core and its rank workers share one process group: end them all,
    SIGTERM first, then SIGKILL for whatever is left after a grace period (a rank stuck on a GPU)."""
    signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    for _ in range(20):
        if not signal_group(proc.pid, 0):
            break
        time.sleep(0.5)
    signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # a rank in uninterruptible sleep: the real error matters more
        proc.wait(timeout=30)


def signal_group(pgid: int, sig: int) -> bool:
    """Sends sig to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


def engine_env() -> dict:
    """The engine's interpreter runs in its own environment: eaglezoo's Python settings stay here."""
    return {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}


def worker_error(event: dict, python: str, log_path: Path) -> Exception:
    kind, message = event.get("kind"), event.get("message") or ""
    if kind == "no-vllm":
        return UsageError(f"{python} cannot import vLLM", hint="give --engine-python PATH of an interpreter that has "
                                                               "vLLM installed")
    if kind == "version":
        return UsageError(message, hint="upgrade vLLM in the engine's environment")
    if kind == "engine-bug":
        return EngineError(message, hint="rerun with EAGLEZOO_DEBUG=1 to see the engine's output")
    if kind == "devices":
        return UsageError(message, hint="lower --tensor-parallel-size / --pipeline-parallel-size, or span nodes "
                                        "with --distributed-executor-backend ray")
    if kind == "argument":
        return UsageError(message, hint="check --engine-args against the installed vLLM's engine arguments "
                                        "(`vllm serve --help` lists them)")
    return engine_failure(message or log_reason(log_path))


def engine_failure(reason: str | None) -> EngineError:
    """vLLM's own reason on one line; where memory is the cause, the settings that budget it."""
    reason = printable(reason or "")[:MAX_REASON]
    if not reason:
        return EngineError("vLLM failed while starting or measuring", hint="its own reason is in the engine's log")
    memory = re.search(r"\bmemory\b", reason, re.I)
    return EngineError(f"vLLM stopped: {reason}", hint=MEMORY_HINT if memory else OWN_REASON_HINT)


def log_reason(log_path: Path) -> str | None:
    """vLLM's reason when it raised in a process of its own (the engine core, a rank): the worker then
    sees only that the engine core failed to start, and the reason is in the log that all share."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - LOG_TAIL))
            text = log.read().decode(errors="replace")
    except OSError:
        return None
    found = [m["reason"] for line in text.splitlines() if (m := LOG_REASON.search(ANSI.sub("", line)))]
    return found[-1] if found else None
