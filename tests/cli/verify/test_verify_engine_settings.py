"""`eaglezoo verify` settings for the vLLM engine that are refused before vLLM is imported or started: an
interpreter without vLLM, and requests that cannot be measured as asked. One line each. (What vLLM itself refuses:
tests/engine/test_vllm_refusals.py.)"""

from __future__ import annotations

import sys

import pytest
from conftest import assert_clean_failure, run_inprocess


def test_engine_interpreter_without_vllm():
    r = run_inprocess("verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", sys.executable)
    assert_clean_failure(r, contains="cannot import vLLM")
    r = run_inprocess("verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", "/no/such/python")
    assert_clean_failure(r, contains="no such executable")


@pytest.mark.parametrize(
    "args, says",
    [
        (["--temperature", "0.7"], "--engine vllm"),
        (["--speedup"], "--engine vllm"),
        (["--engine", "sglang"], "native, vllm, llamacpp, native,vllm or native,llamacpp"),
        (["--engine", "vllm", "--engine-args", "[1]"], "JSON object"),
        (["--engine", "vllm", "--distributed-executor-backend", "slurm"], "distributed-executor-backend"),
        (["--engine", "vllm", "--speedup", "--concurrency", "0"], "--concurrency"),
        (["--engine", "vllm", "--engine-args", '{"speculative_config": {}}'], "cannot set speculative_config"),
        (["--tensor-parallel-size", "4"], "--tensor-parallel-size is a vLLM setting, and --engine native runs no vLLM"),
        (["--quantization", "fp8"], "--quantization is a vLLM setting"),
        (["--gpu-memory-utilization", "0.5"], "--gpu-memory-utilization is a vLLM setting"),
        (["--engine-args", '{"max_num_seqs": 2}'], "--engine-args is a vLLM setting"),
        (
            ["--endpoint", "http://127.0.0.1:9", "--enforce-eager"],
            "--enforce-eager is a vLLM setting, and --engine endpoint",
        ),
        (["--max-model-len", "256"], "--max-model-len is a vLLM setting, and --engine native runs no vLLM"),
    ],
)
def test_requests_that_cannot_be_measured_as_asked(args, says):
    assert_clean_failure(run_inprocess("verify", "tiny-example-eagle31", *args), contains=says)
