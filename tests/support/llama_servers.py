"""llama-server (llama.cpp b11434, the build scripts/setup/llama_server.sh leaves in the cache) for the engine tier:
the example's GGUFs (the drafter by `eaglezoo convert --to gguf`, the target by llama.cpp's own converter with the
pre-tokenizer WORKAROUND of support/llamacpp.py, both fp32), a server started as a user starts it (`-t 1`: the
machine has 2 cores) on a free port, and stopped. Without the binary or the source the tests skip, naming the setup
command."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLE, run_cli

from eaglezoo.errors import EaglezooError
from eaglezoo.verify.llama_server import SETUP_COMMAND, find_llama_server
from support import llamacpp
from support.net import free_port


def binary() -> Path:
    try:
        return find_llama_server()
    except EaglezooError:
        pytest.skip(f"llama-server not built: run {SETUP_COMMAND}")


def target_gguf(out: Path) -> Path:
    """The example target as llama.cpp's converter writes it (f32), with the workaround its error asks for."""
    src = llamacpp.source_dir()
    code = src / "llama.cpp"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(code), str(code / "gguf-py"), str(src / "pydeps")]),
        "HF_HUB_OFFLINE": "1",
    }
    args = [str(EXAMPLE / "target"), "--outfile", str(out), "--outtype", "f32"]
    proc = subprocess.run(
        [sys.executable, "-c", llamacpp.WORKAROUND, *args],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def drafter_gguf(out: Path, aux: str = "2,3,4") -> Path:
    """The example EAGLE-3 drafter converted by eaglezoo, read with the boundary taps `aux`."""
    r = run_cli(
        "convert",
        EXAMPLE / "eagle3-safeai",
        out,
        "--to",
        "gguf",
        "--target",
        EXAMPLE / "target",
        "--aux-layers",
        aux,
        "--aux-convention",
        "boundary",
        "--dtype",
        "float32",
    )
    assert r.code == 0, r.err
    return out / "drafter.gguf"


@contextlib.contextmanager
def serving(
    target: Path, drafter: Path, *extra: str, k: int = 3, metrics: bool = True, spec: str = "draft-eagle3"
) -> Iterator[tuple]:
    """(process, url) of a llama-server with the drafter, ready; stopped (killed if need be) after."""
    port = free_port()
    cmd = [str(binary()), "-m", target, "-md", drafter, "--spec-type", spec, "--spec-draft-n-max", str(k)]
    cmd += ["--metrics"] * metrics + ["--port", str(port), "-t", "1", "-c", "2048", "-np", "1", *extra]
    proc = subprocess.Popen(
        list(map(str, cmd)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not healthy(url):
            assert proc.poll() is None and time.monotonic() < deadline, "llama-server did not start"
            time.sleep(0.2)
        yield proc, url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False
