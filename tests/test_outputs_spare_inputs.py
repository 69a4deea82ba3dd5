"""An output never destroys an input, a dry run refuses what the real run refuses, and what a command
prints from files and paths reaches the terminal without its control characters (found by an outside
probe, 2026-11-27). Each refusal comes before any model is read."""

from __future__ import annotations

import hashlib
import shutil

import pytest
from conftest import EXAMPLE, ROOT, assert_clean_failure, run_cli

REPORT = ROOT / "registry" / "reports" / "tiny-example-eagle31.k3.t0.native.json"


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command, output", [
    (["verify", "tiny-example-eagle31"], "--report"),
    (["verify", "tiny-example-eagle31"], "--html"),
    (["compare", "tiny-example-eagle3", "tiny-example-eagle31"], "--report"),
    (["compare", "tiny-example-eagle3", "tiny-example-eagle31"], "--html"),
])
def test_a_report_or_page_never_overwrites_the_prompts_it_reads(tmp_path, command, output):
    prompts = tmp_path / "prompts.jsonl"
    shutil.copy(EXAMPLE / "prompts.jsonl", prompts)
    before = digest(prompts)
    r = run_cli(*command, "--prompts", prompts, output, prompts)
    assert_clean_failure(r, contains=f"{output} {prompts} is a file this command reads")
    assert f"(hint: give {output} another file name)" in r.err
    assert digest(prompts) == before


def test_the_report_and_its_page_must_be_two_files(tmp_path):
    same = tmp_path / "run.json"
    r = run_cli("verify", "tiny-example-eagle31", "--report", same, "--html", same)
    assert_clean_failure(r, contains="--report and --html both name")
    assert not same.exists()


def test_a_page_never_replaces_the_report_it_renders(tmp_path):
    saved = tmp_path / "report.json"
    shutil.copy(REPORT, saved)
    before = digest(saved)
    r = run_cli("report", saved, "--html", saved)
    assert_clean_failure(r, contains="--html")
    assert digest(saved) == before


def test_a_dry_run_refuses_an_out_the_real_run_would_refuse(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("mine")
    r = run_cli("convert", "tiny-example-eagle31", out, "--dry-run")
    assert_clean_failure(r, contains="already exists")
    assert "--force" in r.err
    r = run_cli("convert", "tiny-example-eagle31", out, "--dry-run", "--force")
    assert r.code == 0 and "dry run: nothing written" in r.out
    assert [p.name for p in out.iterdir()] == ["keep"]


def test_parser_errors_name_the_help_that_fixes_them():
    r = run_cli("verify", "tiny-example-eagle31", "--bogus")
    assert_clean_failure(r, contains="No such option: --bogus")
    assert r.err.strip().endswith("(hint: see eaglezoo verify --help)")
    r = run_cli("registry", "nope", "--json")
    assert r.code == 2 and r.json()["hint"] == "see eaglezoo registry --help"


def test_control_characters_in_a_path_never_reach_the_terminal(tmp_path):
    out = tmp_path / "out\x1b[31mred\x07"
    r = run_cli("convert", "tiny-example-eagle31", out)
    assert r.code == 0, r.err
    assert "\x1b" not in r.out and "\x07" not in r.out
    assert "wrote " in r.out and "red" in r.out
    assert (out / "config.json").is_file()
