"""The README's commands run as printed on the shipped example (issue 13: the first hour works).

Every ```bash block is extracted and each command line run in order, from a working folder that
sees the repository's examples/ the way a user in the repository root does. Blocks preceded by a
`<!-- not run: why -->` line are skipped (the two set-up commands, which CI runs itself). `push` and
`pull` go to a local Hub server through HF_ENDPOINT, as they would to the Hub."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from conftest import CLI_ENV, ROOT

BLOCK = re.compile(r"(<!-- not run:[^>]*-->\s*)?```bash\n(.*?)```", re.S)


def readme_commands() -> list[str]:
    commands = []
    for skip, body in BLOCK.findall((ROOT / "README.md").read_text()):
        if skip:
            continue
        commands += [line.split(" #")[0].strip() for line in body.splitlines()
                     if line.strip() and not line.lstrip().startswith("#")]
    return commands


def test_readme_lists_commands_for_every_subcommand():
    used = {shlex.split(c)[1] for c in readme_commands()}
    assert used >= {"registry", "convert", "lint", "verify", "serve-config", "push", "pull"}


def test_every_readme_command_runs_as_printed(hub, tmp_path):
    os.symlink(ROOT / "examples", tmp_path / "examples")
    bindir = Path(sys.executable).parent
    env = {**CLI_ENV, **hub[1], "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    for command in readme_commands():
        assert command.startswith("eaglezoo "), command
        proc = subprocess.run(shlex.split(command), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"


def test_readme_counts_nothing_that_goes_stale():
    text = (ROOT / "README.md").read_text()
    entries = len(list((ROOT / "registry").glob("*.yaml")))
    for n, what in re.findall(r"\b(\d+) (entries|drafters|tests)\b", text):
        assert what != "entries" or int(n) == entries, f"README says {n} {what}; the registry has {entries}"


def test_the_missing_aux_ids_hint_leads_to_a_working_command(tmp_path, cli):
    r = cli("convert", ROOT / "examples" / "tiny" / "eagle31-safeai", tmp_path / "out", "--target",
            ROOT / "examples" / "tiny" / "target")
    assert r.code == 2 and "registry id" in r.err
    assert cli("convert", "tiny-example-eagle31", tmp_path / "out").code == 0
