"""One llama-server (llama.cpp b11434) started, awaited and stopped: the engine `verify --engine llamacpp` runs.

`llama-server -m TARGET.gguf -md DRAFTER.gguf --spec-type draft-eagle3|draft-dflash --spec-draft-n-max K
--spec-draft-p-min 0 --metrics --port PORT -t THREADS -c CTX -np 1 --no-cache-prompt --no-webui` on a free loopback
port, its log in a temporary file. `--spec-draft-p-min 0` is b11434's default already (common/common.h:333,
read by common/arg.cpp:4207-4211) and is given explicitly: a drafter that stops a draft below p-min
(common/speculative.cpp:871, 1369) drafts fewer than K tokens, and eaglezoo's native engine always drafts K. The
server is ready when `/health` answers 200 (it answers 503 while it loads, tools/server/server.cpp:263); a server
that exits first is one line naming its last meaningful log line. It is stopped in a `finally`: terminated, then
killed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import EngineError, UsageError, printable
from .llama_server import LLAMACPP_BUILD, find_llama_server
from .server_http import Redirected, TimedOut, fetch

SPEC_TYPES = {"eagle3": "draft-eagle3", "dflash": "draft-dflash", "dspark": "draft-dspark"}
STOP_S = 10.0  # after SIGTERM, before SIGKILL
POLL_S = 0.25


@dataclass(frozen=True)
class LlamaServerOptions:
    """How eaglezoo runs llama-server: the binary (None: `find_llama_server`'s rule), threads, the context of its
    one slot, and how long it may take to load."""

    binary: Path | None = None
    threads: int = 1
    ctx: int = 2048
    start_timeout_s: float = 300.0
    parallel: int = 1  # -np: slots served at once (tune measures each load on as many slots)
    p_min: float = 0.0  # --spec-draft-p-min (b11434's default, common/common.h:333)


@dataclass(frozen=True)
class LlamaServer:
    url: str
    command: tuple[str, ...]
    log: Path
    proc: subprocess.Popen[bytes]

    def died(self, exc: EngineError) -> EngineError:
        """A failed request as what it is: the server's exit, with its log's reason, where it exited."""
        if self.proc.poll() is None:
            return exc
        return EngineError(
            f"llama-server exited ({self.proc.returncode}) while measuring: {last_line(self.log)}",
            hint=f"llama.cpp {LLAMACPP_BUILD} failed on this drafter or target; its log line says where",
        )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(
    binary: Path, files: tuple[Path, Path | None], family: str, k: int, port: int, o: LlamaServerOptions
) -> tuple[str, ...]:
    """The command line for (target, drafter), one flag per fact (common/arg.cpp); without a drafter (None: tune's
    K = 0), the target alone. `-c` is the context of all slots together: with a fixed `-np` and no --kv-unified
    (common/arg.cpp:1727-1732) each slot gets the context's per-sequence share (tools/server/server-context.cpp:
    4377-4385, llama_n_ctx_seq), so `-c` is the one slot's context times the slots."""
    target, drafter = files
    spec = (
        ()
        if drafter is None
        else (
            *("-md", str(drafter), "--spec-type", SPEC_TYPES[family]),
            *("--spec-draft-n-max", str(k), "--spec-draft-p-min", f"{o.p_min:g}"),
        )
    )
    return (
        str(binary),
        *("-m", str(target)),
        *spec,
        "--metrics",
        *("--host", "127.0.0.1", "--port", str(port)),
        *("-t", str(o.threads), "-c", str(o.ctx * o.parallel), "-np", str(o.parallel)),
        "--no-cache-prompt",
        "--no-webui",
    )


@contextlib.contextmanager
def llama_server(
    target: Path, drafter: Path | None, family: str, k: int, options: LlamaServerOptions = LlamaServerOptions()
) -> Iterator[LlamaServer]:
    """A running llama-server serving `target` with `drafter`, stopped when the block ends (whatever ends it)."""
    binary = find_llama_server(options.binary)
    port = free_port()
    command = server_command(binary, (target, drafter), family, k, port, options)
    with tempfile.TemporaryDirectory(prefix="eaglezoo-llama-server-") as tmp:
        log = Path(tmp) / "llama-server.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                server = LlamaServer(f"http://127.0.0.1:{port}", command, log, proc)
                wait_ready(proc, server, options.start_timeout_s)
                yield server
            finally:
                stop(proc)


