"""Help where users look (issue 36, item 6): `-h` as well as `--help` on every command, help that reads at 80
columns with every flag name whole, each command's help leading with one example, and shell completion that
installs and answers."""

from __future__ import annotations

import pytest
import typer
from conftest import run_cli, run_inprocess

from eaglezoo.cli.app import app


def commands(group=None, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """Every command of the CLI, by its words (`registry list`), groups included (typer's own click: duck-typed)."""
    group = group or typer.main.get_command(app)
    found = []
    for name, command in group.commands.items():
        found.append(((*path, name), command))
        if hasattr(command, "commands"):
            found += commands(command, (*path, name))
    return found


LEAVES = [(words, c) for words, c in commands() if not hasattr(c, "commands")]
NARROW = {"COLUMNS": "80"}


def option_names(command) -> list[str]:
    names = [
        n
        for p in command.params
        if p.param_type_name == "option" and not p.hidden  # a hidden alias is kept out of the help on purpose
        for n in (*p.opts, *p.secondary_opts)
    ]
    assert names, command.name
    return names


@pytest.mark.parametrize("words", [(), *[w for w, _ in commands()]], ids=lambda w: " ".join(w) or "eaglezoo")
def test_h_is_help_everywhere(words):
    short, long = run_inprocess(*words, "-h"), run_inprocess(*words, "--help")
    assert short.code == long.code == 0, short.err
    assert "Usage: eaglezoo" in short.out and short.out == long.out


@pytest.mark.parametrize("words,command", LEAVES, ids=[" ".join(w) for w, _ in LEAVES])
def test_help_reads_at_80_columns_with_every_flag_name_whole(words, command):
    r = run_inprocess(*words, "--help", env=NARROW)
    assert r.code == 0, r.err
    assert "…" not in r.out, r.out
    assert all(len(line) <= 80 for line in r.out.splitlines()), r.out
    missing = [name for name in option_names(command) if name not in r.out]
    assert not missing, (missing, r.out)


def test_verify_help_in_a_real_80_column_terminal():
    """The width a shell gives the process (COLUMNS), read as a real run reads it."""
    r = run_cli("verify", "--help", env=NARROW)
    assert r.code == 0, r.err
    assert "…" not in r.out
    for name in (
        "--distributed-executor-backend",
        "--gpu-memory-utilization",
        "--tensor-parallel-size",
        "--enable-expert-parallel",
        "--dequantize-mxfp4",
    ):
        assert name in r.out, r.out
    assert len(r.out.splitlines()) < 130  # was 169 lines, most of them wrapped help


@pytest.mark.parametrize("words,command", LEAVES, ids=[" ".join(w) for w, _ in LEAVES])
def test_each_command_help_leads_with_one_example(words, command):
    paragraphs = [p.strip() for p in (command.help or "").split("\n\n")]
    assert len(paragraphs) >= 2 and "\n" not in paragraphs[0], command.help  # one summary line, then the example
    assert paragraphs[1].startswith(f"Example: eaglezoo {' '.join(words)} "), command.help
    shown = run_inprocess(*words, "-h", env=NARROW).out
    assert shown.index("Example: eaglezoo") < shown.index("╭")  # before every panel of options


def test_completion_installs_and_answers():
    root = run_inprocess("--help").out
    assert "--install-completion" in root and "--show-completion" in root
    script = run_inprocess("--show-completion", "bash")
    assert script.code == 0 and "_EAGLEZOO_COMPLETE=complete_bash" in script.out and "complete " in script.out
    env = {"_EAGLEZOO_COMPLETE": "complete_bash", "COMP_CWORD": "1"}
    assert run_inprocess(env={**env, "COMP_WORDS": "eaglezoo regi"}).out.split() == ["registry"]
    assert run_inprocess(env={**env, "COMP_WORDS": "eaglezoo registry li", "COMP_CWORD": "2"}).out.split() == ["list"]
