"""An output never destroys an input, a dry run refuses what the real run refuses, and what a command
prints from files and paths reaches the terminal without its control characters (found by an outside
probe, 2026-11-27). Each refusal comes before any model is read."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, ROOT, assert_clean_failure, run_inprocess, tree_digest

REPORT = ROOT / "registry" / "reports" / "tiny-example-eagle31.k3.t0.native.json"


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "command, output",
    [
        (["verify", "tiny-example-eagle31"], "--report"),
        (["verify", "tiny-example-eagle31"], "--html"),
        (["compare", "tiny-example-eagle3", "tiny-example-eagle31"], "--report"),
        (["compare", "tiny-example-eagle3", "tiny-example-eagle31"], "--html"),
    ],
)
def test_a_report_or_page_never_overwrites_the_prompts_it_reads(tmp_path, command, output):
    prompts = tmp_path / "prompts.jsonl"
    shutil.copy(EXAMPLE / "prompts.jsonl", prompts)
    before = digest(prompts)
    r = run_inprocess(*command, "--prompts", prompts, output, prompts)
    assert_clean_failure(r, contains=f"{output} {prompts} is a file this command reads")
    assert f"(hint: give {output} another file name)" in r.err
    assert digest(prompts) == before


@pytest.fixture
def pair(tmp_path):
    """A copy of the example's EAGLE 3.1 drafter and of its target, each a folder a run reads."""
    drafter, target = tmp_path / "drafter", tmp_path / "target"
    shutil.copytree(EXAMPLE / "eagle31-safeai", drafter)
    shutil.copytree(EXAMPLE / "target", target)
    return drafter, target


@pytest.mark.parametrize("command", ["verify", "compare"])
@pytest.mark.parametrize(
    "where, name",
    [("drafter", "config.json"), ("drafter", "new.json"), ("target", "tokenizer.json"), ("target", "page.html")],
)
def test_no_output_lands_in_the_drafter_or_the_targets_folder(pair, command, where, name):
    drafter, target = pair
    before = {folder: tree_digest(folder) for folder in pair}
    output = (drafter if where == "drafter" else target) / name
    option = "--html" if name.endswith(".html") else "--report"
    drafters = [drafter] if command == "verify" else [EXAMPLE / "eagle3-safeai", drafter]  # B's folder: before A runs
    r = run_inprocess(
        command,
        *drafters,
        "--target",
        target,
        *(EXAMPLE_IDS if command == "verify" else []),
        "--max-prompts",
        "1",
        "--max-new-tokens",
        "2",
        option,
        output,
    )
    assert_clean_failure(r, contains=f"{option} {output} is inside")
    assert f"(hint: give {option} a file outside" in r.err
    assert {folder: tree_digest(folder) for folder in pair} == before


def test_no_output_lands_on_a_registry_entrys_prompts_or_in_its_registry(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "examples" / "tiny")
    (tmp_path / "registry").mkdir()
    shutil.copy(ROOT / "registry" / "tiny-example-eagle31.yaml", tmp_path / "registry")
    before = tree_digest(tmp_path)
    prompts, entry = (
        tmp_path / "examples" / "tiny" / "prompts.jsonl",
        tmp_path / "registry" / "tiny-example-eagle31.yaml",
    )
    for output, says in [(prompts, "is a file this command reads"), (entry, "is inside")]:
        r = run_inprocess(
            "verify",
            "tiny-example-eagle31",
            "--registry",
            tmp_path / "registry",
            "--max-prompts",
            "1",
            "--max-new-tokens",
            "2",
            "--report",
            output,
        )
        assert_clean_failure(r, contains=f"--report {output} {says}")
    assert tree_digest(tmp_path) == before


def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run_inprocess("report", REPORT, "--html", fifo)
    assert_clean_failure(r, contains=f"--html {fifo} exists and is not a regular file")
    r = run_inprocess("verify", "tiny-example-eagle31", "--report", fifo)
    assert_clean_failure(r, contains=f"--report {fifo} exists and is not a regular file")
    assert fifo.is_fifo()


def test_the_report_and_its_page_must_be_two_files(tmp_path):
    same = tmp_path / "run.json"
    r = run_inprocess("verify", "tiny-example-eagle31", "--report", same, "--html", same)
    assert_clean_failure(r, contains="--report and --html both name")
    assert not same.exists()


def test_a_page_never_replaces_the_report_it_renders(tmp_path):
    saved = tmp_path / "report.json"
    shutil.copy(REPORT, saved)
    before = digest(saved)
    r = run_inprocess("report", saved, "--html", saved)
    assert_clean_failure(r, contains="--html")
    assert digest(saved) == before


def test_a_dry_run_refuses_an_out_the_real_run_would_refuse(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("mine")
    r = run_inprocess("convert", "tiny-example-eagle31", out, "--dry-run")
    assert_clean_failure(r, contains="already exists")
    assert "--force" in r.err
    r = run_inprocess("convert", "tiny-example-eagle31", out, "--dry-run", "--force")
    assert r.code == 0 and "dry run: nothing written" in r.out
    assert [p.name for p in out.iterdir()] == ["keep"]


def test_parser_errors_name_the_help_that_fixes_them():
    r = run_inprocess("verify", "tiny-example-eagle31", "--bogus")
    assert_clean_failure(r, contains="No such option: --bogus")
    assert r.err.strip().endswith("(hint: see eaglezoo verify --help)")
    r = run_inprocess("registry", "nope", "--json")
    assert r.code == 2 and r.json()["hint"] == "see eaglezoo registry --help"


def test_control_characters_in_a_path_never_reach_the_terminal(tmp_path):
    out = tmp_path / "out\x1b[31mred\x07"
    r = run_inprocess("convert", "tiny-example-eagle31", out)
    assert r.code == 0, r.err
    assert "\x1b" not in r.out and "\x07" not in r.out
    assert "wrote " in r.out and "red" in r.out
    assert (out / "config.json").is_file()
