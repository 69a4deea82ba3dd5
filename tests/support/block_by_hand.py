"""A DFlash-style block pass laid out by hand with plain tensor ops, the reference the native DFlash and DSpark
drafters are held to (tests/unit/verify/test_dflash.py, test_dspark.py): the context keys of slots 0..t (each
layer's k/v of hidden_norm(fc(aux))) and the block's tokens at their positions, every query seeing every key."""

from __future__ import annotations

import torch


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


def block_pass(model, aux, block, t: int):
    """The drafter's layers over `block` (token ids at positions t+1..) after the context of slots 0..t: the last
    hidden state of every block position, before the final norm."""
    ctx = rms(torch.cat([a[: t + 1] for a in aux], -1) @ model.fc.weight.T, model.hidden_norm.weight)
    pos_ctx, pos_blk = torch.arange(t + 1), torch.arange(t + 1, t + len(block) + 1)
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
    return h
