"""Counts what the suite starts, per test, to see where its time goes without trusting wall times on a shared
machine: every process a test process starts (`subprocess.Popen`: the CLI by `run_cli`, vLLM servers, llama-server,
converters), every in-process CLI run (`run_inprocess`), and each test's setup/call/teardown seconds. Off unless
EAGLEZOO_START_LOG names a folder; each pytest process (an xdist worker or the controller) then writes one JSON
line per event to a file of its own there. `python -m tests.support.start_log FOLDER` prints the summary per module.
Nothing here changes what a test does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ENV = "EAGLEZOO_START_LOG"
_current = {"test": "", "module": ""}
_sink: list = []
_cpu_at_start: list[float] = [0.0]


def kind(argv: list[str]) -> str:
    """A start's kind from its command line."""
    words = [str(a) for a in argv]
    head = os.path.basename(words[0]) if words else ""
    if head == "llama-server":
        return "llama-server"
    if "vllm.entrypoints.openai.api_server" in words:
        return "vllm-server"
    cli = next((n for n, w in enumerate(words) if w == "eaglezoo" or w.endswith("/bin/eaglezoo")), None)
    if cli is not None:
        command = next((w for w in words[cli + 1 :] if not w.startswith("-")), "?")
        if any(w in ("--engine-python", "--endpoint") for w in words) or "vllm" in words or "llama.cpp" in words:
            return f"cli {command} (engine)"
        return f"cli {command}"
    if ".venv-vllm" in words[0]:
        return "vllm python"
    if head.startswith("python"):
        return "python -c" if "-c" in words else "python"
    return head or "?"


def _log(event: dict) -> None:
    if _sink:
        _sink[0].write(json.dumps({**_current, **event}) + "\n")
        _sink[0].flush()


def install(folder: str) -> None:
    """Wrap Popen and the in-process runner for this process; one log file per process."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _sink.append(open(Path(folder) / f"{name}-{os.getpid()}.jsonl", "a"))  # noqa: SIM115 - open for the session
    original = subprocess.Popen.__init__

    def popen_init(self, args, *rest, **kw):
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        _log({"event": "start", "kind": kind(argv)})
        original(self, args, *rest, **kw)

    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]


def inprocess(args: tuple) -> None:
    command = next((str(a) for a in args if not str(a).startswith("-")), "?")
    _log({"event": "start", "kind": f"in-process {command}"})


def cpu() -> float:
    """This process's CPU seconds and its reaped children's (a CLI subprocess, once `run_cli` has waited for it)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def enter(nodeid: str, module: str) -> None:
    _current.update(test=nodeid, module=module)
    _cpu_at_start[0] = cpu()


def report(when: str, seconds: float, outcome: str) -> None:
    """One phase's wall seconds; after teardown, the test's CPU seconds too (steadier than wall on a shared machine)."""
    spent = {"cpu": round(cpu() - _cpu_at_start[0], 3)} if when == "teardown" else {}
    _log({"event": "time", "when": when, "seconds": round(seconds, 3), "outcome": outcome, **spent})


def summary(folder: Path) -> str:
    starts: dict[str, Counter] = defaultdict(Counter)
    seconds: Counter = Counter()
    cpu_s: Counter = Counter()
    for f in sorted(folder.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "start":
                starts[e["module"]][e["kind"]] += 1
            else:
                seconds[e["module"]] += e["seconds"]
                cpu_s[e["module"]] += e.get("cpu", 0.0)
    total: Counter = Counter()
    rows = []
    for module in sorted(seconds, key=lambda m: -seconds[m]):
        total.update(starts[module])
        kinds = ", ".join(f"{k} {n}" for k, n in starts[module].most_common())
        rows.append(f"{seconds[module]:8.1f} s {cpu_s[module]:8.1f} cpu-s  {module}: {kinds or '-'}")
    everything = ", ".join(f"{k} {n}" for k, n in total.most_common())
    rows.append(f"{sum(seconds.values()):8.1f} s {sum(cpu_s.values()):8.1f} cpu-s  in all: {everything}")
    return "\n".join(rows)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
