"""A real llama-server for the engine tests: started with one thread (the machine has 2 cores) on a free port,
waited on with a deadline, asked with a timeout, and killed in a `finally`."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .net import free_port


def binary() -> Path:
    """The llama-server eaglezoo finds; a reported skip naming the setup command when there is none."""
    from eaglezoo.errors import EaglezooError
    from eaglezoo.verify.llama_server import SETUP_COMMAND, find_llama_server

    try:
        return find_llama_server()
    except EaglezooError as exc:
        pytest.skip(f"{exc.message}: run {SETUP_COMMAND}")


@contextmanager
def serving(args: list[str], log: Path, timeout: float = 240.0) -> Iterator[str]:
    """`args` (the whole llama-server command, no --port) started on a free port; yields its base URL."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([*args, "--host", "127.0.0.1", "--port", str(port)], stdout=out, stderr=out)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_healthy(proc, url, log, timeout)
            yield url
        finally:
            proc.kill()
            proc.wait(timeout=30)


def _wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"llama-server exited {proc.returncode}: {log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"llama-server not healthy in {timeout:.0f} s: {log.read_text(errors='replace')[-3000:]}")


def post(url: str, path: str, body: dict, timeout: float = 120.0) -> dict:
    req = urllib.request.Request(
        f"{url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def greedy(url: str, ids: list[int], n: int = 16) -> dict:
    """/completion of a prompt given as token ids, greedy, exactly `n` tokens (end of text ignored)."""
    return post(
        url,
        "/completion",
        {
            "prompt": ids,
            "n_predict": n,
            "temperature": 0,
            "top_k": 1,
            "ignore_eos": True,
            "return_tokens": True,
            "cache_prompt": False,
        },
    )
