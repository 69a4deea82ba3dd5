"""The shared readers against hostile files: a number longer than Python reads from text (4,300 digits) in
JSON or YAML, a symlink that loops, a lone surrogate in a prompt, a prompt holding U+2028 (valid JSON Lines),
a registry file whose date cannot be built; and `registry site OUT` / `registry plan --commands --json`.
Each is one line on stderr naming the file, never an internal error, never a partial output."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, ROOT, assert_clean_failure, run_inprocess, tree_digest
from support.factory import make_drafter
from support.registry_entries import GOOD

HUGE = "9" * (sys.get_int_max_str_digits() + 700)  # past the limit, which stays: it guards against slow parsing


def drafter_with_huge_number(tmp_path: Path) -> Path:
    d = make_drafter(tmp_path / "huge")
    text = (d / "config.json").read_text()
    assert '"hidden_size": 64' in text
    (d / "config.json").write_text(text.replace('"hidden_size": 64', f'"hidden_size": {HUGE}', 1))
    return d


def drafter_with_looping_config(tmp_path: Path) -> Path:
    d = make_drafter(tmp_path / "loop")
    (d / "config.json").unlink()
    os.symlink("config.json", d / "config.json")
    return d


def config_only_target(tmp_path: Path) -> Path:
    """A target with its config alone: a prompt file is read before any tokenizer or model, so a refused
    prompt file is said first, and an accepted one gets as far as the tokenizer (which fails, cheaply)."""
    t = tmp_path / "target"
    t.mkdir()
    shutil.copy(EXAMPLE / "target" / "config.json", t)
    return t


def commands_on(d: Path, tmp_path: Path) -> dict[str, list]:
    return {
        "lint": ["lint", d],
        "convert": ["convert", d, tmp_path / "out", "--to", "eagle31"],
        "serve-config": ["serve-config", d, "--target", "org/target"],
        "push": ["push", d, "org/name", "--dry-run"],
        "compare": ["compare", d, EXAMPLE / "eagle3-safeai", "--target", EXAMPLE / "target"],
    }


# --------------------------------------------------------------------------------------------
# 1. numbers with too many digits


@pytest.mark.parametrize("command", ["lint", "convert", "serve-config", "push", "compare"])
def test_a_config_number_with_too_many_digits_is_one_line_naming_the_file(tmp_path, command):
    d = drafter_with_huge_number(tmp_path)
    before = tree_digest(d)
    r = run_inprocess(*commands_on(d, tmp_path)[command])
    assert_clean_failure(r, tmp_path / "out", contains="holds a number with too many digits")
    assert str(d / "config.json") in r.err and "internal error" not in r.err
    assert tree_digest(d) == before


def test_convert_json_says_too_many_digits_as_json(tmp_path):
    d = drafter_with_huge_number(tmp_path)
    r = run_inprocess("convert", d, tmp_path / "out", "--to", "eagle31", "--json")
    assert r.code == 2 and r.json()["code"] == "bad-input", (r.out, r.err)
    assert "too many digits" in r.json()["error"] and str(d / "config.json") in r.json()["error"]
    assert not (tmp_path / "out").exists()


def test_a_report_number_with_too_many_digits_is_one_line(tmp_path):
    report = tmp_path / "report.json"
    report.write_text(f'{{"num_spec_tokens": {HUGE}}}\n')
    html = tmp_path / "report.html"
    assert_clean_failure(run_inprocess("report", report, "--html", html), html, contains="too many digits")
    assert_clean_failure(
        run_inprocess("push", make_drafter(tmp_path / "d"), "org/name", "--dry-run", "--report", report),
        contains=f"{report} holds a number with too many digits",
    )
    reg = tmp_path / "registry"
    reg.mkdir()
    (reg / "good.yaml").write_text(GOOD)
    assert_clean_failure(
        run_inprocess("registry", "record", report, "--registry", reg),
        contains=f"{report} holds a number with too many digits",
    )


def test_a_prompt_number_with_too_many_digits_is_refused_by_line_before_any_model(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(f'{{"prompt": "fine"}}\n{{"prompt": "x", "context": {HUGE}}}\n')
    r = run_inprocess(
        "verify",
        EXAMPLE / "eagle3-safeai",
        "--target",
        config_only_target(tmp_path),
        "--prompts",
        prompts,
        *EXAMPLE_IDS,
    )
    assert_clean_failure(r, contains=f"{prompts}: line 2 holds a number with too many digits")


# --------------------------------------------------------------------------------------------
# 2. symlink loops


@pytest.mark.parametrize("command", ["lint", "convert", "serve-config"])
def test_a_config_linked_to_itself_is_one_line(tmp_path, command):
    d = drafter_with_looping_config(tmp_path)
    r = run_inprocess(*commands_on(d, tmp_path)[command])
    assert_clean_failure(r, tmp_path / "out", contains="symlink loop")
    assert "config.json" in r.err


def test_push_dry_run_refuses_a_self_linked_file_by_name(tmp_path):
    d = make_drafter(tmp_path / "d")
    os.symlink("self.bin", d / "self.bin")
    r = run_inprocess("push", d, "org/name", "--dry-run")
    assert_clean_failure(r, contains="self.bin: a symlink loop")
    assert "--exclude self.bin" in r.err


# --------------------------------------------------------------------------------------------
# 3 and 4. the prompt reader: lone surrogates; U+2028 and U+0085 inside a JSON string


@pytest.mark.parametrize(
    "row,field",
    [
        ({"prompt": "x\ud800y"}, "'prompt'"),
        ({"prompt": "ok", "chat": True, "system": "be \udc00 brief"}, "'system'"),
        ({"prompt": "ok", "chat": True, "history": ["first", "second \ud83d"]}, "'history[1]'"),
        ({"prompt": "ok", "bucket": "b\udfff"}, "'bucket'"),
    ],
    ids=["prompt", "system", "history", "bucket"],
)
@pytest.mark.parametrize("command", ["verify", "compare"])
def test_a_lone_surrogate_is_refused_by_file_line_and_field_before_any_model(tmp_path, command, row, field):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "fine"}\n' + json.dumps(row) + "\n")  # json.dumps writes \\udXXX escapes
    assert "\\ud" in prompts.read_text()
    target = config_only_target(tmp_path)
    args = (
        [EXAMPLE / "eagle3-safeai", "--target", target, *EXAMPLE_IDS]
        if command == "verify"
        else [EXAMPLE / "eagle3-safeai", EXAMPLE / "eagle31-safeai", "--target", target]
    )
    r = run_inprocess(command, *args, "--prompts", prompts)
    assert_clean_failure(r, contains=f"{prompts}: line 2: {field} holds a lone surrogate")
    assert "TypeError" not in r.err


def test_u2028_and_u0085_inside_a_prompt_do_not_split_its_line(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    # Line 1 holds U+2028 and U+0085 raw inside a string (valid JSON); CRLF endings; line 2 is refused, by number.
    prompts.write_bytes('{"prompt": "a\u2028b\u0085c"}\r\n{"prompt": "x\\ud800"}\r\n'.encode())
    target = config_only_target(tmp_path)
    r = run_inprocess("verify", EXAMPLE / "eagle3-safeai", "--target", target, "--prompts", prompts, *EXAMPLE_IDS)
    assert_clean_failure(r, contains=f"{prompts}: line 2: 'prompt' holds a lone surrogate")
    prompts.write_bytes('{"prompt": "a\u2028b\u0085c"}\r\n{"prompt": "two"}\r\n'.encode())
    r = run_inprocess("verify", EXAMPLE / "eagle3-safeai", "--target", target, "--prompts", prompts, *EXAMPLE_IDS)
    assert_clean_failure(r, contains="tokenizer could not be loaded")  # the prompt file was read whole


# --------------------------------------------------------------------------------------------
# 5 (and 1, 2 in YAML). one bad registry file is that file's problem; the others still load


def bad_registry(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A valid entry beside three that cannot load: a date PyYAML cannot build, an integer past the limit,
    a file linked to itself. Each is named by file (and line) where it is said."""
    reg = tmp_path / "registry"
    reg.mkdir()
    (reg / "good.yaml").write_text(GOOD)
    (reg / "date.yaml").write_text(
        GOOD.replace("id: good", "id: date") + "status:\n  state: unverified\n  date: 2026-13-45\n"
    )
    (reg / "digits.yaml").write_text(GOOD.replace("id: good", "id: digits") + f"notes: [{HUGE}]\n")
    os.symlink("loop.yaml", reg / "loop.yaml")
    return reg, {
        "date": "date.yaml:9: '2026-13-45' is not a valid date",
        "digits": "digits.yaml:7: the number '999",
        "loop": "loop.yaml is a symlink loop",
    }


