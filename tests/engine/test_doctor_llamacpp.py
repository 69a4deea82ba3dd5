"""`eaglezoo doctor DRAFTER --target TARGET --endpoint URL --served-gguf DRAFT.gguf` on a real llama-server (llama.cpp
b11434, `-t 1`): each fault a GGUF written by eaglezoo's converter with one key or tensor rewritten by the `gguf`
library, served, named with its cause and the conversion command that fixes it, and the fix confirmed on the native
reference; a healthy server named healthy.

The drafter: the example EAGLE-3 drafter converted by eaglezoo with boundary taps 1,2,3 (written at its config's top
level), all inside llama.cpp's reach for the 4-layer example target (taps < n_layer: docs/notes/llamacpp-fidelity.md),
so llama.cpp and the native reference agree step for step and the trials can reproduce the server."""

from __future__ import annotations

import json
import shutil
import subprocess

import gguf
import pytest
from conftest import EXAMPLE, assert_clean_failure, run_cli, run_inprocess
from support.llama_servers import binary, serving
from support.llamacpp import rewrite

TARGET = EXAMPLE / "target"
WORK = ["--max-prompts", "8", "--max-new-tokens", "32"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    binary()  # skips, naming the setup command, where llama-server is not built
    tmp = tmp_path_factory.mktemp("lldoc")
    named = tmp / "named"
    for args in (
        (EXAMPLE / "eagle3-safeai", named, "--aux-layers", "1,2,3", "--aux-convention", "boundary"),
        (named, tmp / "dg", "--to", "gguf"),
        (TARGET, tmp / "tg", "--to", "gguf"),
    ):
        r = run_inprocess("convert", *args, *(["--target", TARGET] if args[0] != TARGET else []), "--dtype", "float32")
        assert r.code == 0, r.err
    good = tmp / "dg" / "drafter.gguf"
    return {
        "named": named,
        "target": tmp / "tg" / "target.gguf",
        "good": good,
        # the trained ids written in the other convention (layer-output ids read as boundary ids)
        "taps": rewrite(good, tmp / "taps.gguf", keys={"eagle3.target_layers": [0, 1, 2]}),
        "nbr": rewrite(good, tmp / "nbr.gguf", keys={"eagle3.norm_before_residual": True}),
        "d2t": rewrite(good, tmp / "d2t.gguf", drop_tensors=("d2t",)),
    }


def doctor(files, url, served, *extra, as_json=True):
    return run_inprocess(
        "doctor", files["named"], "--target", TARGET, "--endpoint", url, "--served-gguf", served, *WORK, *extra,
        *["--json"] * as_json,
    )  # fmt: skip


def test_healthy_server_is_named_healthy(files):
    with serving(files["target"], files["good"], k=2) as (_, url):
        r = doctor(files, url, files["good"], "-k", "2")
    assert r.code == 0, r.err
    report = r.json()
    assert report["verdict"] == "healthy" and report["findings"] == [], report
    assert report["server"]["engine"] == "llamacpp"
    server, reference = (next(m for m in report["measured"] if m["source"] == s) for s in ("server", "reference"))
    assert server["per_prompt"] == reference["per_prompt"]  # llama.cpp equals native prompt by prompt


@pytest.mark.parametrize(
    ("fault", "cause"),
    [("taps", "llamacpp-taps"), ("nbr", "llamacpp-norm-flags")],
)
def test_each_fault_is_named_with_its_conversion_fix_and_confirmed(files, fault, cause):
    with serving(files["target"], files[fault], k=2) as (_, url):
        r = doctor(files, url, files[fault], "-k", "2")
    assert r.code == 1, r.err
    report = r.json()
    first = report["findings"][0]
    print(fault, first)
    assert first["cause"] == cause and first["confirmed"], report["findings"]
    assert f"eaglezoo convert {files['named']} OUT --to gguf --target {TARGET}" in first["fix"]
    measured = {m["source"]: m for m in report["measured"]}
    assert measured["server"]["per_prompt"] == measured["as served"]["per_prompt"]  # the trial reproduces it
    assert measured[f"fix: {cause}"]["per_prompt"] == measured["reference"]["per_prompt"]  # the fix restores it
    assert measured["server"]["mean_acceptance_length"] < measured["reference"]["mean_acceptance_length"]


def test_llamacpp_default_taps_are_named_and_judged_by_what_they_measure(files, tmp_path):
    """[2, L//2, L-3]: what llama.cpp's own converter bakes for a 4-layer target without top-level aux ids. On this
    drafter (read as trained on 1,2,3, though the example was trained on 2,3,4) they measure no worse than the taps
    named, so doctor names them and calls them no fault, by the server's own acceptance."""
    baked = rewrite(files["good"], tmp_path / "baked.gguf", keys={"eagle3.target_layers": [2, 2, 1]})
    with serving(files["target"], baked, k=2) as (_, url):
        r = doctor(files, url, baked, "-k", "2")
    report = r.json()
    said = [n for n in report["notes"] if "[2, L//2, L-3]" in n]
    assert said and "conversion/llama.py:77-81" in said[0] and "not a fault" in said[0], report["notes"]
    server, reference = (next(m for m in report["measured"] if m["source"] == s) for s in ("server", "reference"))
    assert (r.code == 0) == (server["mean_acceptance_length"] >= reference["mean_acceptance_length"])


def test_a_gguf_without_d2t_never_serves(files, tmp_path):
    """llama.cpp sizes a d2t-less drafter's output by the target's vocabulary (src/models/eagle3.cpp:44-55): the
    example's 512-token draft vocabulary fails to load, so there is no server to doctor; lint names the file."""
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.run(
            [binary(), "-m", files["target"], "-md", files["d2t"], "--spec-type", "draft-eagle3", "-t", "1",
             "--port", "0"],
            stdout=out, stderr=out, timeout=120, check=False,
        )  # fmt: skip
    assert proc.returncode != 0 and "tensor 'output.weight' has wrong shape" in log.read_text()
    r = run_inprocess("lint", files["d2t"], "--target", TARGET, "--json")
    assert "gguf-d2t-missing" in r.out


def test_server_without_metrics_is_one_line_naming_the_flag(files):
    with serving(files["target"], files["good"], k=2, metrics=False) as (_, url):
        r = doctor(files, url, files["good"], "-k", "2", as_json=False)
    assert_clean_failure(r, contains="--metrics")


def test_served_gguf_that_is_not_a_drafter_is_one_line(files):
    with serving(files["target"], files["good"], k=2) as (_, url):
        r = doctor(files, url, files["target"], "-k", "2", as_json=False)
        missing = run_cli("doctor", files["named"], "--target", TARGET, "--endpoint", url, *WORK)
    assert_clean_failure(r, contains="not a drafter")
    assert_clean_failure(missing, contains="does not say which drafter GGUF")
    assert "--served-gguf" in missing.err


def test_served_gguf_on_a_server_that_is_not_llamacpp_is_one_line(files, tmp_path):
    r = run_inprocess("doctor", files["named"], "--target", TARGET, "--engine", "vllm", "--served-gguf", files["good"])
    assert_clean_failure(r, contains="not llama-server")
    assert gguf.GGUFReader(files["good"]).fields  # the input untouched and still readable


def test_dflash_k_above_the_block_is_named_with_the_flag(files, tmp_path):
    """The example DFlash drafter (block 4) read at boundary 1,2,3 (in llama.cpp's reach): llama-server started with
    --spec-draft-n-max 4 drafts 3 (common/speculative.cpp:1073-1080); doctor -k 4 names it, -k 3 is healthy."""
    folder = tmp_path / "dflash"
    shutil.copytree(EXAMPLE / "dflash", folder)
    config = json.loads((folder / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [0, 1, 2]
    (folder / "config.json").write_text(json.dumps(config))
    r = run_inprocess("convert", folder, tmp_path / "dg", "--to", "gguf", "--target", TARGET, "--dtype", "float32")
    assert r.code == 0, r.err
    served = tmp_path / "dg" / "drafter.gguf"
    with serving(files["target"], served, k=4, spec="draft-dflash") as (_, url):
        args = ("doctor", folder, "--target", TARGET, "--endpoint", url, "--served-gguf", served, *WORK, "--json")
        deep, fits = run_inprocess(*args, "-k", "4"), run_inprocess(*args, "-k", "3")
    assert deep.code == 1, deep.err
    first = deep.json()["findings"][0]
    assert first["cause"] == "llamacpp-k-above-block" and "--spec-draft-n-max 3" in first["fix"], first
    assert fits.code == 0 and fits.json()["verdict"] == "healthy", fits.out
