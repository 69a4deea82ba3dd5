"""The built wheel, installed into a fresh virtual environment, run from a folder outside the repository: the
registry comes with it, and the main job (convert, lint, verify) works on a drafter it is handed.

Isolation: the fresh venv is made from the base interpreter without the system's packages; the project's
dependencies are reached through a `.pth` line naming this venv's site-packages, a line that puts that folder
on sys.path without running its own .pth files, so the editable install's finder (which maps `eaglezoo` to this
checkout) never loads (run it without PYTHONPATH: the wheel is built from this checkout anyway). The wheel is
installed into the fresh venv itself, the CLI runs with the cwd outside the repository, no PYTHONPATH, no
EAGLEZOO_REGISTRY, and an empty EAGLEZOO_CACHE: if the wheel did not carry the registry, `registry list` would
find none."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, ROOT

PUBLISHED = "redhatai-llama-3.1-8b-instruct-speculator.eagle3"  # a Hub entry: serve-config needs no network
BUILD_S, INSTALL_S, COMMAND_S = 120, 120, 120


def _run(args, timeout, cwd, env=None, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(a) for a in args], check=False, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )
    if check:
        assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict, Path]:
    """(the fresh venv's eaglezoo, its environment, a working folder outside the repository)."""
    work = tmp_path_factory.mktemp("wheel")
    if work.resolve().is_relative_to(ROOT.resolve()):
        pytest.skip("the temporary folder is inside the repository: the test must run outside it")
    dist, venv = work / "dist", work / "venv"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "--wheel-dir",
            dist,
            ROOT,
        ],
        BUILD_S,
        cwd=work,
    )
    wheel = next(dist.glob("eaglezoo-*.whl"))
    base_python = Path(sys._base_executable)  # the interpreter this venv was made from
    _run([base_python, "-m", "venv", "--without-pip", venv], INSTALL_S, cwd=work)
    python = venv / "bin" / "python"
    fresh_site = Path(
        _run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], COMMAND_S, cwd=work
        ).stdout.strip()
    )
    (fresh_site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel],
        INSTALL_S,
        cwd=work,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EAGLEZOO_", "PYTHON", "HF_", "VIRTUAL_ENV"))}
    env |= {
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(work / "hf-home"),
        "EAGLEZOO_CACHE": str(work / "cache"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "OMP_NUM_THREADS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    where = _run([python, "-c", "import eaglezoo; print(eaglezoo.__file__)"], COMMAND_S, cwd=work, env=env).stdout
    assert Path(where.strip()).resolve().is_relative_to(fresh_site.resolve()), where  # the wheel's, not the checkout's
    return venv / "bin" / "eaglezoo", env, work


def eaglezoo(installed, *args, check=True) -> subprocess.CompletedProcess:
    exe, env, work = installed
    return _run([exe, *args], COMMAND_S, cwd=work, env=env, check=check)


def test_version_names_the_shipped_registry(installed):
    from eaglezoo import __version__

    out = eaglezoo(installed, "--version").stdout
    assert f"eaglezoo {__version__}" in out and "registry: shipped with this package" in out, out


def test_the_registry_ships_in_the_wheel(installed):
    listed = json.loads(eaglezoo(installed, "registry", "list", "--json").stdout)
    shipped = sorted(p.stem for p in (ROOT / "registry").glob("*.yaml"))
    assert sorted(e["id"] for e in listed) == shipped
    shown = json.loads(eaglezoo(installed, "registry", "show", PUBLISHED, "--json").stdout)
    assert shown["id"] == PUBLISHED and shown["drafter"]["repo"]
    served = eaglezoo(installed, "serve-config", PUBLISHED, "--engine", "vllm").stdout
    assert "vllm serve" in served and "--speculative-config" in served


def test_the_wheel_ships_every_embedded_example(installed):
    """examples/tiny as it is in the checkout, every folder and file byte for byte (the llama.cpp examples
    eagle3-llamacpp/ and dflash-llamacpp/ among them): setup.py copies the whole tree."""
    exe, env, work = installed
    here = _run([exe.parent / "python", "-c", "import eaglezoo; print(eaglezoo.__file__)"], COMMAND_S, work, env)
    shipped = Path(here.stdout.strip()).parent / "zoo" / "examples" / "tiny"

    def digests(root: Path) -> dict[str, str]:
        files = (p for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts)
        return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}

    assert digests(shipped) == digests(EXAMPLE)
    folders = {p.name for p in EXAMPLE.iterdir() if p.is_dir()}
    assert {"target", "eagle3-safeai", "eagle3-llamacpp", "dflash-llamacpp"} <= folders, folders


def test_registry_check_passes_where_entries_name_repository_only_folders(installed):
    """The embedded examples' entries name examples/, which the wheel carries only in part (examples/tiny): not a
    problem there."""
    checked = json.loads(eaglezoo(installed, "registry", "check", "--json", check=False).stdout)
    examples = [i for i in checked["entries"] if i.startswith("tiny-example")]
    assert examples and all(not checked["entries"][i]["problems"] for i in examples), checked["entries"]


def test_convert_lint_and_verify_a_drafter_it_is_handed(installed):
    _, _, work = installed
    shutil.copytree(EXAMPLE, work / "tiny", ignore=shutil.ignore_patterns("eagle31-safeai"))
    tiny = work / "tiny"
    eaglezoo(
        installed, "convert", tiny / "eagle3-safeai", work / "converted", "--target", tiny / "target", *EXAMPLE_IDS
    )
    linted = json.loads(eaglezoo(installed, "lint", work / "converted", "--json").stdout)
    assert not [f for f in linted["findings"] if f["severity"] == "error"], linted
    report = json.loads(
        eaglezoo(
            installed,
            "verify",
            work / "converted",
            "--target",
            tiny / "target",
            "--prompts",
            tiny / "prompts.jsonl",
            "--max-prompts",
            "2",
            "--max-new-tokens",
            "16",
            "--device",
            "cpu",
            "--json",
        ).stdout
    )
    assert report["engine"] and report["mean_acceptance_length"] >= 1.0


def quick_start() -> list[list[str]]:
    """The README's Quick start commands, as printed (its first ```bash block)."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)[1]
    return [
        shlex.split(line)
        for line in block.replace("\\\n", " ").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_the_readme_quick_start_runs_as_printed(installed):
    """A pip user has the package and no repository (issue 46): the Quick start runs in a folder outside it, every
    command as the README prints it, and writes only there."""
    _, _, work = installed
    folder = work / "quick-start"
    folder.mkdir()
    commands = quick_start()
    assert len(commands) >= 4 and all(c[0] == "eaglezoo" for c in commands), commands
    exe, env, _ = installed
    for argv in commands:
        _run([exe, *argv[1:]], COMMAND_S, cwd=folder, env=env)
    assert (folder / "out" / "verify.html").is_file()
