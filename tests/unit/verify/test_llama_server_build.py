"""scripts/setup/llama_server.sh, run for real against a stand-in `cmake` on PATH (the real build takes about
20 minutes here: docs/benchmarks.md): the build is niced and uses every core, a finished build is kept and its path
printed, and `scripts/test.sh` builds llama-server after the vLLM set-up."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest
from conftest import ROOT

from eaglezoo.verify.llama_server import SETUP_COMMAND

FAKE_CMAKE = """#!/usr/bin/env bash
echo "niceness=$(nice) args=$*" >> "$CALLS"
if [ "$1" = "--build" ]; then
  mkdir -p "$2/bin" && printf '#!/bin/sh\\n' > "$2/bin/llama-server" && chmod +x "$2/bin/llama-server"
fi
"""


def source_ready() -> None:
    src = subprocess.run(
        ["bash", "scripts/setup/llamacpp_src.sh"], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    if src.returncode != 0:
        pytest.skip(f"llama.cpp source unavailable: run bash scripts/setup/llamacpp_src.sh ({src.stderr[-200:]})")


def test_the_build_is_niced_on_every_core_and_kept(tmp_path):
    source_ready()
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "cmake").write_text(FAKE_CMAKE)
    (tools / "cmake").chmod(stat.S_IRWXU)
    calls, dest = tmp_path / "calls", tmp_path / "build"
    env = {
        **os.environ,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "CALLS": str(calls),
        "EAGLEZOO_LLAMACPP_BUILD": str(dest),
    }
    run = ["bash", *SETUP_COMMAND.split()[1:]]
    first = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().splitlines()[-1] == str(dest / "bin" / "llama-server")
    configure, build = calls.read_text().splitlines()
    assert configure.startswith("niceness=19 ") and build.startswith("niceness=19 ")
    # every core this process may use, even where OMP_NUM_THREADS=1 (as here: GNU nproc obeys it)
    assert f"--target llama-server -j {len(os.sched_getaffinity(0))}" in build
    again = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert again.stdout.strip() == str(dest / "bin" / "llama-server")
    assert len(calls.read_text().splitlines()) == 2  # kept: nothing built again


def test_the_test_command_builds_llama_server_after_vllm():
    lines = [x.strip() for x in (ROOT / "scripts" / "test.sh").read_text().splitlines()]
    assert SETUP_COMMAND in lines
    assert lines.index(SETUP_COMMAND) == lines.index("bash scripts/setup/vllm_cpu.sh .venv-vllm") + 1
