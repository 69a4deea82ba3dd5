"""`eaglezoo doctor`'s refusals, each one line and exit 2 before anything is measured: what to diagnose unsaid or
said twice, a server that is down, not HTTP, not a model server, or quotes a secret. (Real vLLM servers:
tests/engine/test_doctor.py.)"""

from __future__ import annotations

import json
import sys
from http.server import ThreadingHTTPServer

import pytest
from conftest import EXAMPLE, assert_clean_failure, run_inprocess
from support.bad_servers import SECRET, Garbage, QuotesASecret
from support.net import free_port, serve_in_background


@pytest.mark.parametrize(
    "args, says",
    [
        ([], "give --endpoint URL"),
        (["--endpoint", "http://127.0.0.1:1", "--engine", "vllm"], "give --endpoint URL"),
        (["--engine", "sglang"], "doctor starts vLLM only"),
        (["--endpoint", "http://127.0.0.1:1", "--speculative-config", "{}"], "describes a planned deployment"),
        (["--engine", "vllm", "--speculative-config", "[1]"], "must be a JSON object"),
        (["--engine", "vllm", "--speculative-config", '{"model": "x"}'], "model is the drafter named"),
        (["--engine", "vllm", "--speculative-config", '{"num_speculative_tokens": 5}'], "num_speculative_tokens is -k"),
        (["--engine", "vllm", "--speculative-config", '{"method": "ngram"}'], "method is eagle3"),
        (
            ["--engine", "vllm", "--speculative-config", '{"num_speculative_tokens_per_batch_size": [[1, 4]]}'],
            "must be a list of [first batch size, last batch size, K] rows",
        ),
        (["--endpoint", "ftp://x"], "http://"),
    ],
)
def test_what_to_diagnose_must_be_said_once(args, says):
    assert_clean_failure(run_inprocess("doctor", "tiny-example-eagle31", *args), contains=says)


def test_a_planned_deployment_needs_the_drafter():
    assert_clean_failure(run_inprocess("doctor", "--engine", "vllm"), contains="name the drafter")


def serve(handler):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_background(httpd)
    return httpd


def test_a_server_that_is_down_or_not_a_model_server():
    assert_clean_failure(
        run_inprocess("doctor", "--endpoint", f"http://127.0.0.1:{free_port()}"), contains="cannot be reached"
    )
    httpd = serve(Garbage)
    try:
        r = run_inprocess("doctor", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{httpd.server_port}")
    finally:
        httpd.shutdown()
    assert_clean_failure(r, contains="did not answer with JSON")


def test_a_server_quoting_a_secret_never_prints_it():
    httpd = serve(QuotesASecret)
    try:
        r = run_inprocess(
            "doctor", "--endpoint", f"http://127.0.0.1:{httpd.server_port}", "--json", env={"HF_TOKEN": SECRET}
        )
    finally:
        httpd.shutdown()
    assert r.code == 2
    assert SECRET[3:] not in r.err + r.out


def test_a_drafter_of_another_family_is_one_line(tmp_path):
    """doctor diagnoses EAGLE-3, P-EAGLE and DFlash drafters (tests/engine/test_doctor_families.py); a DSpark drafter,
    which no engine here runs, is refused before any server is measured."""
    from support.families import deepspec_dspark

    drafter = deepspec_dspark(tmp_path / "dspark")
    r = run_inprocess(
        "doctor", drafter, "--target", EXAMPLE / "target", "--engine", "vllm", "--engine-python", sys.executable
    )
    assert_clean_failure(r, contains="dspark drafters")


def test_the_memory_hint_names_a_flag_doctor_has():
    """vLLM's memory failure names --gpu-memory-utilization (vllm_process.MEMORY_HINT): doctor takes it, and checks
    it as verify does."""
    r = run_inprocess(
        "doctor",
        "tiny-example-eagle31",
        "--engine",
        "vllm",
        "--gpu-memory-utilization",
        "0.5",
        "--engine-python",
        "/nonexistent/python",
    )
    assert_clean_failure(r, contains="--engine-python /nonexistent/python")
    assert_clean_failure(
        run_inprocess("doctor", "tiny-example-eagle31", "--engine", "vllm", "--gpu-memory-utilization", "1.5"),
        contains="--gpu-memory-utilization",
    )


@pytest.mark.parametrize(
    "args, says",
    [
        (["--reference-dtype", "float8"], "unknown --dtype 'float8'"),
        (["--reference-device", "tpu"], "tpu"),
    ],
)
def test_the_reference_precision_and_device_are_checked_first(args, says):
    """The native reference's dtype and device, named and checked as verify's --dtype and --device, before a server
    is asked anything (the endpoint here is down: its error would come second)."""
    r = run_inprocess("doctor", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{free_port()}", *args)
    assert_clean_failure(r, contains=says)


def rows(tmp_path, *prompts: dict):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    return path


def test_rows_longer_than_the_servers_context_are_skipped_not_sent(tmp_path):
    """The deployment's --max-model-len (a server's: its /v1/models) bounds the prompts, as verify's does: every row
    too long is said before vLLM starts (the interpreter here is missing: it would be the next error)."""
    long = rows(tmp_path, {"prompt": " ".join(["the context is the server's"] * 40)})
    r = run_inprocess(
        "doctor",
        "tiny-example-eagle31",
        "--engine",
        "vllm",
        "--max-model-len",
        "64",
        "--prompts",
        long,
        "--engine-python",
        "/nonexistent/python",
    )
    assert_clean_failure(r, contains="too long for the context (64 tokens)")


def test_sampled_rows_are_not_sent_to_the_endpoint_given(tmp_path):
    """A row at temperature > 0: doctor's reason (its reference is greedy) and what measures it, not "use
    --endpoint" to a user who gave one."""
    sampled = rows(tmp_path, {"prompt": "Explain a list.", "temperature": 1.0})
    r = run_inprocess(
        "doctor",
        "tiny-example-eagle31",
        "--engine",
        "vllm",
        "--prompts",
        sampled,
        "--engine-python",
        "/nonexistent/python",
    )
    assert_clean_failure(r, contains="doctor compares the server with the greedy native reference")
    assert "needs --engine vllm or --endpoint" not in r.err
