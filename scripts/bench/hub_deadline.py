#!/usr/bin/env python3
"""Measure how long each Hub command takes to report a silent Hub with default settings (no
EAGLEZOO_HUB_* variables): `pull`, remote `lint`, `registry sync` and `registry check --online`,
against a server that accepts connections and never answers, and one that sends response headers and
then stalls the body. The four commands run at once against each server in turn (they mostly wait);
a run still going at --limit seconds is killed and reported as such.

    .venv/bin/python -m scripts.bench.hub_deadline [--limit 300] [--root CHECKOUT]

--root runs another checkout's eaglezoo (e.g. an export of an older commit) with this interpreter.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.support.fakehub import never_answer, serve_raw, stall_after_headers

ENTRY = "angelslim-qwen3-8b-eagle3"  # a published entry of the registry


def commands(root: Path) -> dict[str, list[str]]:
    registry = str(root / "registry")
    return {
        "pull": ["pull", "tester/drafter"],
        "lint": ["lint", "tester/drafter"],
        "registry sync": ["registry", "sync", ENTRY, "--registry", registry],
        "registry check --online": ["registry", "check", "--online", ENTRY, "--registry", registry],
    }


def default_env(endpoint: str, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EAGLEZOO_", "HF_"))}
    return {**env, "HF_ENDPOINT": endpoint, "HF_HOME": home, "HF_HUB_DISABLE_TELEMETRY": "1", "NO_COLOR": "1"}


def timed(argv: list[str], root: Path, env: dict[str, str], limit: float) -> tuple[str, str, str]:
    """(seconds, exit code, last line of stderr) of one CLI run."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "eaglezoo", *argv],
        cwd=root,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _, err = proc.communicate(timeout=limit)
        seconds, code = f"{time.monotonic() - start:.1f}", str(proc.returncode)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        seconds, code = f"> {limit:g} (killed)", "-"
    return seconds, code, err.strip().splitlines()[-1] if err.strip() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=300, help="kill a run still going after this many seconds")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    args = parser.parse_args()
    servers = {
        name: serve_raw(answer)
        for name, answer in (("never answers", never_answer), ("stalls the body", stall_after_headers))
    }
    print("| server | command | seconds | exit | stderr |\n|---|---|---|---|---|")
    for server, (raw, _) in servers.items():
        endpoint = f"http://127.0.0.1:{raw.server_address[1]}"
        with tempfile.TemporaryDirectory() as home, ThreadPoolExecutor(max_workers=4) as pool:
            runs = {
                name: pool.submit(timed, argv, args.root, default_env(endpoint, home), args.limit)
                for name, argv in commands(args.root).items()
            }
            for name, run in runs.items():
                seconds, code, line = run.result()
                print(f"| {server} | `eaglezoo {name}` | {seconds} | {code} | {line[:120]} |", flush=True)
    for _, released in servers.values():
        released.set()


if __name__ == "__main__":
    main()
