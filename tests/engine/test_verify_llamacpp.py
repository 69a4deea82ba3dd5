"""`eaglezoo verify` on llama.cpp b11434: `--engine llamacpp` (eaglezoo starts llama-server, measures, stops it) and
`--endpoint` on a llama-server a user started, against the native fp32 reference on the example pair; and the
servers that must fail in one line: one without --metrics, one killed mid-run, one that dies at start.

Fidelity (docs/notes/llamacpp-fidelity.md): read with taps 1,2,3 (all inside llama.cpp's reach) the two engines
agree step for step; read with the taps the drafter was trained on, 2,3,4, tap 4 (= n_layer) is read by llama.cpp
from `t_h_nextn`, which a Llama target never fills (common/speculative.cpp:603-604, 688-690), so llama.cpp accepts
less. The test holds that gap to a bound, so that it cannot grow unseen."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import CLI_ENV, EXAMPLE, ROOT, assert_clean_failure, run_cli, run_inprocess
from support.llama_servers import binary, drafter_gguf, serving, target_gguf
from support.llamacpp import rewrite

from eaglezoo.errors import EngineError
from eaglezoo.verify.llamacpp_engine import LlamaServerOptions, llama_server

PAIR = [EXAMPLE / "eagle3-safeai", "--target", EXAMPLE / "target", "--aux-convention", "boundary", "-k", "3"]
WORK = ["--max-prompts", "8", "--max-new-tokens", "32"]
# The measured gap with tap 4 out of llama.cpp's reach (docs/notes/llamacpp-fidelity.md): native 2.272, llama.cpp
# 1.977 on these 8 prompts (-0.295). A gap past this bound is a new difference, not the known one.
TAP4_GAP_BOUND = 0.5


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory):
    binary()  # skips, naming the setup command, where llama-server is not built
    tmp = tmp_path_factory.mktemp("gguf")
    return {
        "target": target_gguf(tmp / "target.gguf"),
        "trained": drafter_gguf(tmp / "d234", "2,3,4"),
        "in_reach": drafter_gguf(tmp / "d123", "1,2,3"),
    }


def verify(*args):
    return run_inprocess("verify", *PAIR, *WORK, *args, "--json")


def test_llamacpp_equals_native_step_for_step_with_taps_in_reach(ggufs):
    """examples/tiny/eagle3-llamacpp, trained on taps 1,2,3: both GGUFs written by eaglezoo (the target's:
    gguf_target.write_target_gguf), fp32."""
    r = run_cli(
        "verify",
        EXAMPLE / "eagle3-llamacpp",
        "--target",
        EXAMPLE / "target",
        "-k",
        "3",
        *WORK,
        "--engine",
        "native,llamacpp",
        "--json",
        timeout=900,
    )  # the example trained on taps 1,2,3; the target's GGUF written by eaglezoo
    assert r.code == 0, r.err
    report = r.json()
    c = report["comparison"]
    print("taps 1,2,3:", c["mean_acceptance_length"], c["num_drafts"], c["num_accepted"])
    assert report["engine"]["name"] == "llamacpp" and c["reference"] == "native"
    assert c["identical"] and c["prompts_identical"] == c["prompts_compared"] == 8, c
    assert c["num_drafts"]["native"] == c["num_drafts"]["llamacpp"] > 0


def test_fidelity_tap4_gap_is_the_known_one(ggufs, tmp_path):
    saved, page = tmp_path / "r.json", tmp_path / "r.html"
    r = verify("--aux-layers", "2,3,4", "--engine", "native,llamacpp", "--target-gguf", ggufs["target"])
    assert r.code == 0, r.err
    saved.write_text(r.out)
    shown = run_inprocess("report", saved)  # the same report as every engine: read back, and a page
    assert shown.code == 0 and "on llamacpp" in shown.out, shown.err
    assert run_inprocess("report", saved, "--html", page).code == 0 and page.stat().st_size > 0
    report = r.json()
    c = report["comparison"]
    native, llama = c["mean_acceptance_length"]["native"], c["mean_acceptance_length"]["llamacpp"]
    print(f"taps 2,3,4: native AL {native:.3f}, llama.cpp AL {llama:.3f}, difference {llama - native:+.3f}")
    assert any("t_h_nextn" in n for n in report["notes"])  # the cause is said where it is measured
    assert llama < native  # tap 4 is lost: llama.cpp accepts less
    assert native - llama <= TAP4_GAP_BOUND, f"the tap-4 gap grew: {native:.3f} vs {llama:.3f}"


def test_endpoint_on_a_running_llama_server_equals_native(ggufs):
    native = verify("--aux-layers", "1,2,3")
    assert native.code == 0, native.err
    with serving(ggufs["target"], ggufs["in_reach"]) as (_, url):
        r = verify("--aux-layers", "1,2,3", "--endpoint", url)
    assert r.code == 0, r.err
    got, want = r.json(), native.json()
    assert got["engine"]["name"] == "llamacpp" and got["engine"]["speculative_config"]["num_speculative_tokens"] == 3
    assert [p["accepted"] for p in got["per_prompt"]] == [p["accepted"] for p in want["per_prompt"]]
    assert got["acceptance_per_position"] == want["acceptance_per_position"]


def test_endpoint_at_another_k_is_refused_naming_it(ggufs):
    with serving(ggufs["target"], ggufs["in_reach"], k=2) as (_, url):
        r = run_cli("verify", *PAIR, "--aux-layers", "1,2,3", "--max-prompts", "1", "--endpoint", url)
    assert_clean_failure(r, contains="drafts K=2, not 3")


def test_endpoint_without_metrics_names_the_flag(ggufs):
    with serving(ggufs["target"], ggufs["in_reach"], metrics=False) as (_, url):
        r = run_inprocess("verify", *PAIR, "--aux-layers", "1,2,3", "--max-prompts", "1", "--endpoint", url)
    print(r.err)
    assert_clean_failure(r, contains="--metrics")


def test_endpoint_killed_mid_run_is_one_line(ggufs):
    with serving(ggufs["target"], ggufs["in_reach"]) as (proc, url):
        cmd = [sys.executable, "-m", "eaglezoo", "verify", *map(str, PAIR), "--aux-layers", "1,2,3"]
        cmd += ["--max-new-tokens", "900", "--endpoint", url]
        run = subprocess.Popen(cmd, cwd=ROOT, env=CLI_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not processing(url):  # kill it while it generates
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = run.communicate(timeout=120)
    assert run.returncode == 2, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    print(lines[0])
    assert "llama-server" in lines[0], lines[0]


def processing(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/slots", timeout=2) as r:
            return b'"is_processing":true' in r.read()
    except OSError:
        return False


def test_a_server_that_dies_at_start_is_one_line_naming_why(ggufs, tmp_path):
    """A drafter GGUF with 4 taps: llama.cpp refuses to load it (EAGLE-3 reads exactly 3); the line says so."""
    import gguf  # noqa: PLC0415 - heavy (numpy): this test only

    array = (gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
    four = rewrite(ggufs["trained"], tmp_path / "four.gguf", keys={"eagle3.target_layers": ([1, 2, 3, 4], *array)})
    with pytest.raises(EngineError) as caught, llama_server(ggufs["target"], four, "eagle3", 3, LlamaServerOptions()):
        pass
    assert "llama-server exited" in caught.value.message
    assert "requires exactly 3 entries" in caught.value.message, caught.value.message


def test_engine_llamacpp_with_a_drafter_gguf_as_target_is_one_line(ggufs):
    r = run_inprocess(
        "verify", *PAIR, "--aux-layers", "1,2,3", "--engine", "llamacpp", "--target-gguf", ggufs["trained"]
    )
    assert_clean_failure(r, contains="is a drafter")


def test_dflash_with_taps_in_reach_equals_native_and_as_shipped_is_one_line(ggufs, tmp_path):
    """DFlash: the example reads layer outputs 1,2,3 (boundary 2,3,4); llama.cpp asks the target for the input of
    layer 4, which a Llama graph never sets, and aborts (src/llama-graph.cpp:1413): one line carrying that assertion.
    examples/tiny/dflash-llamacpp, trained on layer outputs 0,1,2 (every tap inside its reach), agrees with native
    step for step."""
    shipped = run_inprocess(
        "verify", EXAMPLE / "dflash", "--target", EXAMPLE / "target", "-k", "3", *WORK, "--engine", "llamacpp"
    )
    assert_clean_failure(shipped, contains="layer input tensor is null")
    assert "llama-server exited" in shipped.err
    trained = EXAMPLE / "dflash-llamacpp"
    r = run_inprocess(
        "verify", trained, "--target", EXAMPLE / "target", "-k", "3", *WORK, "--engine", "native,llamacpp", "--json"
    )
    assert r.code == 0, r.err
    c = r.json()["comparison"]
    print("dflash-llamacpp, layer outputs 0,1,2:", c["mean_acceptance_length"], c["num_drafts"], c["num_accepted"])
    assert c["identical"] and c["prompts_identical"] == c["prompts_compared"] == 8, c


def test_dflash_on_a_running_llama_server_equals_native(ggufs, tmp_path):
    trained = EXAMPLE / "dflash-llamacpp"
    convert = run_inprocess("convert", trained, tmp_path / "gguf", "--to", "gguf", "--target", EXAMPLE / "target")
    assert convert.code == 0, convert.err
    pair = [trained, "--target", EXAMPLE / "target", "-k", "3", *WORK, "--json"]
    native = run_inprocess("verify", *pair)
    assert native.code == 0, native.err
    with serving(ggufs["target"], tmp_path / "gguf" / "drafter.gguf", spec="draft-dflash") as (_, url):
        r = run_inprocess("verify", *pair, "--endpoint", url)
    assert r.code == 0, r.err
    assert [p["accepted"] for p in r.json()["per_prompt"]] == [p["accepted"] for p in native.json()["per_prompt"]]


def test_sampled_on_llamacpp_is_reproducible_with_the_seed(ggufs):
    """T > 0 with a seed: llama.cpp's rejection sampling, per request seeded, gives the same steps twice (and its
    /metrics agree with the timings, or the run would be refused)."""
    runs = [
        verify("--aux-layers", "1,2,3", "--engine", "llamacpp", "--temperature", "0.7", "--seed", "1") for _ in "ab"
    ]
    assert all(r.code == 0 for r in runs), runs[0].err
    steps = [[p["accepted"] for p in r.json()["per_prompt"]] for r in runs]
    assert steps[0] == steps[1] and any(steps[0])
    assert runs[0].json()["sampling"] == {"temperature": 0.7, "seed": 1}
