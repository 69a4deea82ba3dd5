"""The DFlash drafter's chains equal vLLM's one block pass: for the chain from slot t, the context keys of slots
0..t (each layer's k/v of hidden_norm(fc(aux))) and the block [token t+1, mask x K] at positions t+1..t+K+1,
every query seeing every key (vLLM 0.32 v1/spec_decode/dflash.py:111-211, models/qwen3_dflash.py:599-747),
laid out here by hand with plain tensor ops, one slot at a time."""

from __future__ import annotations

import pytest
import torch
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


def rms(x, w, eps=1e-6):
    return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rope(x, pos, theta=1e6):
    """x [N, heads, d] rotated half against half (neox) at positions pos [N]."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2).float() / d)
    ang = torch.cat([pos[:, None].float() * inv] * 2, -1)[:, None]
    rot = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * ang.cos() + rot * ang.sin()


def heads(w, y):
    """y [N, in] through the projection w, split into heads of 16."""
    return (y @ w.T).view(len(y), -1, 16)


def one_block(model, aux, next_tokens, t: int, k: int) -> list[int]:
    """vLLM's drafter round after slot t, by hand: context keys, then one non-causal pass over the block."""
    ctx = rms(torch.cat([a[: t + 1] for a in aux], -1) @ model.fc.weight.T, model.hidden_norm.weight)
    block = torch.tensor([int(next_tokens[t])] + [MASK] * k)
    pos_ctx, pos_blk = torch.arange(t + 1), torch.arange(t + 1, t + k + 2)
    h = model.embed_tokens.weight[block]
    for layer in model.layers:
        a = layer.self_attn
        x = rms(h, layer.input_layernorm.weight)
        q = rope(rms(heads(a.q_proj.weight, x), a.q_norm.weight), pos_blk)
        keys = torch.cat(
            [rope(rms(heads(a.k_proj.weight, src), a.k_norm.weight), p) for src, p in ((ctx, pos_ctx), (x, pos_blk))]
        )
        vals = torch.cat([heads(a.v_proj.weight, ctx), heads(a.v_proj.weight, x)])
        g = q.shape[1] // keys.shape[1]
        keys, vals = keys.repeat_interleave(g, 1), vals.repeat_interleave(g, 1)
        att = torch.einsum("qhd,khd->hqk", q, keys).mul(16**-0.5).softmax(-1)
        h = h + torch.einsum("hqk,khd->qhd", att, vals).reshape(len(q), -1) @ a.o_proj.weight.T
        m = layer.mlp
        y = rms(h, layer.post_attention_layernorm.weight)
        h = h + (torch.nn.functional.silu(y @ m.gate_proj.weight.T) * (y @ m.up_proj.weight.T)) @ m.down_proj.weight.T
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
