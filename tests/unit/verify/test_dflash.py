"""The DFlash drafter's chains equal vLLM's one block pass: for the chain from slot t, the context keys of slots
0..t (each layer's k/v of hidden_norm(fc(aux))) and the block [token t+1, mask x K] at positions t+1..t+K+1,
every query seeing every key (vLLM 0.32 v1/spec_decode/dflash.py:111-211, models/qwen3_dflash.py:599-747),
laid out here by hand with plain tensor ops, one slot at a time."""

from __future__ import annotations

import pytest
import torch
from support.block_by_hand import block_pass, rms
from support.factory import make_spec

from eaglezoo.checkpoint.spec import FamilyFields
from eaglezoo.verify.dflash import DFlashDrafter, build_dflash, layer_causality

MASK = 7


def dflash_spec(**extra):
    spec = make_spec(arch="qwen3", num_layers=2, draft_vocab=256)
    return spec.model_copy(update={"family": "dflash", "family_fields": FamilyFields(mask_token_id=MASK, extra=extra)})


def random_state(spec, seed=0):
    torch.manual_seed(seed)
    model = DFlashDrafter(spec, MASK, [False] * spec.num_layers)
    return {
        k: (1 + 0.1 * torch.randn_like(v)) if "norm" in k else v.clone()
        for k, v in model.state_dict().items()
        if k not in ("embed_tokens.weight", "lm_head.weight")
    }


@pytest.fixture(scope="module")
def model():
    spec = dflash_spec()
    g = torch.Generator().manual_seed(9)
    return build_dflash(
        spec, random_state(spec), embed=torch.randn(256, 64, generator=g), lm_head=torch.randn(256, 64, generator=g)
    )


def one_block(model, aux, next_tokens, t: int, k: int) -> list[int]:
    """vLLM's drafter round after slot t, by hand: context keys, then one non-causal pass over the block."""
    block = torch.tensor([int(next_tokens[t])] + [MASK] * k)
    h = block_pass(model, aux, block, t)
    return (rms(h[1:], model.norm.weight) @ model.lm_head.weight.T).argmax(-1).tolist()


def test_chains_equal_one_block_pass(model):
    g = torch.Generator().manual_seed(1)
    t_len, k, start = 20, 4, 5
    aux = [torch.randn(t_len, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (t_len,), generator=g)
    with torch.inference_mode():
        chains = model.draft_chains(aux, next_tokens, k, start=start)
        for t in range(start, t_len):
            assert chains.draft_ids[:, t - start].tolist() == one_block(model, aux, next_tokens, t, k), t


def test_batched_rows_equal_single_rows(model):
    g = torch.Generator().manual_seed(2)
    aux = [torch.randn(2, 16, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (2, 16), generator=g)
    with torch.inference_mode():
        both = model.draft_chains(aux, next_tokens, 3, keep_logits=True, start=torch.tensor([3, 5]))
        for row, first in ((0, 3), (1, 5)):
            one = model.draft_chains([a[row] for a in aux], next_tokens[row], 3, keep_logits=True, start=first)
            assert torch.equal(both.draft_ids[:, row], one.draft_ids[:, : both.draft_ids.shape[2]])
            torch.testing.assert_close(both.logits[0][row], one.logits[0][: both.draft_ids.shape[2]])


def test_a_shorter_block_is_not_a_prefix_of_a_longer_one(model):
    """Why acceptance at another K needs its own run: the first mask reads the masks after it."""
    g = torch.Generator().manual_seed(3)
    aux = [torch.randn(12, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (12,), generator=g)
    with torch.inference_mode():
        short = model.draft_chains(aux, next_tokens, 2, keep_logits=True)
        long = model.draft_chains(aux, next_tokens, 5, keep_logits=True)
    assert not torch.allclose(short.logits[0], long.logits[0])


def test_later_context_never_reaches_an_earlier_block(model):
    g = torch.Generator().manual_seed(4)
    aux = [torch.randn(12, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (12,), generator=g)
    changed = [a.clone() for a in aux]
    for a in changed:
        a[8:] = torch.randn(4, 64, generator=g)
    with torch.inference_mode():
        before = model.draft_chains(aux, next_tokens, 3, keep_logits=True)
        after = model.draft_chains(changed, next_tokens, 3, keep_logits=True)
    torch.testing.assert_close(before.logits[2][:8], after.logits[2][:8])
    assert not torch.allclose(before.logits[2][8:], after.logits[2][8:])


def test_refused_without_mask_token_or_borrowed_weights():
    spec = dflash_spec()
    state = random_state(spec)
    with pytest.raises(ValueError, match="mask_token_id"):
        build_dflash(
            spec.model_copy(update={"family_fields": FamilyFields()}),
            state,
            embed=torch.zeros(256, 64),
            lm_head=torch.zeros(256, 64),
        )
    with pytest.raises(ValueError, match="lm_head"):
        build_dflash(spec, state, embed=torch.zeros(256, 64))


@pytest.mark.parametrize(
    "extra, words",
    [({"dflash_config.use_swa": True}, "sliding"), ({"dflash_config.attention_sink_bias": True}, "sinks")],
)
def test_what_is_not_run_is_refused_by_name(extra, words):
    with pytest.raises(ValueError, match=words):
        layer_causality(dflash_spec(**extra))


def test_causal_is_read_from_dflash_config():
    assert layer_causality(dflash_spec(**{"dflash_config.causal": True})) == [True, True]
    assert layer_causality(dflash_spec()) == [False, False]
