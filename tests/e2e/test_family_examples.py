"""The embedded examples of the families beside EAGLE-3, measured natively as users run them: the P-EAGLE example
(examples/tiny/peagle, registry entry tiny-example-peagle) drafts and is accepted, reports like an EAGLE drafter,
and compares with the EAGLE 3.1 example of the same target on the same prompts."""

from __future__ import annotations

import pytest
from conftest import EXAMPLE, run_inprocess

FEW = ["--max-prompts", "6", "--max-new-tokens", "32", "--device", "cpu", "--json"]


@pytest.fixture(scope="module")
def peagle_report():
    r = run_inprocess("verify", "tiny-example-peagle", *FEW)
    assert r.code == 0, r.err
    return r.json()


def test_the_peagle_example_drafts_k_tokens_at_once_and_is_accepted(peagle_report):
    report = peagle_report
    assert report["drafter"].endswith("examples/tiny/peagle") and report["engine"]["name"] == "native"
    rates = report["acceptance_per_position"]
    assert len(rates) == 3 and rates[0] > 0.45 and rates[1] > 0.05  # the mask slots draft real tokens
    assert report["mean_acceptance_length"] > 1.5
    assert not [f for f in report["lint"] if f["severity"] == "error"]


def test_the_peagle_example_is_not_its_eagle_start(peagle_report):
    """The same weights run as EAGLE-3 chains accept otherwise at depth 2: the native engine ran the mask slots."""
    r = run_inprocess("verify", "tiny-example-eagle31", *FEW)
    assert r.code == 0, r.err
    assert r.json()["acceptance_per_position"][1] != pytest.approx(peagle_report["acceptance_per_position"][1])


def test_compare_across_families_of_one_target():
    r = run_inprocess(
        "compare",
        "tiny-example-eagle31",
        "tiny-example-peagle",
        "--prompts",
        EXAMPLE / "prompts.jsonl",
        "--max-prompts",
        "6",
        "--max-new-tokens",
        "32",
        "--json",
    )
    assert r.code == 0, r.err
    c = r.json()
    assert c["a"].endswith("examples/tiny/eagle31-safeai") and c["b"].endswith("examples/tiny/peagle")
    (row,) = c["rows"]
    assert row["prompts"] == 6 and 0 < row["ratio"] < 1 and row["verdict"] == "B below A"
    assert c["per_position"]["b"][1] < c["per_position"]["a"][1]  # one pass accepts less deep than the chain


@pytest.fixture(scope="module")
def dflash_report():
    r = run_inprocess("verify", "tiny-example-dflash", *FEW)
    assert r.code == 0, r.err
    return r.json()


def test_the_dflash_example_drafts_a_block_and_is_accepted(dflash_report):
    """examples/tiny/dflash (registry entry tiny-example-dflash): one non-causal block of 3 masks, accepted past
    its first position, and a by-K row for the measured K only (a shorter block is not a prefix of this one)."""
    report = dflash_report
    assert report["drafter"].endswith("examples/tiny/dflash") and report["engine"]["name"] == "native"
    rates = report["acceptance_per_position"]
    assert len(rates) == 3 and rates[0] > 0.3 and rates[1] > 0.05
    assert [row["k"] for row in report["acceptance_by_k"]["rows"]] == [3]
    assert not [f for f in report["lint"] if f["severity"] == "error"]


def test_a_k_past_the_dflash_block_is_refused():
    r = run_inprocess("verify", "tiny-example-dflash", "-k", "4", *FEW)
    assert r.code == 2 and r.json()["code"] == "k-beyond-block" and "at most 3 tokens" in r.json()["error"]
