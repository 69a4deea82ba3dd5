"""DSpark on a real llama-server b11434 (`--spec-type draft-dspark`, `-t 1`): examples/tiny/dspark-llamacpp (trained
on taps 1,2,3 of the 4-layer target, all inside llama.cpp's reach) converted by eaglezoo, served and measured.

* native and llama.cpp agree count for count, step for step (eaglezoo/verify/dspark.py runs what
  src/models/dflash.cpp:296-384 and common/speculative.cpp:1264-1334 compute), with the Markov head doing real work
  on both: zeroed, both engines accept less, and still agree;
* `verify --endpoint` on a llama-server a user started equals native prompt for prompt;
* doctor names `--spec-draft-n-max` above the block (anchor sampled: K <= block_size, speculative.cpp:1073-1080)
  with the flag, and a server within it healthy;
* serve-config --engine llamacpp prints the path, and the path, run as printed, drafts with draft-dspark."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import CLI_ENV, EXAMPLE, ROOT, run_cli, run_inprocess
from support import llamacpp_serve
from support.llama_servers import binary, serving

DSPARK = EXAMPLE / "dspark-llamacpp"
TARGET = EXAMPLE / "target"
WORK = ["--max-prompts", "8", "--max-new-tokens", "32"]
PAIR = [DSPARK, "--target", TARGET, "-k", "4", *WORK]


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory):
    binary()  # skips, naming the setup command, where llama-server is not built
    tmp = tmp_path_factory.mktemp("dspark")
    for src, out, extra in ((TARGET, tmp / "tg", []), (DSPARK, tmp / "dg", ["--target", TARGET])):
        r = run_inprocess("convert", src, out, "--to", "gguf", *extra, "--dtype", "float32")
        assert r.code == 0, r.err
    return {"target": tmp / "tg" / "target.gguf", "drafter": tmp / "dg" / "drafter.gguf"}


def native_and_llamacpp(drafter):
    r = run_cli("verify", drafter, *PAIR[1:], "--engine", "native,llamacpp", "--json", timeout=900)
    assert r.code == 0, r.err
    return r


def test_dspark_on_llamacpp_equals_native_count_for_count(ggufs, tmp_path):
    r = native_and_llamacpp(DSPARK)
    report = r.json()
    c = report["comparison"]
    print("dspark-llamacpp, K=4:", c["mean_acceptance_length"], c["num_drafts"], c["num_accepted"])
    assert report["engine"]["name"] == "llamacpp" and c["reference"] == "native"
    assert c["identical"] and c["prompts_identical"] == c["prompts_compared"] == 8, c
    assert c["num_drafts"]["native"] == c["num_drafts"]["llamacpp"] > 0
    assert c["mean_acceptance_length"]["llamacpp"] > 1.5  # measured 1.693 (docs/benchmarks.md)
    assert len(report["acceptance_per_position"]) == 4  # the whole block: the anchor is sampled
    saved = tmp_path / "r.json"
    saved.write_text(r.out)
    shown = run_inprocess("report", saved)  # the same report as every engine, read back
    assert shown.code == 0 and "on llamacpp" in shown.out, shown.err


def test_the_markov_head_runs_on_both_engines(tmp_path):
    """The example with markov_w2 zeroed (no bias): both engines accept less than with the head, and still agree."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "no-markov"
    shutil.copytree(DSPARK, folder)
    state = load_file(folder / "model.safetensors")
    state["markov_head.markov_w2.weight"] = state["markov_head.markov_w2.weight"] * 0
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    c = native_and_llamacpp(folder).json()["comparison"]
    print("dspark-llamacpp, Markov head zeroed:", c["mean_acceptance_length"])
    assert c["identical"] and c["prompts_identical"] == 8, c
    assert c["mean_acceptance_length"]["llamacpp"] < 1.5  # measured 1.212, against 1.693 with the head


def test_dspark_on_a_running_llama_server_equals_native(ggufs):
    native = run_inprocess("verify", *PAIR, "--json")
    assert native.code == 0, native.err
    with serving(ggufs["target"], ggufs["drafter"], k=4, spec="draft-dspark") as (_, url):
        r = run_inprocess("verify", *PAIR, "--endpoint", url, "--json")
    assert r.code == 0, r.err
    got, want = r.json(), native.json()
    assert got["engine"]["name"] == "llamacpp" and got["engine"]["speculative_config"]["num_speculative_tokens"] == 4
    assert [p["accepted"] for p in got["per_prompt"]] == [p["accepted"] for p in want["per_prompt"]]
    assert got["acceptance_per_position"] == want["acceptance_per_position"]


def test_doctor_names_k_above_the_dspark_block_and_a_fitting_one_healthy(ggufs):
    """Block 4, anchor sampled: llama-server drafts at most 4 (common/speculative.cpp:1073-1080); started with
    --spec-draft-n-max 5 it clamps, and doctor -k 5 names it with the flag; a server at 4 is healthy."""
    args = ("doctor", DSPARK, "--target", TARGET, "--served-gguf", ggufs["drafter"], *WORK, "--json")
    with serving(ggufs["target"], ggufs["drafter"], k=5, spec="draft-dspark") as (_, url):
        deep = run_inprocess(*args, "--endpoint", url, "-k", "5")
    assert deep.code == 1, deep.err
    first = deep.json()["findings"][0]
    assert first["cause"] == "llamacpp-k-above-block" and "--spec-draft-n-max 4" in first["fix"], first
    with serving(ggufs["target"], ggufs["drafter"], k=4, spec="draft-dspark") as (_, url):
        fits = run_inprocess(*args, "--endpoint", url, "-k", "4")
    assert fits.code == 0 and fits.json()["verdict"] == "healthy", fits.out


def run_from(folder, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eaglezoo", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=folder,
        env={**CLI_ENV, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )


def test_serve_config_prints_the_dspark_path_that_runs(tmp_path):
    """serve-config --engine llamacpp for the DSpark example, run as printed from where it was printed: both converts
    through the CLI, then the llama-server line (eaglezoo's binary, a port and one thread added); a greedy completion
    drafts, with the server's speculative type draft-dspark."""
    server = llamacpp_serve.binary()
    here = tmp_path / "here"
    here.mkdir()
    os.symlink(ROOT / "examples", here / "examples")
    args = ("examples/tiny/dspark-llamacpp", "--target", "examples/tiny/target", "--engine", "llamacpp", "-k", "4")
    proc = run_from(here, "serve-config", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)["steps"]
    assert len(steps) == 3
    for step in steps[:2]:
        words = shlex.split(step)
        assert words[0] == "eaglezoo"
        done = run_from(here, *words[1:])
        assert done.returncode == 0, (step, done.stderr)
    words = shlex.split(steps[2])
    assert words[0] == "llama-server" and words[words.index("--spec-type") + 1] == "draft-dspark"
    assert words[words.index("--spec-draft-n-max") + 1] == "4"
    cmd = [str(server), *words[1:], "-t", "1", "-c", "512"]
    with llamacpp_serve.serving(cmd, tmp_path / "server.log", timeout=240) as url:
        got = llamacpp_serve.post(
            url, "/completion", {"prompt": "The quick brown fox", "n_predict": 32, "temperature": 0}, timeout=300
        )
        assert got["timings"]["draft_n"] > 0 and got["timings"]["draft_n_accepted"] > 0, got["timings"]
    assert "draft-dspark" in (tmp_path / "server.log").read_text(errors="replace")
