"""The output contract (README): one-line errors, JSON errors with --json, no truncation when piped, a
closed stdout is not an error, EAGLEZOO_DEBUG changes no exit code, the user's umask on outputs, and
no leftovers after SIGTERM, SIGHUP or SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import CLI_ENV, EXAMPLE, EXAMPLE_IDS, ROOT, assert_clean_failure, run_cli, run_inprocess
from support.factory import make_drafter, make_spec


def test_usage_errors_are_one_line(cli):
    assert_clean_failure(cli("verify"), None, contains="missing argument")
    assert_clean_failure(cli("lint", "x", "--bogus"), None, contains="no such option: --bogus")
    assert_clean_failure(cli("serve-config", "tiny-example-eagle31", "-k", "0"), None, contains="num-spec-tokens")
    assert_clean_failure(cli("nonsense"), None, contains="no such command")


@pytest.mark.parametrize(
    "args, code",
    [
        (["lint", "/no/such/dir", "--json"], 2),
        (["verify", "x", "--bogus", "--json"], 2),
        (["registry", "show", "no-such-entry", "--json"], 2),
    ],
)
def test_json_errors_are_json_on_stdout_with_the_same_exit_code(cli, args, code):
    r = cli(*args)
    assert r.code == code and r.err == ""
    error = r.json()
    assert set(error) == {"error", "hint", "code", "exit_code"} and error["exit_code"] == code
    assert error["error"] and "\n" not in error["error"]


def test_debug_changes_no_exit_code(cli):
    plain = cli("lint", "/no/such/dir")
    debug = cli("lint", "/no/such/dir", env={"EAGLEZOO_DEBUG": "1"})
    assert plain.code == debug.code == 2
    assert "Traceback" in debug.err and debug.err.rstrip().splitlines()[-1] == plain.err.strip()


def piped(command: str, env=None) -> subprocess.CompletedProcess:
    """Runs `eaglezoo ...` in a shell pipeline with no terminal width set (COLUMNS unset)."""
    environ = {k: v for k, v in {**CLI_ENV, **(env or {})}.items() if k != "COLUMNS"}
    script = f'set -o pipefail; {sys.executable} -m eaglezoo {command}; echo "exit=${{PIPESTATUS[0]}}" >&2'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=environ, cwd=ROOT, timeout=120)


def test_piped_output_keeps_full_ids():
    r = piped("registry list | cat")
    assert "exit=0" in r.stderr
    longest = "lmsys-sglang-eagle3-qwen3-235b-a22b-instruct-2507-specforge-meituan"
    assert longest in r.stdout and "…" not in r.stdout


def test_a_closed_stdout_is_not_an_error():
    for _ in range(3):  # the race between writer and reader differs run to run
        r = piped("registry list | head -1")
        assert "exit=0" in r.stderr and "error" not in r.stderr.lower(), r.stderr


def test_outputs_get_the_users_umask(tmp_path):
    for mask, dir_mode, file_mode in ((0o022, 0o755, 0o644), (0o002, 0o775, 0o664)):
        out = tmp_path / f"out-{mask:o}"
        proc = subprocess.run(
            [sys.executable, "-m", "eaglezoo", "convert", EXAMPLE / "eagle31-safeai", out, *EXAMPLE_IDS],
            env=CLI_ENV,
            cwd=ROOT,
            capture_output=True,
            text=True,
            preexec_fn=lambda m=mask: os.umask(m),
        )
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_mode & 0o777 == dir_mode
        assert {f.stat().st_mode & 0o777 for f in out.iterdir()} == {file_mode}


# ------------------------------------------------------------------------------------------------
# signals and leftovers


@pytest.fixture(scope="module")
def big_source(tmp_path_factory):
    """A 200 MB drafter: converting it takes long enough to be interrupted mid-write."""
    big = make_spec(hidden=1024, target_hidden=1024, vocab=4096, draft_vocab=2048)
    big.layer_config["intermediate_size"] = 4096
    return make_drafter(tmp_path_factory.mktemp("big") / "src", "safeai", spec=big, file="safetensors")


def start_convert(src, out):
    proc = subprocess.Popen(
        [sys.executable, "-m", "eaglezoo", "convert", str(src), str(out), *EXAMPLE_IDS],
        env=CLI_ENV,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not list(out.parent.glob(f".{out.name}.*.eaglezoo-tmp")):
        time.sleep(0.001)
    assert list(out.parent.glob(f".{out.name}.*.eaglezoo-tmp")), "the conversion never started writing"
    return proc


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_signals_clean_up_and_exit_with_their_code(big_source, tmp_path, sig, code):
    out = tmp_path / "out"
    proc = start_convert(big_source, out)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert not out.exists() and os.listdir(tmp_path) == []


def test_a_killed_runs_leftovers_are_removed_by_the_next_run(big_source, tmp_path):
    out = tmp_path / "out"
    proc = start_convert(big_source, out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    leftovers = list(tmp_path.glob(".out.*.eaglezoo-tmp"))
    assert leftovers and not out.exists()
    from eaglezoo.fsutil import HOST

    live = tmp_path / f".other.{HOST}-{os.getpid()}.abcdefgh.eaglezoo-tmp"  # a live process's work is never touched
    live.mkdir()
    remote = tmp_path / ".other.0badc0de-1.abcdefgh.eaglezoo-tmp"  # another host's (shared file system)
    remote.mkdir()
    r = run_cli("convert", EXAMPLE / "eagle31-safeai", tmp_path / "next", *EXAMPLE_IDS)
    assert r.code == 0, r.err
    assert not any(p.exists() for p in leftovers) and live.is_dir() and remote.is_dir()
    assert sorted(os.listdir(tmp_path)) == sorted(["next", live.name, remote.name])


def _refusals_without_a_hint() -> list[str]:
    import ast

    kinds = {"UsageError", "BadInput", "HubError", "EngineError"}
    missing = []
    for path in sorted((ROOT / "eaglezoo").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in kinds
                and len(node.args) < 2
                and not any(k.arg == "hint" for k in node.keywords)
            ):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return missing


def test_every_refusal_in_the_code_names_its_fix():
    """Each raise of eaglezoo's own errors passes a hint (subclasses that supply one are separate names)."""
    assert _refusals_without_a_hint() == []


