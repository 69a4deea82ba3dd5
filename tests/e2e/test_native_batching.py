"""The native engine at scale: every prompt of the example's set in batches against one at a time."""

from __future__ import annotations

import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, run_inprocess

DRAFTER = EXAMPLE / "eagle3-safeai"
EXACT = (
    "per_prompt",
    "acceptance_per_position",
    "mean_acceptance_length",
    "num_drafts",
    "num_accepted",
    "histogram",
    "all_positions",
    "target_distinct_token_ratio",
    "skipped_prompts",
)


def verify(target, *extra, drafter=DRAFTER, env=None):
    return run_inprocess(
        "verify",
        drafter,
        "--target",
        target,
        "--prompts",
        EXAMPLE / "prompts.jsonl",
        "--device",
        "cpu",
        *EXAMPLE_IDS,
        *extra,
        env=env,
    )


def test_batched_prompts_give_exactly_the_one_at_a_time_results():
    """Every prompt of the set (43 to 798 tokens, so rows padded by up to 53) in batches of up to 8,
    against one at a time: the same continuations (the distinct-token ratio is computed from them)
    and the same accepted length at every verify step of every prompt."""
    one, eight = (verify(EXAMPLE / "target", "--max-new-tokens", "48", "--json", "--batch-size", b) for b in ("1", "8"))
    assert one.code == 0 and eight.code == 0, one.err + eight.err
    a, b = one.json(), eight.json()
    assert a["num_prompts"] == 36 and a["num_drafts"] > 500
    for key in EXACT:
        assert a[key] == b[key], key
    assert a["drift"]["feedback_rms_per_depth"] == pytest.approx(b["drift"]["feedback_rms_per_depth"], rel=1e-6)
    assert (a["engine"]["batch_size"], b["engine"]["batch_size"]) == (1, 8)
