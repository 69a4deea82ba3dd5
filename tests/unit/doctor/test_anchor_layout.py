"""The anchor layout of a DFlash block (doctor/family_suspects.py, verify/dflash.py), on the example's real DFlash
files: a drafter trained sampling its anchor (sample_from_anchor: K drafts from the anchor and K-1 masks) is run so
natively, while vLLM 0.32 always lays the block out as [bonus, mask x K] (v1/spec_decode/utils.py:731-742). No
example drafter was trained sampling its anchor, so the server side of this direction is not an engine test: its
suspect and the native layouts are checked here."""

from __future__ import annotations

import pytest
import torch
from conftest import EXAMPLE
from support import faults

from eaglezoo.checkpoint.read import read_drafter
from eaglezoo.doctor.family_suspects import ANCHOR_CAUSE, anchor_notes, family_suspects
from eaglezoo.doctor.suspects import as_served
from eaglezoo.verify.dflash import build_dflash, samples_anchor


@pytest.fixture(scope="module")
def anchored(tmp_path_factory):
    folder = faults.copy(EXAMPLE / "dflash", tmp_path_factory.mktemp("anchor") / "d")
    return faults.edit_config(folder, lambda c: c["dflash_config"].update(sample_from_anchor=True))


def test_vllm_runs_a_sampled_anchor_as_the_bonus(anchored):
    drafter = read_drafter(anchored)
    assert samples_anchor(drafter.spec) and not samples_anchor(as_served(drafter, None).spec)


def test_a_drafter_trained_sampling_its_anchor_is_named_with_its_trial(anchored):
    named, served = read_drafter(anchored), read_drafter(EXAMPLE / "dflash")
    found = {s.cause: s for s in family_suspects(served, named, None, "anchored")}
    suspect = found[ANCHOR_CAUSE]
    assert suspect.verdict == "engine-config" and "trained sampling its anchor" in suspect.what, suspect.what
    assert "v1/spec_decode/utils.py:731-742" in suspect.what and "no vLLM 0.32 setting" in suspect.fix
    assert suspect.fixed is not None and samples_anchor(suspect.fixed.spec)
    assert anchor_notes(served, named) == []  # the other direction's note is not said here
    assert ANCHOR_CAUSE not in {s.cause for s in family_suspects(served, served, None, "x")}  # same layout: none


def test_the_native_block_samples_the_anchor(anchored):
    """K drafts either way; sampling the anchor, the block holds K-1 masks and its drafts differ."""
    target = read_drafter(anchored)
    torch.manual_seed(0)
    h = target.spec.target_hidden_size
    aux = [torch.randn(6, h) for _ in range(target.spec.num_aux)]
    tokens = torch.randint(0, 1000, (6,))
    embed = torch.randn(target.spec.vocab_size, target.spec.hidden_size)
    head = torch.randn(target.spec.vocab_size, target.spec.hidden_size)
    ids = {}
    for which, spec in (("anchor", target.spec), ("bonus", read_drafter(EXAMPLE / "dflash").spec)):
        model = build_dflash(spec, target.state(), embed, lm_head=head)
        assert model.block_tokens(tokens[None], 3).shape[-1] == (3 if which == "anchor" else 4)
        ids[which] = model.draft_chains(aux, tokens, 3).draft_ids
    assert ids["anchor"].shape == ids["bonus"].shape and not torch.equal(ids["anchor"], ids["bonus"])
