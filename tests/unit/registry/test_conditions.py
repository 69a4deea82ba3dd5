"""The converter from an engine's spelling of K to chain K (issue 43, item 1): SGLang's chain `S-1-(S+1)` is
exactly chain K = S; a top-k above 1 is a tree; every other spelling stays unconverted."""

from __future__ import annotations

import pytest
from support.registry_entries import UNKNOWN_CONDITIONS

from eaglezoo.registry.conditions import Conditions, spelled_chain


def conditions(**stated) -> Conditions:
    return Conditions.model_validate({**UNKNOWN_CONDITIONS, **stated})


@pytest.mark.parametrize(
    "engine,spelling,expected",
    [
        ("sglang", "3-1-4", (3, "chain")),
        ("sglang", "7-1-8", (7, "chain")),
        ("sglang", "3-4-8", (None, "tree")),  # top-k 4: a tree
        ("sglang", "3-1-3", (None, "unknown")),  # fewer draft tokens than steps + 1: not exactly a chain of 3
        ("sglang", "5-1-4", (None, "unknown")),
        ("vllm", "3-1-4", (None, "unknown")),  # vLLM has no such spelling
        ("sglang", "3", (None, "unknown")),
    ],
)
def test_only_exactly_equivalent_spellings_are_converted(engine, spelling, expected):
    c = conditions(engine=engine, k_spelling=spelling)
    assert spelled_chain(c) == expected
    assert c.chain_k() == expected[0] and c.drafted() == expected[1]


def test_a_stated_k_and_drafting_are_kept_as_stated():
    c = conditions(engine="sglang", k=3, k_spelling="3-1-4", drafting="chain")
    assert (c.chain_k(), c.drafted()) == (3, "chain")
