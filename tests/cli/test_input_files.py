"""Inputs that must never hang, and valid layouts that must work: FIFOs and other non-regular files
are refused by name before they are opened; an index cannot name a shard outside its folder; options, settings,
prompt files, reports and destinations out of range are one line each. (A sharded drafter in the Hub cache's
snapshot layout: tests/hub/test_hub_inputs.py.)"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, ROOT, assert_clean_failure, run_cli, run_inprocess, tree_digest
from support.factory import make_drafter, make_spec

TIMEOUT = 60  # a hang fails the test instead of stalling the suite


def drafter_with_fifo(tmp_path: Path, name: str) -> Path:
    d = tmp_path / "drafter"
    shutil.copytree(EXAMPLE / "eagle3-safeai", d)
    if name != "config.json":
        for weights in d.glob("pytorch_model.bin"):
            weights.unlink()
    (d / name).unlink(missing_ok=True)
    os.mkfifo(d / name)
    return d


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "model.safetensors.index.json"])
@pytest.mark.parametrize("command", ["lint", "convert"])
def test_a_fifo_is_refused_by_name_not_read(tmp_path, command, name):
    d = drafter_with_fifo(tmp_path, name)
    before = tree_digest(d)
    out = tmp_path / "out"
    args = [d, out, "--target", EXAMPLE / "target"] if command == "convert" else [d]
    r = run_cli(command, *args, timeout=TIMEOUT)
    assert_clean_failure(r, out if command == "convert" else None, contains="is a FIFO, not a regular file")
    assert name in r.err and tree_digest(d) == before


def test_a_directory_named_like_the_weights_is_refused(tmp_path):
    d = tmp_path / "drafter"
    shutil.copytree(EXAMPLE / "eagle3-safeai", d)
    (d / "pytorch_model.bin").unlink()
    (d / "model.safetensors").mkdir()
    assert_clean_failure(run_inprocess("lint", d), contains="is a directory, not a regular file")


@pytest.mark.parametrize("shard", ["../outside.safetensors", "/etc/passwd", "sub/../../x.safetensors"])
def test_an_index_naming_a_shard_outside_its_folder_is_refused(tmp_path, shard):
    d = make_drafter(tmp_path / "d", "speculators", spec=make_spec(), file="sharded")
    index = d / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    first = next(iter(data["weight_map"]))
    data["weight_map"][first] = shard
    index.write_text(json.dumps(data))
    assert_clean_failure(run_inprocess("lint", d), contains="must be a relative path inside")


@pytest.mark.parametrize("value", ["abc", "-1", "0", "inf", "nan"])
def test_a_bad_hub_timeout_setting_is_one_line(value):
    # run_cli: a process reads each setting once (settings.env_seconds)
    r = run_cli("pull", "tester/anything", env={"EAGLEZOO_HUB_TIMEOUT": value})
    assert_clean_failure(r, contains=f"EAGLEZOO_HUB_TIMEOUT={value!r}")


def test_a_bad_endpoint_timeout_setting_is_one_line_before_any_request():
    # run_cli: a process reads each setting once (settings.env_seconds)
    r = run_cli(
        "verify",
        EXAMPLE / "eagle3-safeai",
        "--target",
        EXAMPLE / "target",
        *EXAMPLE_IDS,
        "--max-prompts",
        "1",
        "--endpoint",
        "http://127.0.0.1:9",
        env={"EAGLEZOO_ENDPOINT_TIMEOUT": "soon"},
    )
    assert_clean_failure(r, contains="EAGLEZOO_ENDPOINT_TIMEOUT='soon'")


def test_fp8_weights_get_their_value_checks_not_an_internal_error(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    d = make_drafter(tmp_path / "d", "speculators", spec=make_spec(), file="safetensors")
    state = load_file(d / "model.safetensors")
    fp8 = {n: t.to(torch.float8_e4m3fn) if t.is_floating_point() else t for n, t in state.items()}
    save_file(fp8, str(d / "model.safetensors"), metadata={"format": "pt"})
    r = run_inprocess("lint", d, "--json")
    assert r.code in (0, 1) and "internal error" not in r.out + r.err, r.out + r.err
    assert r.json()["spec"] is not None


@pytest.mark.parametrize("command", ["lint", "convert"])
def test_a_sparse_tensor_in_a_bin_file_is_one_line(tmp_path, command):
    import torch

    d = tmp_path / "drafter"
    shutil.copytree(EXAMPLE / "eagle3-safeai", d)
    state = torch.load(d / "pytorch_model.bin", weights_only=True)
    state["d2t"] = state["d2t"].to_sparse()
    torch.save(state, d / "pytorch_model.bin")
    out = tmp_path / "out"
    r = run_cli(command, *([d, out, *EXAMPLE_IDS] if command == "convert" else [d]), timeout=TIMEOUT)
    assert_clean_failure(r, out if command == "convert" else None, contains="'d2t' is not a plain dense tensor")


DRAFTER = EXAMPLE / "eagle3-safeai"
VERIFY = ["verify", DRAFTER, "--target", EXAMPLE / "target", *EXAMPLE_IDS]


@pytest.mark.parametrize(
    "args, message",
    [
        ([*VERIFY, "--max-prompts", "0"], "--max-prompts"),
        ([*VERIFY, "--max-prompts", "-1"], "--max-prompts"),
        ([*VERIFY, "--max-new-tokens", "0"], "--max-new-tokens"),
        ([*VERIFY, "--batch-size", "0"], "--batch-size"),
        ([*VERIFY, "-k", "1000"], "--num-spec-tokens"),
        ([*VERIFY, "--min-acceptance", "0.5,0.4,0.3,0.2"], "has 4 floors but K is 3"),
        ([*VERIFY, "--min-acceptance", "nan"], "--min-acceptance"),
        ([*VERIFY, "--min-acceptance", "inf"], "--min-acceptance"),
        ([*VERIFY, "--min-al", "inf"], "--min-al"),
        ([*VERIFY, "--min-al", "nan"], "--min-al"),
        (["serve-config", "tiny-example-eagle31", "-k", "-1"], "--num-spec-tokens"),
        (["serve-config", "tiny-example-eagle31", "-k", "1000"], "--num-spec-tokens"),
    ],
)
def test_numeric_options_out_of_range_are_one_line(args, message):
    assert_clean_failure(run_inprocess(*args), contains=message)


@pytest.mark.parametrize(
    "content, message",
    [
        (b'\xff\xfe{"prompt": "hi"}\n', "not UTF-8"),
        (b"[" * 100_000 + b"\n", "line 1 is not JSON"),
        (b"[1, 2]\n", "line 1 needs a string field 'prompt'"),
        (b'\xef\xbb\xbf{"prompt": "hi"}\n', "starts with a byte-order mark (BOM)"),
    ],
)
def test_prompts_that_are_not_text_too_deep_or_not_objects(tmp_path, content, message):
    prompts = tmp_path / "p.jsonl"
    prompts.write_bytes(content)
    assert_clean_failure(run_inprocess(*VERIFY, "--prompts", prompts), contains=message)


def test_a_target_given_as_a_file_is_named_as_the_target():
    r = run_inprocess("verify", "tiny-example-eagle31", "--target", EXAMPLE / "target" / "config.json")
    assert_clean_failure(r, contains="config.json: not a directory")
    assert "(hint: give the target's folder, not a file in it)" in r.err


def test_reports_that_are_json_lists_are_refused(tmp_path):
    listed = tmp_path / "report.json"
    listed.write_text("[1, 2]")
    assert_clean_failure(
        run_inprocess("push", EXAMPLE / "eagle31-safeai", "tester/x", "--report", listed, "--dry-run"),
        contains="not a JSON object",
    )
    assert_clean_failure(run_inprocess("registry", "record", listed), contains="not a JSON object")


def test_unwritable_destinations_are_refused_before_any_work(tmp_path):
    (tmp_path / "dir").mkdir()
    assert_clean_failure(run_inprocess(*VERIFY, "--report", tmp_path / "dir"), contains="is a directory")
    assert_clean_failure(run_inprocess(*VERIFY, "--report", tmp_path / "no" / "r.json"), contains="does not exist")
    long_name = tmp_path / ("x" * 300)
    assert_clean_failure(run_inprocess("convert", DRAFTER, long_name, *EXAMPLE_IDS), contains="a file name is too long")


def test_a_non_utf8_registry_file_is_named_while_the_others_list(tmp_path):
    registry = tmp_path / "registry"
    shutil.copytree(ROOT / "registry", registry, ignore=shutil.ignore_patterns("reports"))
    (registry / "garbled.yaml").write_bytes(b"id: \xff\xfe\n")
    listed = run_inprocess("registry", "list", "--registry", registry, "--json")
    assert listed.code == 0 and len(listed.json()) >= 30 and "garbled" in listed.err
    assert run_inprocess("registry", "show", "tiny-example-eagle31", "--registry", registry).code == 0
    assert run_inprocess("registry", "check", "--registry", registry).code == 1


def test_a_fifo_in_the_registry_is_named_and_never_read(tmp_path):
    registry = tmp_path / "registry"
    shutil.copytree(ROOT / "registry", registry, ignore=shutil.ignore_patterns("reports"))
    os.mkfifo(registry / "fifo.yaml")
    listed = run_cli("registry", "list", "--registry", registry, "--json", timeout=TIMEOUT)
    assert listed.code == 0 and "fifo.yaml is a FIFO" in listed.err
    assert_clean_failure(
        run_cli("registry", "show", "fifo", "--registry", registry, timeout=TIMEOUT),
        contains="is a FIFO, not a regular file",
    )
    checked = run_cli("registry", "check", "--registry", registry, timeout=TIMEOUT)
    assert checked.code == 1 and "is a FIFO" in checked.out + checked.err
