"""Acceptance for every K from one run: the native engine replays the decoding walk for each K <= K_max on
the K_max drafts, and the table equals separate runs at each K, count for count (fp32, the example)."""

from __future__ import annotations

import pytest
from conftest import EXAMPLE, assert_clean_failure, run_inprocess

from eaglezoo.verify.acceptance import by_k_estimate, by_k_exact

RUN = [
    "tiny-example-eagle31",
    "--prompts",
    EXAMPLE / "prompts.jsonl",
    "--max-prompts",
    "6",
    "--device",
    "cpu",
    "--dtype",
    "float32",
    "--json",
]


@pytest.fixture(scope="module")
def runs():
    reports = {}
    for k in (1, 2, 4):
        r = run_inprocess("verify", *RUN, "-k", k)
        assert r.code == 0, r.err
        reports[k] = r.json()
    return reports


def test_one_run_at_k_max_equals_a_run_at_each_k(runs):
    table = runs[4]["acceptance_by_k"]
    assert table["basis"].startswith("exact")
    rows = {row["k"]: row for row in table["rows"]}
    assert sorted(rows) == [1, 2, 3, 4]
    for k in (1, 2):
        alone = runs[k]
        for key in ("num_drafts", "num_accepted", "acceptance_per_position", "histogram", "mean_acceptance_length"):
            assert rows[k][key] == alone[key], (k, key)
    assert rows[4]["mean_acceptance_length"] == runs[4]["mean_acceptance_length"]
    assert runs[1]["acceptance_by_k"]["rows"][0]["num_drafts"] == runs[1]["num_drafts"]


def test_the_verify_text_shows_the_table():
    r = run_inprocess("verify", *RUN[:-1], "-k", "3")
    assert r.code == 0, r.err
    assert "acceptance length by K (exact): K=1 " in r.out and " · K=3 " in r.out


def test_replay_truncates_each_slot_and_walks_again():
    """Slot lengths at K_max=3 of one prompt of 8 new tokens: at K=1 every round accepts min(a, 1)."""
    lengths = [[3, 0, 2, 1, 3, 0, 0, 0]]
    rows = by_k_exact(lengths, 3, 8)
    # K=3: rounds from slots 0 (3 accepted: 5 tokens) and 4 (3: 9 >= 8, done): 2 drafts, 6 accepted
    assert (rows[2]["num_drafts"], rows[2]["num_accepted"]) == (2, 6)
    # K=1: slots 0 (1: 3 tokens), 2 (1: 5), 4 (1: 7), 6 (0: 8, done): 4 drafts, 3 accepted
    assert (rows[0]["num_drafts"], rows[0]["num_accepted"]) == (4, 3)


def test_the_estimate_is_labelled_and_sums_the_rates():
    rows = by_k_estimate([0.5, 0.25, 0.125])
    assert [r["mean_acceptance_length"] for r in rows] == [1.5, 1.75, 1.875]


def test_floors_beyond_the_measured_k_are_refused():
    """Position floors past K would check positions the run never drafts."""
    r = run_inprocess("verify", "tiny-example-eagle31", "-k", "2", "--min-acceptance", "0.5,0.4,0.3")
    assert_clean_failure(r, None, contains="--min-acceptance has 3 floors but K is 2")
    assert "give at most K values" in r.err
