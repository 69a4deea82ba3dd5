"""llama-server's lifecycle (verify/llamacpp_engine.llama_server) with real processes standing in for the binary
(shell scripts given as --llama-server): one that exits at start is one line with its log's error, one that never
answers /health is cut at the deadline, one that ignores SIGTERM is killed; none is left running. A real llama-server:
tests/engine/test_verify_llamacpp.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from eaglezoo.errors import EngineError
from eaglezoo.verify import llamacpp_engine
from eaglezoo.verify.llamacpp_engine import LlamaServerOptions, llama_server


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "llama-server"
    path.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\n{body}\n")
    path.chmod(0o755)
    return path


def gone(tmp_path: Path) -> bool:
    pid = int((tmp_path / "pid").read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def start(binary: Path, timeout_s: float = 30.0):
    options = LlamaServerOptions(binary=binary, start_timeout_s=timeout_s)
    return llama_server(Path("t.gguf"), Path("d.gguf"), "eagle3", 3, options)


def test_a_server_that_exits_at_start_is_one_line_with_its_first_error(tmp_path):
    binary = script(
        tmp_path,
        'echo "0.00.012.422 E llama_model_load: error loading model: EAGLE3 requires exactly 3 entries"\n'
        'echo "0.00.017.181 E srv  llama_server: exiting due to model loading error"\nexit 3',
    )
    with pytest.raises(EngineError) as caught, start(binary):
        pass
    assert caught.value.message == (
        "llama-server exited (3) while loading: "
        "llama_model_load: error loading model: EAGLE3 requires exactly 3 entries"
    )


def test_a_server_that_never_answers_is_cut_at_the_deadline_and_stopped(tmp_path):
    binary = script(tmp_path, "exec sleep 60")
    t0 = time.monotonic()
    with pytest.raises(EngineError) as caught, start(binary, timeout_s=1.0):
        pass
    assert "did not become ready within 1 s" in caught.value.message
    assert time.monotonic() - t0 < 20 and gone(tmp_path)


def test_a_server_that_ignores_sigterm_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(llamacpp_engine, "STOP_S", 0.5)
    binary = script(tmp_path, "trap '' TERM\nwhile :; do sleep 0.1; done")
    with pytest.raises(EngineError), start(binary, timeout_s=1.0):
        pass
    assert gone(tmp_path)
