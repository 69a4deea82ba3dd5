"""The P-EAGLE drafter's chains equal vLLM's one parallel pass: for the chain from slot t, one plain causal forward
over the verified slots 0..t (real tokens, real fused states) followed by K - 1 slots of the mask token and the
projected mask_hidden, read at its last K positions (vLLM 0.32 v1/spec_decode/utils.py:499-535)."""

from __future__ import annotations

import pytest
import torch
from support.factory import canonical_state, make_spec

from eaglezoo.checkpoint.spec import FamilyFields
from eaglezoo.verify.drafter import LayerCache
from eaglezoo.verify.peagle import build_peagle

MASK = 7


@pytest.fixture(scope="module", params=[{"num_layers": 2, "fc_norm": True, "norm_output": True}, {"num_layers": 1}])
def model(request):
    spec = make_spec(**request.param).model_copy(
        update={"family": "peagle", "family_fields": FamilyFields(mask_token_id=MASK)}
    )
    state = canonical_state(spec) | {"mask_hidden": torch.randn(1, 1, spec.num_aux * spec.target_hidden_size)}
    return build_peagle(spec, state, embed=torch.randn(spec.vocab_size, spec.hidden_size))


def one_pass(model, aux, next_tokens, t: int, k: int) -> list[int]:
    """vLLM's drafter input for a round whose last verified slot is t, run as one causal pass (no chain logic)."""
    eagle = model.eagle
    hidden = torch.cat([eagle.combine([a[: t + 1] for a in aux]), model.mask_state().expand(k - 1, -1)])[None]
    tokens = torch.cat([next_tokens[: t + 1], torch.full((k - 1,), MASK)])[None]
    _, z = eagle.step(hidden, tokens, torch.arange(t + k), [LayerCache() for _ in eagle.layers])
    return eagle.to_target_ids(eagle.lm_head(z[0, t:]).argmax(-1)).tolist()


def test_chains_equal_one_parallel_pass(model):
    g = torch.Generator().manual_seed(1)
    t_len, k, start = 24, 4, 5
    aux = [torch.randn(t_len, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (t_len,), generator=g)
    with torch.inference_mode():
        chains = model.draft_chains(aux, next_tokens, k, start=start)
        for t in range(start, t_len):
            assert chains.draft_ids[:, t - start].tolist() == one_pass(model, aux, next_tokens, t, k), t


def test_batched_rows_equal_single_rows(model):
    g = torch.Generator().manual_seed(2)
    aux = [torch.randn(2, 16, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (2, 16), generator=g)
    with torch.inference_mode():
        both = model.draft_chains(aux, next_tokens, 3, start=torch.tensor([3, 5]))
        for row, first in ((0, 3), (1, 5)):
            one = model.draft_chains([a[row] for a in aux], next_tokens[row], 3, start=first)
            assert torch.equal(both.draft_ids[:, row], one.draft_ids[:, : both.draft_ids.shape[2]])


def test_the_mask_is_what_depths_two_on_read(model):
    """Another mask_hidden changes depths 2..K and never depth 1 (which reads only real states)."""
    g = torch.Generator().manual_seed(3)
    aux = [torch.randn(20, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (20,), generator=g)
    with torch.inference_mode():
        before = model.draft_chains(aux, next_tokens, 3, keep_logits=True)
        saved = model.mask_hidden.clone()
        model.mask_hidden.copy_(torch.randn(saved.shape, generator=g) * 10)
        after = model.draft_chains(aux, next_tokens, 3, keep_logits=True)
        model.mask_hidden.copy_(saved)
    torch.testing.assert_close(before.logits[0], after.logits[0])
    assert not torch.allclose(before.logits[1], after.logits[1])


@pytest.mark.parametrize(
    "change, words", [({"mask_hidden": None}, "has none"), ({"mask_hidden": torch.zeros(5)}, "has 5 values")]
)
def test_refused_without_a_fitting_mask_hidden(change, words):
    spec = make_spec().model_copy(update={"family": "peagle", "family_fields": FamilyFields(mask_token_id=MASK)})
    state = canonical_state(spec) | change
    state = {k: v for k, v in state.items() if v is not None}
    with pytest.raises(ValueError, match=words):
        build_peagle(spec, state, embed=torch.randn(spec.vocab_size, spec.hidden_size))
