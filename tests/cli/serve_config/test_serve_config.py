"""serve-config's inputs: local paths usable from where it runs, --target checked, the aux ids the engine captures."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import CLI_ENV, EXAMPLE, ROOT, assert_clean_failure, run_inprocess

DRAFTER = EXAMPLE / "eagle31-safeai"
ENTRY = "tiny-example-eagle31"


def served_paths(sc: dict) -> tuple[str, str, str]:
    """The target and drafter as the printed command names them: (target, --speculative-config model, drafter)."""
    words = shlex.split(sc["command"])
    return (
        words[words.index("serve") + 1],
        json.loads(words[words.index("--speculative-config") + 1])["model"],
        sc["drafter"],
    )


def moved_registry(tmp_path: Path) -> Path:
    """The example entry in a registry of its own whose root is not this repository (nor the cwd of the CLI)."""
    root = tmp_path / "elsewhere"
    for name in ("target", "eagle31-safeai"):
        (root / "models" / name).mkdir(parents=True)
        shutil.copy(EXAMPLE / name / "config.json", root / "models" / name / "config.json")
    data = yaml.safe_load((ROOT / "registry" / f"{ENTRY}.yaml").read_text())
    data["drafter"]["path"], data["target"]["path"] = "models/eagle31-safeai", "models/target"
    (root / "registry").mkdir()
    (root / "registry" / f"{ENTRY}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return root


@pytest.mark.parametrize("named_by", ["id", "entry file"])
def test_an_entrys_local_paths_are_printed_usable_from_the_current_directory(tmp_path, named_by):
    root = moved_registry(tmp_path)
    name = ENTRY if named_by == "id" else root / "registry" / f"{ENTRY}.yaml"
    r = run_inprocess("serve-config", name, "--registry", root / "registry", "--json")
    assert r.code == 0, r.err
    target, model, drafter = served_paths(r.json())
    assert Path(target).resolve() == (root / "models" / "target").resolve(), target
    # the converted folder, in the current directory (run_inprocess's cwd is ROOT), named whole
    assert model == drafter == str(ROOT / f"{ENTRY}-eagle31") and target == r.json()["target"]
    assert r.json()["convert_command"] == shlex.join(
        ["eaglezoo", "convert", str(name), drafter, "--registry", str(root / "registry")]
    )


def test_local_paths_are_printed_whole_and_repo_ids_stay_repo_ids():
    """Whole, even below the current directory: the server reports the path it was given, and doctor, run from
    another folder, must find it (issue 46)."""
    sc = run_inprocess("serve-config", ENTRY, "--json").json()
    converted = str(ROOT / f"{ENTRY}-eagle31")
    assert served_paths(sc) == (str(ROOT / "examples" / "tiny" / "target"), converted, converted)
    sc = run_inprocess("serve-config", DRAFTER, "--target", "org/target", "--json").json()
    assert served_paths(sc)[0] == "org/target"


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("drafter", [DRAFTER, ENTRY], ids=["folder", "registry"])
@pytest.mark.parametrize("target", ["", "nonexist", "fifo", "ünï/cødé", "file", "org/a/b"])
def test_a_target_that_is_neither_a_folder_nor_a_hub_repo_id_is_refused(tmp_path, drafter, target):
    if target == "fifo":
        target = fifo(tmp_path)
    elif target == "file":
        target = EXAMPLE / "target" / "config.json"
    assert_clean_failure(run_inprocess("serve-config", drafter, "--target", target), contains="--target")


@pytest.mark.parametrize("drafter", [DRAFTER, ENTRY], ids=["folder", "registry"])
def test_a_target_whose_hidden_size_differs_from_the_drafters_is_refused_as_verify_refuses_it(tmp_path, drafter):
    target = tmp_path / "wide-target"
    target.mkdir()
    cfg = json.loads((EXAMPLE / "target" / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**cfg, "hidden_size": 256}))
    assert_clean_failure(
        run_inprocess("serve-config", drafter, "--target", target), contains="target hidden_size is 256"
    )
    assert run_inprocess("serve-config", drafter, "--target", EXAMPLE / "target").code == 0


def aux_comment(r) -> str:
    assert r.code == 0, r.err
    return next(line for line in r.out.splitlines() if line.startswith("# aux layers"))


def test_a_folder_without_ids_states_the_engines_default_for_a_known_target_and_unknown_otherwise():
    args = ("serve-config", EXAMPLE / "eagle3-safeai", "--target")
    sc = run_inprocess(*args, EXAMPLE / "target", "--json").json()
    assert sc["aux_layers_captured"] == [2, 2, 1] and sc["aux_layers_default"]  # (2, L//2, L-3) for L = 4
    line = aux_comment(run_inprocess(*args, EXAMPLE / "target"))
    assert "[2, 2, 1]" in line and "default" in line and "4-layer" in line, line
    line = aux_comment(run_inprocess(*args, "org/target"))
    assert "None" not in line and "unknown" in line and "default" in line, line


@pytest.mark.parametrize("engine,default,trained", [("vllm", [2, 2, 1], [2, 3, 4]), ("sglang", [1, 1, 0], [1, 2, 3])])
def test_an_unconverted_entry_is_served_by_the_whole_path_convert_first(engine, default, trained):
    """What the engine would capture from the folder as given is said, and the path converts it first: the
    converted folder is what the command serves, and it carries the ids the drafter was trained with."""
    sc = run_inprocess("serve-config", ENTRY, "--engine", engine, "--json").json()
    assert sc["unconverted_capture"] == default and sc["aux_layers_captured"] == trained, sc
    assert not sc["aux_layers_default"] and sc["steps"] == [sc["convert_command"], sc["command"]]
    r = run_inprocess("serve-config", ENTRY, "--engine", engine)
    warned = [line for line in r.out.splitlines() if line.startswith("# warning: ")]  # the warnings come first
    assert r.out.startswith(warned[0]) and any(str(default) in w and "converts it first" in w for w in warned)
    lines = r.out.splitlines()[len(warned) :]
    assert lines[0] == "# 1. convert (the warning above says why)", lines
    assert lines[1] == f"eaglezoo convert {ENTRY} {ROOT / ENTRY}-eagle31"
    assert lines[2] == "# 2. serve the converted folder"
    assert aux_comment(r).endswith(str(trained))


def test_the_printed_path_runs_as_printed_and_serves_the_trained_ids(tmp_path):
    """Run from a folder of one's own: the convert command as printed, then serve-config of what it wrote
    needs no conversion, and its command is the one the path printed."""

    def here(*args):
        proc = subprocess.run(
            [sys.executable, "-m", "eaglezoo", *map(str, args)],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
            env=CLI_ENV,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    sc = json.loads(here("serve-config", ENTRY, "--json"))
    words = shlex.split(sc["convert_command"])
    assert words[:2] == ["eaglezoo", "convert"]
    here(*words[1:])
    again = json.loads(here("serve-config", sc["drafter"], "--target", sc["target"], "--json"))
    assert again["convert_command"] is None and again["aux_layers_captured"] == [2, 3, 4]
    assert again["command"] == sc["command"]
    assert "--per-request-spec-decode-metrics detailed" in sc["diagnose_command"]  # the command to diagnose with
    assert "VLLM_SERVER_DEV_MODE=1" in sc["diagnose_command"] and "VLLM_SERVER_DEV_MODE" not in sc["command"]


def test_a_converted_folder_states_its_own_ids(tmp_path):
    out = tmp_path / "eagle31"
    assert run_inprocess("convert", ENTRY, out).code == 0
    r = run_inprocess("serve-config", out, "--target", EXAMPLE / "target", "--json")
    assert r.json()["aux_layers_captured"] == [2, 3, 4] and not r.json()["aux_layers_default"], r.out
    line = aux_comment(run_inprocess("serve-config", out, "--target", EXAMPLE / "target"))
    assert line.endswith(": [2, 3, 4]"), line