def test_unreadable_registry_files_leave_the_others_working(tmp_path):
    reg, where = bad_registry(tmp_path)
    env = {"EAGLEZOO_REGISTRY": str(reg)}
    listed = run_inprocess("registry", "list", "--json", env=env)
    shipped = {p.stem for p in (ROOT / "registry").glob("*.yaml")}  # the user's registry lies over the shipped one
    ids = [e["id"] for e in listed.json()] if listed.code == 0 else None
    assert ids is not None and [i for i in ids if i not in shipped] == ["good"], (listed.out, listed.err)
    assert all(w in listed.err for w in where.values()) and "internal error" not in listed.err, listed.err
    shown = run_inprocess("registry", "show", "good", "--json", env=env)
    assert shown.code == 0 and shown.json()["id"] == "good", shown.err
    checked = run_inprocess("registry", "check", "--json", env=env)
    assert checked.code == 1, (checked.out, checked.err)
    for name, w in where.items():
        assert any(w in p for p in checked.json()["entries"][name]["problems"]), checked.out
    planned = run_inprocess("registry", "plan", "--json", env=env)
    assert planned.code == 0 and "good" in planned.json()["unplanned"], planned.err
    assert all(w in planned.err for w in where.values()), planned.err
    site = run_inprocess("registry", "site", tmp_path / "site", env=env)
    assert site.code == 0 and (tmp_path / "site" / "entries" / "good.html").is_file(), site.err
    assert all(w in site.err for w in where.values()), site.err
    for name, w in where.items():
        assert_clean_failure(run_inprocess("registry", "show", name, env=env), contains=w)


