"""The drafter's attention in query chunks: the same numbers as the whole T x T softmax, in O(T) memory."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from support.factory import canonical_state, make_spec
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from eaglezoo.verify import drafter as drafter_module
from eaglezoo.verify.drafter import build_drafter


def script_module(relative: str):
    """A script of the repository's scripts/ loaded from its file (scripts/ is no installed package)."""
    spec = importlib.util.spec_from_file_location(Path(relative).stem, ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


whole_softmax = script_module("scripts/bench/drafter_memory.py").whole_softmax  # the attention as first written


@pytest.fixture(scope="module")
def model():
    spec = make_spec(fc_norm=True, norm_output=True, num_layers=2)  # 4 heads over 2 kv heads
    return build_drafter(spec, canonical_state(spec), embed=torch.randn(spec.vocab_size, spec.hidden_size))


def chains(model, t, depth=4, batch=2):
    g = torch.Generator().manual_seed(t)
    aux = [torch.randn(batch, t, 64, generator=g) for _ in range(3)]
    with torch.inference_mode():
        return model.draft_chains(aux, torch.randint(0, 256, (batch, t), generator=g), depth, keep_logits=True)


@pytest.mark.parametrize("budget", [1 << 22, 5000, 700])  # one chunk; chunks of 3 rows; of one row
def test_chunked_attention_equals_the_whole_softmax(model, monkeypatch, budget):
    monkeypatch.setattr(drafter_module, "SCORES_BUDGET", budget)
    got = chains(model, 300)
    monkeypatch.setattr(drafter_module.Attention, "forward", whole_softmax)
    want = chains(model, 300)
    assert torch.equal(got.draft_ids, want.draft_ids)
    for a, b in zip(got.logits, want.logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got.feedback_sq, want.feedback_sq, rtol=1e-5, atol=1e-6)


class LargestTensor(TorchDispatchMode):
    """Records the element count of the largest tensor any operation produces."""

    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        sizes = [t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.largest = max([self.largest, *sizes])
        return out


def test_no_intermediate_grows_with_t_squared(model, monkeypatch):
    """At T = 1024 the whole softmax holds 2 x 4 heads x T x T = 8.4 M scores; chunked, no tensor is
    larger than the budget (65 k) or the O(T) activations (the fc input, 2 x T x 192 = 0.4 M)."""
    monkeypatch.setattr(drafter_module, "SCORES_BUDGET", 1 << 16)
    with LargestTensor() as seen:
        chains(model, 1024, depth=2)
    assert seen.largest <= 1 << 19, seen.largest


def test_chains_from_later_slots_are_the_same_chains(model):
    """`start` skips the deeper steps of chains nobody judges (the prompt's), one start for all rows
    or one per row: the chains left are unchanged."""
    g = torch.Generator().manual_seed(3)
    aux = [torch.randn(2, 120, 64, generator=g) for _ in range(3)]
    tokens = torch.randint(0, 256, (2, 120), generator=g)
    with torch.inference_mode():
        every = model.draft_chains(aux, tokens, 4, keep_logits=True)
        later = model.draft_chains(aux, tokens, 4, keep_logits=True, start=90)
        per_row = model.draft_chains(aux, tokens, 4, keep_logits=True, start=torch.tensor([90, 100]))
    assert torch.equal(later.draft_ids, every.draft_ids[:, :, 90:])
    for a, b in zip(later.logits, every.logits, strict=True):
        torch.testing.assert_close(a, b[:, 90:], rtol=1e-5, atol=1e-5)
    assert torch.equal(per_row.draft_ids[:, 0], every.draft_ids[:, 0, 90:110])
    assert torch.equal(per_row.draft_ids[:, 1], every.draft_ids[:, 1, 100:])
    torch.testing.assert_close(per_row.logits[-1][1], every.logits[-1][1, 100:], rtol=1e-5, atol=1e-5)
