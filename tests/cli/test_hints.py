"""Hints lead somewhere: each names an option the command has, and a finding says what to do about it."""

from __future__ import annotations

import json
import shutil

import torch
from conftest import EXAMPLE, assert_clean_failure, run_inprocess
from safetensors.torch import save_file


def unknown_dialect(tmp_path):
    drafter = tmp_path / "drafter"
    shutil.copytree(EXAMPLE / "eagle31-safeai", drafter)
    config = json.loads((drafter / "config.json").read_text())
    config["architectures"] = ["SomethingElse"]
    (drafter / "config.json").write_text(json.dumps(config))
    for f in drafter.glob("*.safetensors"):  # tensor names no dialect knows
        f.unlink()
    save_file({"mystery.weight": torch.zeros(2)}, str(drafter / "model.safetensors"))
    return drafter


def test_an_unknown_dialect_is_named_with_an_option_of_a_command_that_has_it(tmp_path):
    drafter = unknown_dialect(tmp_path)
    for args in (
        ["serve-config", drafter, "--target", EXAMPLE / "target"],
        ["verify", drafter, "--target", EXAMPLE / "target", "--max-prompts", "1"],
    ):
        r = run_inprocess(*args)
        assert_clean_failure(r, contains="unknown dialect")
        assert "--from DIALECT in eaglezoo lint or convert" in r.err, r.err
    r = run_inprocess("lint", drafter)
    assert "--from" in r.out + r.err


def test_a_flag_changed_after_conversion_says_what_to_do(tmp_path):
    out = tmp_path / "eagle31"
    assert run_inprocess("convert", "tiny-example-eagle31", out).code == 0
    config = json.loads((out / "config.json").read_text())
    config["norm_output"] = False
    (out / "config.json").write_text(json.dumps(config))
    r = run_inprocess("lint", out, "--target", EXAMPLE / "target", "--json")
    found = [f for f in r.json()["findings"] if f["code"] == "flags-changed"]
    assert found and "restore the recorded value" in found[0]["hint"], r.out


def test_verify_names_each_lint_warning_it_counts():
    r = run_inprocess("verify", "tiny-example-eagle3", "--max-prompts", "1", "--max-new-tokens", "4")
    line = next(x for x in r.out.splitlines() if x.startswith("lint:"))
    warnings = int(line.split(",")[1].split()[0])
    listed = r.out.split(line, 1)[1].splitlines()[1 : warnings + 1]
    assert warnings >= 1 and len(listed) == warnings and all(x.startswith("  ") for x in listed), r.out
