"""serve-config for the families beside EAGLE-3: vLLM's own method (eagle3 + parallel_drafting for P-EAGLE),
SGLang's algorithm and block flag, and K within the block."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean_failure, run_inprocess
from support import families as F


def serve(*args):
    return run_inprocess("serve-config", *args, "--json")


def test_dflash_on_vllm(tmp_path):
    r = serve(F.zlab_dflash(tmp_path / "d"), "--target", F.target(tmp_path / "t"), "-k", "3")
    assert r.code == 0, r.err
    cfg = json.loads(r.out)["speculative_config"]
    assert (cfg["method"], cfg["num_speculative_tokens"]) == ("dflash", 3)


def test_k_beyond_the_block_is_one_line(tmp_path):
    r = run_inprocess("serve-config", F.zlab_dflash(tmp_path / "d"), "--target", F.target(tmp_path / "t"), "-k", "4")
    assert_clean_failure(r, contains="beyond")


def test_dspark_on_sglang(tmp_path):
    r = serve(F.deepspec_dspark(tmp_path / "d"), "--engine", "sglang", "--target", F.target(tmp_path / "t"), "-k", "4")
    assert r.code == 0, r.err
    command = json.loads(r.out)["command"]
    assert "--speculative-algorithm DSPARK" in command and "--speculative-dspark-block-size 4" in command


def test_peagle_is_eagle3_with_parallel_drafting(tmp_path):
    r = serve(F.peagle_native(tmp_path / "p"), "--target", F.target(tmp_path / "t"), "-k", "3")
    assert r.code == 0, r.err
    cfg = json.loads(r.out)["speculative_config"]
    assert (cfg["method"], cfg["parallel_drafting"]) == ("eagle3", True)


@pytest.mark.parametrize(
    "make", [F.zlab_dflash, F.deepspec_dspark, F.peagle_native], ids=["dflash", "dspark", "peagle"]
)
@pytest.mark.parametrize("mask", [F.VOCAB, 10**9])
def test_a_mask_token_outside_the_vocabulary_is_refused_not_served(tmp_path, make, mask):
    """The mask slots would hold a token no embedding row has: no command is printed."""
    drafter = make(tmp_path / "d", mask_token_id=mask)
    r = run_inprocess("serve-config", drafter, "--target", F.target(tmp_path / "t"), "-k", "2")
    assert_clean_failure(r, contains=f"mask_token_id {mask} is outside the vocabulary")
    assert not r.out