def _broken_safetensors(tmp_path):
    d = make_drafter(tmp_path / "d", "safeai", spec=make_spec(), file="safetensors")
    weights = d / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:40])
    return d


REFUSALS = {  # one per part of the house: each must say what to do
    "existing OUT": lambda t: ["convert", EXAMPLE / "eagle31-safeai", EXAMPLE, *EXAMPLE_IDS],
    "unknown --to": lambda t: ["convert", EXAMPLE / "eagle31-safeai", t / "o", "--to", "onnx", *EXAMPLE_IDS],
    "unknown --dtype": lambda t: ["convert", EXAMPLE / "eagle31-safeai", t / "o", "--dtype", "int3", *EXAMPLE_IDS],
    "aux ids not numbers": lambda t: ["lint", EXAMPLE / "eagle31-safeai", "--aux-layers", "a,b"],
    "bad --flag": lambda t: ["lint", EXAMPLE / "eagle31-safeai", "--flag", "fc_norm=maybe"],
    "no aux ids": lambda t: ["convert", EXAMPLE / "eagle31-safeai", t / "o"],
    "truncated safetensors": lambda t: ["convert", _broken_safetensors(t), t / "o", *EXAMPLE_IDS],
    "no registry entry": lambda t: ["registry", "show", "no-such-entry"],
    "unknown engine": lambda t: ["verify", "tiny-example-eagle31", "--engine", "gpu"],
    "serve-config engine": lambda t: ["serve-config", "tiny-example-eagle31", "--engine", "triton"],
    "push without config": lambda t: ["push", t, "me/x", "--dry-run"],
    "prompts not JSON": lambda t: [
        "verify",
        "tiny-example-eagle31",
        "--prompts",
        EXAMPLE / "target" / "tokenizer.json",
    ],
}


@pytest.mark.parametrize("case", REFUSALS)
def test_every_refusal_a_user_meets_carries_a_hint(tmp_path, case):
    r = run_inprocess(*REFUSALS[case](tmp_path))
    assert_clean_failure(r)
    assert "(hint: " in r.err, r.err