def wait_ready(proc: subprocess.Popen[bytes], server: LlamaServer, timeout_s: float) -> None:
    """Until `/health` answers 200; one line when the server exits or the deadline passes first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineError(
                f"llama-server exited ({proc.returncode}) while loading: {last_line(server.log)}",
                hint=f"check the GGUF files it was given ({gguf_names(server.command)}): llama.cpp "
                f"{LLAMACPP_BUILD} refused them",
            )
        if healthy(server.url):
            return
        time.sleep(POLL_S)
    raise EngineError(
        f"llama-server did not become ready within {timeout_s:g} s: {last_line(server.log)}",
        hint="a larger model loads longer; check its log line above",
    )


def gguf_names(command: tuple[str, ...]) -> str:
    """The `-m` and `-md` files of a command, by name."""
    return ", ".join(f"{flag} {Path(command[i + 1]).name}" for i, flag in enumerate(command) if flag in ("-m", "-md"))


def healthy(url: str) -> bool:
    try:
        fetch(url + "/health", None, 1 << 16)
    except (urllib.error.URLError, OSError, TimedOut, Redirected, ValueError):
        return False
    return True


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to its process group, then SIGKILL after STOP_S; reaped either way."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(STOP_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(STOP_S)


LEVEL = re.compile(r"^[\d.]+ ([EWI]) (.*)$")  # llama.cpp's log lines: "0.00.012.422 E llama_model_load: ..."


def last_line(log: Path) -> str:
    """The log's meaningful line: a failed assertion (llama.cpp aborts with GGML_ASSERT/GGML_ABORT), else its first
    error that is not one llama.cpp calls normal (what follows an error are consequences: "failed to load model",
    "exiting due to model loading error"), else its last line; source paths cut to llama.cpp's own, printable,
    200 characters at most. The log holds file paths and model facts, no secrets (llama-server is given no key)."""
    try:
        lines = [printable(x).strip() for x in log.read_text("utf-8", "replace").splitlines()[:5000]]
    except OSError:
        return "no log"
    lines = [x for x in lines if x]
    aborts = [x for x in lines if ABORT.search(x)]
    parsed = [LEVEL.match(x) for x in lines]
    errors = [m.group(2) for m in parsed if m and m.group(1) == "E" and "is normal" not in m.group(2)]
    chosen = (aborts or errors or lines[-1:] or ["no log line"])[0]
    return SOURCE_PATH.sub("", chosen)[:200]


ABORT = re.compile(r"GGML_ASSERT|GGML_ABORT|terminate called|what\(\)")
SOURCE_PATH = re.compile(r"^\S*/llama\.cpp/")  # /root/.cache/.../llama.cpp/src/llama-graph.cpp:1413 -> src/...


@dataclass(frozen=True)
class LlamacppOptions:
    """`verify --engine llamacpp`: the server's settings and the target's GGUF (None: eaglezoo writes it, fp32, as
    `eaglezoo convert TARGET OUT --to gguf` does)."""

    server: LlamaServerOptions = LlamaServerOptions()
    target_gguf: Path | None = None


def check_llamacpp_options(options: LlamacppOptions) -> None:
    """What --engine llamacpp refuses before anything is read: no binary; a --target-gguf that is no target's GGUF."""
    find_llama_server(options.server.binary)
    if options.target_gguf is None:
        return
    if not options.target_gguf.is_file():
        raise UsageError(f"--target-gguf {options.target_gguf}: not a file", hint="give the target's GGUF file")
    with options.target_gguf.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise UsageError(
                f"--target-gguf {options.target_gguf}: not a GGUF file", hint="give the target's GGUF file"
            )
    arch = gguf_architecture(options.target_gguf)
    if arch in DRAFTER_ARCHS:
        raise UsageError(
            f"--target-gguf {options.target_gguf} is a drafter (general.architecture {arch}), not a target",
            hint="give the target's GGUF (llama-server -m); eaglezoo converts the drafter itself",
        )


DRAFTER_ARCHS = (
    "eagle3",
    "dflash",
    "dspark",
)  # general.architecture of llama.cpp's drafters (src/llama-arch.cpp:146-148)


def gguf_architecture(path: Path) -> str | None:
    """A GGUF's general.architecture, or None where the gguf library cannot read it (llama-server then says why)."""
    import gguf  # noqa: PLC0415 - gguf (numpy) is heavy: read only when --engine llamacpp runs

    try:
        field = gguf.GGUFReader(path).fields.get("general.architecture")
        return printable(str(field.contents()))[:40] if field is not None else None
    except Exception:  # noqa: BLE001 - any unreadable GGUF is llama-server's to refuse, in its own words
        return None
