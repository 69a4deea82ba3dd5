"""The native DSpark drafter equals llama.cpp b11434's round, laid out by hand with plain tensor ops, one slot at a
time: the DFlash body over the block [token t+1, mask x (K-1)] at positions t+1..t+K, every position read
(common/speculative.cpp:1264-1268, 1326-1333), and the Markov bias markov_w2(markov_w1[prev]) added position by
position, prev the anchor first and then the previous position's biased argmax (src/models/dflash.cpp:338-384).
The engine tier holds it against a real llama-server (tests/engine/test_dspark_llamacpp.py)."""

from __future__ import annotations

import pytest
import torch
from support.block_by_hand import block_pass, rms
from support.factory import make_spec

from eaglezoo.checkpoint.spec import FamilyFields
from eaglezoo.verify.dspark import DSparkDrafter, build_dspark
from eaglezoo.verify.dspark_form import native_refusal

MASK, RANK = 7, 8


def dspark_spec(**fields):
    spec = make_spec(arch="qwen3", num_layers=1, draft_vocab=256)
    f = FamilyFields(mask_token_id=MASK, block_size=4, sample_from_anchor=True, markov_rank=RANK, **fields)
    return spec.model_copy(update={"family": "dspark", "family_fields": f})


@pytest.fixture(scope="module")
def model():
    spec = dspark_spec()
    torch.manual_seed(0)
    state = {
        k: (1 + 0.1 * torch.randn_like(v)) if "norm" in k else v.clone() * (3 if "markov" in k else 1)
        for k, v in DSparkDrafter(spec, MASK, [False]).state_dict().items()
        if k not in ("embed_tokens.weight", "lm_head.weight")
    }
    g = torch.Generator().manual_seed(9)
    return build_dspark(spec, state, embed=torch.randn(256, 64, generator=g), lm_head=torch.randn(256, 64, generator=g))


def one_round(model, aux, next_tokens, t: int, k: int) -> list[int]:
    anchor = int(next_tokens[t])
    h = block_pass(model, aux, torch.tensor([anchor] + [MASK] * (k - 1)), t)
    base = rms(h, model.norm.weight) @ model.lm_head.weight.T  # every position, the anchor's too
    w1, w2 = model.markov_head.markov_w1.weight, model.markov_head.markov_w2.weight
    prev, out = anchor, []
    for j in range(k):
        prev = int((base[j] + w2 @ w1[prev]).argmax())
        out.append(prev)
    return out


def test_chains_equal_llamacpp_round_by_hand(model):
    g = torch.Generator().manual_seed(1)
    t_len, k, start = 20, 4, 5
    aux = [torch.randn(t_len, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (t_len,), generator=g)
    with torch.inference_mode():
        chains = model.draft_chains(aux, next_tokens, k, start=start)
        shorter = model.draft_chains(aux, next_tokens, 3, start=start)
        for t in range(start, t_len):
            assert chains.draft_ids[:, t - start].tolist() == one_round(model, aux, next_tokens, t, k), t
            assert shorter.draft_ids[:, t - start].tolist() == one_round(model, aux, next_tokens, t, 3), t


def test_the_markov_head_changes_drafts(model):
    g = torch.Generator().manual_seed(2)
    aux = [torch.randn(12, 64, generator=g) for _ in range(3)]
    next_tokens = torch.randint(0, 256, (12,), generator=g)
    with torch.inference_mode():
        with_head = model.draft_chains(aux, next_tokens, 4).draft_ids.clone()
        saved = model.markov_head.markov_w2.weight.clone()
        model.markov_head.markov_w2.weight.zero_()
        without = model.draft_chains(aux, next_tokens, 4).draft_ids
        model.markov_head.markov_w2.weight.copy_(saved)
    assert not torch.equal(with_head, without)


@pytest.mark.parametrize(
    "fields, dialect, why",
    [
        ({"sample_from_anchor": None}, "speculators-dspark", "a bonus-anchor DSpark"),
        ({"sample_from_anchor": False}, "dspark", "a bonus-anchor DSpark"),
        ({"markov_head_type": "gated"}, "dspark", "markov_head_type 'gated'"),
        ({"markov_rank": None}, "dspark", "no markov_rank"),
    ],
)
def test_what_the_native_engine_refuses(fields, dialect, why):
    spec = dspark_spec()
    spec = spec.model_copy(update={"family_fields": spec.family_fields.model_copy(update=fields)})
    assert why in (native_refusal(spec, dialect) or "")
    assert native_refusal(dspark_spec(enable_confidence_head=True), "dspark") is None  # unread at p-min 0
