"""The vLLM worker process (`vllm_worker.py` under the engine's interpreter): started once per command, sent
runs one at a time, its JSON events read back and checked, stopped with every process vLLM started, and its
refusals turned into one line with vLLM's own reason.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import selectors
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import EngineError, UsageError, printable
from .counters import SpecDecodeCounters
from .workload import Progress

WORKER = Path(__file__).with_name("vllm_worker.py")
LEAKY_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__")
# An exception's line in the engine's log, bare or after vLLM's "(EngineCore pid=1) ERROR ... [core.py:1] " prefix
# (the prefix kept, to read the lines that continue it): any class named ...Error or ...Exception, "torch." and the
# like before the name, or a bare "Error: ...".
LOG_REASON = re.compile(r"(?P<prefix>^|.*?[)\]] )(?:[A-Za-z_][\w.]*\.)?\w*(?:Error|Exception): (?P<reason>\S.*)")
# vLLM's wrappers, which point at the root cause logged before them rather than name it: "Engine core initialization
# failed. See root cause above." (vllm/v1/engine/utils.py:1432), "Worker failed with error '...', please check the
# stack trace above for the root cause" and "WorkerProc initialization failed ... See stack trace for root cause."
# (vllm/v1/executor/multiproc_executor.py:790), and earlier releases' "Engine process failed to start".
WRAPPER = re.compile(
    r"root cause|Engine core initialization failed|WorkerProc initialization failed|"
    r"Engine process failed to start",
    re.IGNORECASE,
)
VALIDATION = re.compile(r"\d+ validation errors? for (?P<model>\w+)$")  # pydantic's first line; the fields follow
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LOG_TAIL = 1 << 20  # bytes of the log searched for the reason
MAX_REASON = 500
MEMORY_HINT = (
    "vLLM reserves --gpu-memory-utilization of the GPU's memory (on CPU: of RAM, or "
    "VLLM_CPU_KVCACHE_SPACE GiB for the KV cache where that is set): change it as vLLM says, "
    "lower --max-model-len, or free memory that other processes hold"
)
OWN_REASON_HINT = (
    "that is vLLM's own reason: fix the option (--engine-args JSON), drafter or target it names; "
    "EAGLEZOO_DEBUG=1 shows its whole output"
)
# vLLM's automatic binding gives each CPU rank a NUMA node of its own (vllm/utils/ompmultiprocessing.py:216-223)
BINDING_HINT = (
    "unset VLLM_CPU_OMP_THREADS_BIND and eaglezoo splits the cores between the ranks, or set it to one "
    "core list per rank separated by | (e.g. 0-3|4-7); or lower --tensor-parallel-size / "
    "--pipeline-parallel-size"
)


class EngineEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: str
    device: str
    dtype: str
    start_s: float
    patched: str | None = None
    bound: str | None = None  # the worker's thread binding (vllm_worker.bind_cpu_threads), said in the report
    held: int = 1  # engines the worker holds warm with this one (vllm_worker.serve: a run's `hold`)
    fit: int = 1  # engines of this one's size that fit in memory at its start, itself included (1 on a GPU)
    footprint_bytes: int | None = None  # this engine's memory as the worker measured it (resident + KV cache)


class RequestResult(BaseModel):
    """One request as the engine finished it: its tokens, seconds to the last and the first, and the tokens
    accepted at each verify step (None where the engine kept no per-request figures)."""

    model_config = ConfigDict(frozen=True)

    tokens: list[int]
    e2e_s: float
    ttft_s: float | None
    accepted: list[int] | None


class PassEvent(BaseModel):
    """One pass of the prompts at one concurrency, and what vLLM's counters added over it."""

    model_config = ConfigDict(frozen=True)

    concurrency: int
    wall_s: float
    requests: list[RequestResult]
    counters: SpecDecodeCounters


class WorkerResult(BaseModel):
    """What the worker reports (vllm_worker.py): checked here, so a malformed event is one sentence."""

    model_config = ConfigDict(frozen=True)

    engine: EngineEvent
    passes: list[PassEvent]
    started: bool | None = None  # whether this run started its engine (None: the caller tells by the config)


