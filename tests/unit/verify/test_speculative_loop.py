"""The batched measurement agrees with a plain sequential greedy speculative-decoding loop."""

from __future__ import annotations

import pytest
import torch
from conftest import EXAMPLE, EXAMPLE_AUX
from support.reference_decode import forward_aux, speculative_decode

from eaglezoo.checkpoint.config import target_config
from eaglezoo.checkpoint.formats.base import ReadOptions
from eaglezoo.checkpoint.read import read_drafter
from eaglezoo.verify.acceptance import Tally, accepted_lengths, decoding_path
from eaglezoo.verify.drafter import build_drafter
from eaglezoo.verify.target import Target
from eaglezoo.verify.workload import load_prompts


@pytest.fixture(scope="module")
def pair():
    target = Target(EXAMPLE / "target", dtype=torch.float64)
    drafters = {}
    for name in ("eagle3", "eagle31"):
        opts = ReadOptions(
            aux_layers=tuple(EXAMPLE_AUX),
            aux_convention="boundary",
            target_layers=target_config(EXAMPLE / "target")["num_hidden_layers"],
        )
        read = read_drafter(EXAMPLE / f"{name}-safeai", None, opts)
        drafters[name] = build_drafter(
            read.spec, read.state(), embed=target.input_embeddings().detach(), dtype=torch.float64
        )
    return target, drafters


@pytest.mark.parametrize("name", ["eagle3", "eagle31"])
def test_loop_output_is_the_targets_and_counts_match_the_measurement(pair, name):
    target, drafter = pair[0], pair[1][name]
    n, k = 24, 3
    prompts = load_prompts(EXAMPLE / "prompts.jsonl")[:4]
    loop_tally, measured = Tally(k), Tally(k)
    for p in prompts:
        ids = target.tokenizer(p.prompt, add_special_tokens=False)["input_ids"]
        gen = target.greedy([ids], n + k, EXAMPLE_AUX)[0]
        new, rounds = speculative_decode(lambda t: forward_aux(target, t, EXAMPLE_AUX), drafter, ids, n, k)
        assert new == gen.tokens[len(ids) : len(ids) + n].tolist()
        with torch.inference_mode():
            chains = drafter.draft_chains(gen.aux, gen.tokens[1:], k)
        first = gen.prompt_len - 1
        path = decoding_path(accepted_lengths(chains.draft_ids, gen.tokens, first, first + n - 2), n)
        assert rounds == path
        loop_tally.add(rounds)
        measured.add(path)
    assert loop_tally.summary() == measured.summary()
    assert loop_tally.num_accepted > 0


def test_decoding_path_and_tally():
    assert decoding_path([3, 0, 0, 0, 1, 2, 0, 0], 8) == [3, 1, 0]
    assert decoding_path([0, 0, 0], 3) == [0, 0]
    t = Tally(3)
    t.add([3, 0, 1])
    assert t.per_position() == [2 / 3, 1 / 3, 1 / 3]
    assert t.mean_acceptance_length() == 1 + 4 / 3
    assert t.histogram() == [1, 1, 0, 1]


def test_accepted_lengths_counts_leading_matches():
    tokens = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7])
    drafts = torch.tensor([[2, 9, 4, 5], [3, 4, 9, 6], [4, 5, 6, 7]])  # [K=3, T]
    assert accepted_lengths(drafts, tokens, 0, 3) == [3, 0, 1, 3]