# --------------------------------------------------------------------------------------------
# 6. registry site OUT: as convert's OUT


@pytest.fixture
def registry_dir(tmp_path) -> Path:
    reg = tmp_path / "zoo" / "registry"
    reg.mkdir(parents=True)
    (reg / "good.yaml").write_text(GOOD)
    return reg


def test_site_refuses_an_existing_out_unless_force_which_replaces_it_whole(tmp_path, registry_dir):
    out = tmp_path / "site"
    out.mkdir()
    (out / "keep").write_text("mine")
    r = run_inprocess("registry", "site", out, "--registry", registry_dir)
    assert_clean_failure(r, contains="already exists")
    assert "--force" in r.err and sorted(os.listdir(out)) == ["keep"]
    r = run_inprocess("registry", "site", out, "--registry", registry_dir, "--force")
    assert r.code == 0, r.err
    assert sorted(os.listdir(out)) == ["entries", "index.html"]  # replaced, not mixed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "zoo"]  # no temporary left beside it


@pytest.mark.parametrize("where", ["registry", "inside", "parent"])
@pytest.mark.parametrize("force", [False, True])
def test_site_never_writes_into_the_registry(tmp_path, registry_dir, where, force):
    out = {"registry": registry_dir, "inside": registry_dir / "site", "parent": registry_dir.parent}[where]
    before = tree_digest(registry_dir.parent)
    r = run_inprocess("registry", "site", out, "--registry", registry_dir, *(["--force"] if force else []))
    assert_clean_failure(r, contains="overlaps the registry")
    assert "hint:" in r.err and tree_digest(registry_dir.parent) == before


@pytest.mark.parametrize("where", ["examples", "drafter", "target"])
def test_site_never_replaces_what_an_entry_names(tmp_path, where):
    shutil.copytree(EXAMPLE, tmp_path / "examples" / "tiny")
    (tmp_path / "registry").mkdir()
    shutil.copy(ROOT / "registry" / "tiny-example-eagle31.yaml", tmp_path / "registry")
    out = {
        "examples": tmp_path / "examples",
        "drafter": tmp_path / "examples" / "tiny" / "eagle31-safeai",
        "target": tmp_path / "examples" / "tiny" / "target",
    }[where]
    before = tree_digest(tmp_path)
    r = run_inprocess("registry", "site", out, "--force", "--registry", tmp_path / "registry")
    assert_clean_failure(r, contains=f"OUT {out} overlaps entry tiny-example-eagle31's")
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize("force", [False, True])
def test_site_out_that_is_a_file_is_one_line_with_a_hint(tmp_path, registry_dir, force):
    out = tmp_path / "file"
    out.write_text("mine")
    r = run_inprocess("registry", "site", out, "--registry", registry_dir, *(["--force"] if force else []))
    assert_clean_failure(r, contains=str(out))
    assert "hint:" in r.err and out.read_text() == "mine"
    r = run_inprocess("registry", "site", out / "site", "--registry", registry_dir)
    assert_clean_failure(r, contains="is not a directory")
    assert "hint:" in r.err and out.read_text() == "mine"


# --------------------------------------------------------------------------------------------
# 7. registry plan --commands --json


def test_plan_commands_with_json_prints_json_listing_the_commands():
    plain = run_inprocess("registry", "plan", "--commands")
    assert plain.code == 0 and plain.out.strip(), plain.err
    r = run_inprocess("registry", "plan", "--commands", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    assert plan["commands"] == plain.out.splitlines()
    runnable = [c for c in plan["classes"] if c["runner"] in plan["runners"]]  # waiting-on-sync jobs wait
    assert plan["commands"] == [j["command"] for c in runnable for j in c["jobs"]]
    assert run_inprocess("registry", "plan", "--json").json() == plan  # --commands changes nothing under --json