class WorkerSession:
    """One worker process for a whole command. Each `run` names a request file on the worker's stdin and reads
    events until that run is done; the worker keeps its engine while the speculative config stays the same.
    On an engine failure the log is kept and named in the hint; otherwise it is removed."""

    def __init__(self, python: str, setup: dict, tmp: Path, timeout_s: float, progress: Progress):
        self.python, self.setup, self.tmp, self.timeout_s, self.progress = python, setup, tmp, timeout_s, progress
        self.log_path = Path(tempfile.gettempdir()) / f"eaglezoo-vllm-{os.getpid()}.log"
        self.debug = bool(os.environ.get("EAGLEZOO_DEBUG"))
        self.engine: dict | None = None  # the last engine event: the one serving the runs that follow
        self.held: list[dict | None] = []  # the speculative configs of the engines it holds (vllm_worker.serve)
        self.runs, self.buffer, self.proc = 0, b"", None

    def __enter__(self) -> Self:
        (self.tmp / "session.json").write_text(json.dumps(self.setup))
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [self.python, str(WORKER), str(self.tmp / "session.json")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None if self.debug else log,
                env=engine_env(),
                start_new_session=True,
            )
        return self

    def __exit__(self, kind, exc, tb) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        stop(self.proc)
        keep = isinstance(exc, EngineError) and not self.debug
        if keep:
            exc.hint = "; ".join(filter(None, [exc.hint, f"the engine's log: {self.log_path}"]))
        else:
            self.log_path.unlink(missing_ok=True)

    def run(self, request: dict, progress: Progress | None = None) -> WorkerResult:
        """One run (its speculative config, prompts and concurrencies): the engine serving it and its passes."""
        progress = progress or self.progress
        label = request["label"]
        path = self.tmp / f"run-{self.runs}.json"
        self.runs += 1
        path.write_text(json.dumps(request))
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        starting = request["speculative_config"] not in self.held
        progress(0, None, phase=f"starting vLLM ({label})" if starting else f"vLLM: {label}")
        with contextlib.suppress(OSError):  # a worker that already exited has said why in its events
            self.proc.stdin.write(f"{path}\n".encode())
            self.proc.stdin.flush()
        events = self.read_events(time.monotonic() + self.timeout_s, progress, label)
        self.engine = next((e for e in reversed(events) if e["event"] == "engine"), self.engine)
        if any(e["event"] == "engine" for e in events):  # a start: beside the engines held, or after them
            kept = self.held if (self.engine or {}).get("held", 1) > 1 else []
            self.held = [*kept, request["speculative_config"]]
        failure = next((e for e in events if e["event"] == "error"), None)
        if failure is not None:
            raise worker_error(failure, self.python, self.log_path, log_start)
        return worker_result(events, self.engine, len(request["concurrency"]), self.proc.poll())

    def read_events(self, deadline: float, progress: Progress, label: str) -> list[dict]:
        """Events until the run is done, the worker reported an error, or it exited. Not until end of file:
        an engine-core process forked by vLLM inherits the pipe and may outlive the worker."""
        events, fd = [], self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not any(e["event"] in ("done", "error") for e in events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EngineError(
                        "the vLLM process did not finish in time", hint="raise --engine-timeout (seconds)"
                    )
                if not sel.select(timeout=min(left, 1.0)):
                    if self.proc.poll() is not None:
                        return events
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return events
                *lines, self.buffer = (self.buffer + chunk).split(b"\n")
                for event in filter(None, map(parse_event, lines)):
                    events.append(event)
                    show(event, progress, label)
        return events


def worker_result(events: list[dict], engine: dict | None, passes: int, returncode: int | None) -> WorkerResult:
    """The run's passes, whole (the caller has raised the worker's first error event, if any)."""
    try:
        started = any(e["event"] == "engine" for e in events)
        done = [e for e in events if e["event"] == "pass"]
        result = WorkerResult(engine=engine, passes=done, started=started) if engine else None
    except ValidationError:
        result = None
    if result is None or len(result.passes) != passes or not any(e["event"] == "done" for e in events):
        raise EngineError(
            f"the vLLM process ended without a complete result (exit status {returncode})",
            hint="rerun with EAGLEZOO_DEBUG=1 to see the engine's output",
        )
    return result


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
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
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


@functools.cache  # asked before anything is read, and again where the engine starts: one probe per interpreter
def finds_vllm(python: str) -> bool:
    """Whether `python`, in the engine's environment, finds vLLM: a moment, nothing is imported (the worker still
    reports a vLLM that is found but fails to import). An interpreter that cannot run the probe is refused."""
    probe = "import importlib.util; print('absent' if importlib.util.find_spec('vllm') is None else 'found')"
    hint = "give the path of a Python interpreter that has vLLM installed"
    try:
        proc = subprocess.run(
            [python, "-c", probe], env=engine_env(), capture_output=True, text=True, timeout=60, check=False
        )
    except subprocess.TimeoutExpired:
        raise UsageError(f"--engine-python {python} did not answer within 60 s", hint=hint) from None
    except (OSError, subprocess.SubprocessError):
        raise UsageError(f"--engine-python {python} could not be run", hint=hint) from None
    answer = proc.stdout.strip()
    if proc.returncode != 0 or answer not in ("found", "absent"):
        said = (
            printable(proc.stderr.strip().splitlines()[-1])[:200] if proc.stderr.strip() else f"exit {proc.returncode}"
        )
        raise UsageError(f"--engine-python {python} is not a working Python interpreter ({said})", hint=hint)
    return answer == "found"


def no_vllm(python: str) -> UsageError:
    """The one line for an interpreter without vLLM, whether the probe or the worker found it out."""
    return UsageError(
        f"{python} cannot import vLLM", hint="give --engine-python PATH of an interpreter that has vLLM installed"
    )


def worker_error(event: dict, python: str, log_path: Path, log_start: int = 0) -> Exception:
    kind, message = event.get("kind"), event.get("message") or ""
    if kind == "no-vllm":
        return no_vllm(python)
    if kind == "version":
        return UsageError(message, hint="upgrade vLLM in the engine's environment")
    if kind == "engine-bug":
        return EngineError(message, hint="rerun with EAGLEZOO_DEBUG=1 to see the engine's output")
    if kind == "devices":
        return UsageError(
            message,
            hint="lower --tensor-parallel-size / --pipeline-parallel-size, or span nodes "
            "with --distributed-executor-backend ray",
        )
    if kind == "cores":
        return UsageError(
            message,
            hint="lower --tensor-parallel-size / --pipeline-parallel-size, allow this process "
            "more cores, or set VLLM_CPU_OMP_THREADS_BIND yourself (one core list per "
            "rank, separated by |; nobind leaves the threads unbound)",
        )
    if kind == "argument":
        return UsageError(
            message,
            hint="check --engine-args against the installed vLLM's engine arguments (`vllm serve --help` lists them)",
        )
    return engine_failure(message or log_reason(log_path, log_start))


def refused_input(error: EngineError) -> bool:
    """vLLM stopping on what it was given, in its own words (`engine_failure`): not on memory, time or threads."""
    return error.message.startswith("vLLM stopped:") and (error.hint or "").startswith(OWN_REASON_HINT)  # + its log


def engine_failure(reason: str | None) -> EngineError:
    """vLLM's own reason on one line; where memory is the cause, the settings that budget it."""
    reason = cut(reason or "")
    if not reason:
        return EngineError("vLLM failed while starting or measuring", hint="its own reason is in the engine's log")
    if re.search(r"\bNUMA nodes to bind threads\b", reason):
        return EngineError(f"vLLM stopped: {reason}", hint=BINDING_HINT)
    memory = re.search(r"\bmemory\b", reason, re.IGNORECASE)
    return EngineError(f"vLLM stopped: {reason}", hint=MEMORY_HINT if memory else OWN_REASON_HINT)


def cut(reason: str) -> str:
    """One printable line of at most MAX_REASON characters, "..." where it was cut."""
    reason = printable(reason)
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 4].rstrip() + " ..."


