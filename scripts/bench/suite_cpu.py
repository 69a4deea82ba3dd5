#!/usr/bin/env python3
"""Where the test suite's CPU goes, process by process (docs/notes/test-suite.md, "The floor, process by process").

    python -m scripts.bench.suite_cpu run [PYTEST ARGS]    # the suite with every Python process logging itself
    python -m scripts.bench.suite_cpu summary LOG          # that log, by kind of process

`run` puts a `sitecustomize` on PYTHONPATH (the suite's own processes and the CLI starts it makes) and a `.pth`
file in the vLLM venv (its engine processes get a cleaned environment), both logging at exit, `os._exit`
included, each process's own CPU and which of torch, transformers and vLLM it imported. The `.pth` file is
removed when the suite ends. Processes killed by a signal are not logged.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOOK = """
import atexit, json, os, resource, sys
_done = []
def _log():
    if _done:
        return
    _done.append(1)
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    row = {"argv": sys.argv[:3], "pid": os.getpid(), "ppid": os.getppid(), "exe": sys.executable,
           "cpu": own.ru_utime + own.ru_stime, "child_cpu": children.ru_utime + children.ru_stime,
           "imported": [m for m in ("torch", "transformers", "vllm") if m in sys.modules]}
    with open(LOG, "a") as f:
        f.write(json.dumps(row) + "\\n")
atexit.register(_log)
_os_exit = os._exit
def _exit(code):
    _log()
    _os_exit(code)
os._exit = _exit
"""


def run(pytest_args: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    log = work / "log.jsonl"
    (work / "suite_cpu_hook.py").write_text(f"LOG = {str(log)!r}\n" + HOOK)
    (work / "sitecustomize.py").write_text("import suite_cpu_hook\n")
    site = next((ROOT / ".venv-vllm" / "lib").glob("python3*/site-packages"), None)
    pth = site / "zz_suite_cpu.pth" if site else None
    if pth:
        pth.write_text(f"import sys; sys.path.append({str(work)!r}); import suite_cpu_hook\n")
    try:
        env = {**os.environ, "PYTHONPATH": str(work)}
        code = subprocess.run(
            [
                str(ROOT / ".venv/bin/python"),
                "-m",
                "pytest",
                "-q",
                "-n",
                "3",
                "--dist",
                "loadfile",
                "-p",
                "no:cacheprovider",
                *pytest_args,
            ],
            cwd=ROOT,
            env=env,
            timeout=3 * 3600,
        ).returncode
    finally:
        if pth:
            pth.unlink(missing_ok=True)
    print(f"log: {log}")
    summary(log)
    return code


def kind(row: dict) -> str:
    if "vllm" in row["imported"]:
        return "vLLM engine process"
    if not row["argv"][0].endswith(("eaglezoo/__main__.py", "bin/eaglezoo")):
        return "other Python process (pytest, its workers, helpers)"
    level = next((m for m in ("transformers", "torch") if m in row["imported"]), None)
    return f"CLI start importing {level}" if level else "CLI start, torch not imported"


def summary(log: Path) -> None:
    cpu = collections.defaultdict(list)
    for line in Path(log).read_text().splitlines():
        row = json.loads(line)
        cpu[kind(row)].append(row["cpu"])
    print(f"{'kind':55} {'n':>5} {'CPU s':>8} {'p10':>6} {'median':>7} {'n x p10':>8}")
    for name, values in sorted(cpu.items()):
        values.sort()
        p10, median = values[len(values) // 10], values[len(values) // 2]
        print(f"{name:55} {len(values):5d} {sum(values):8.0f} {p10:6.2f} {median:7.2f} {len(values) * p10:8.0f}")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2:]))
    if len(sys.argv) == 3 and sys.argv[1] == "summary":
        summary(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