def log_reason(log_path: Path, start: int = 0) -> str | None:
    """vLLM's reason when the worker could not pass it on: raised in a process of its own (the engine core, a
    rank), where the worker sees only that the engine core failed to start, or of a kind the worker does not pass
    on; the traceback is in the log that all share. The root cause is the last exception line that is not one of
    vLLM's wrappers (which say that the cause is above), cut to one printable line. Read from `start`, where the
    failing run began: an earlier engine's lines are not this failure's reason."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(start, log.seek(0, os.SEEK_END) - LOG_TAIL))
            text = log.read().decode(errors="replace")
    except OSError:
        return None
    lines = [ANSI.sub("", line) for line in text.splitlines()]
    found = None
    for n, line in enumerate(lines):
        m = LOG_REASON.match(line)
        if m and not WRAPPER.search(m["reason"]):
            found = m["reason"]
            if (v := VALIDATION.match(found.strip())) and (fields := validation_fields(lines[n + 1 :], m["prefix"])):
                found = f"{v['model']}: {fields}"
    return cut(found) if found else None


def validation_fields(lines: list[str], prefix: str) -> str | None:
    """pydantic's lines after "N validation error(s) for X": each field's name, then its message indented two
    spaces (" [type=...]" after it), then a "For further information" line. As "field: message; ..."."""
    fields, name = [], None
    for line in lines[:60]:
        if not line.startswith(prefix) or not line[len(prefix) :].strip():
            break
        line = line[len(prefix) :]
        if not line.startswith(" "):
            if not re.fullmatch(r"\S+", line):  # not a field's name: the error's lines have ended
                break
            name = line
        elif line.startswith("  ") and not line.startswith("   "):
            message = re.sub(r" \[type=[^\]]*\]$", "", line.strip()).removeprefix("Value error, ")
            fields.append(f"{name}: {message}" if name else message)
            name = None
    return "; ".join(fields) or None
