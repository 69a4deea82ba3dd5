"""The reference for the batched measurement: a plain sequential greedy speculative-decoding loop.

Slow and obvious on purpose: each round recomputes everything, the drafter ingests every slot the
target has features for and drafts K tokens from the last one with an explicit KV list, the target
verifies them, and the longest matching prefix plus the target's own next token is kept.
"""

from __future__ import annotations

import torch

from eaglezoo.verify.drafter import Eagle3Drafter, LayerCache
from eaglezoo.verify.target import Target


@torch.inference_mode()
def forward_aux(target: Target, tokens: torch.Tensor, boundary_ids: list[int]):
    """One teacher-forced pass: (greedy next-token ids [T], aux states, each [T, H_t])."""
    with target.capture(boundary_ids) as store:
        logits = target.model(tokens[None].to(target.model.device)).logits[0]
    return logits.argmax(-1), [torch.cat(store[i], dim=1)[0] for i in boundary_ids]


@torch.inference_mode()
def speculative_decode(target_forward, drafter: Eagle3Drafter, prompt: list[int], max_new_tokens: int, k: int):
    """`target_forward(tokens[T]) -> (greedy next ids [T], aux states)`. Returns (the first
    max_new_tokens new tokens, accepted length per round), a round whenever fewer than
    max_new_tokens exist."""
    tokens = list(prompt)
    nxt, aux = target_forward(torch.tensor(tokens))
    tokens.append(int(nxt[-1]))
    rounds = []
    while len(tokens) - len(prompt) < max_new_tokens:
        n = len(tokens) - 1  # the target has features for slots 0..n-1; token n is its newest output
        t = torch.tensor(tokens)
        drafts = draft_from_last_slot(drafter, [a[:n] for a in aux], t[1 : n + 1], k)
        nxt, aux = target_forward(torch.tensor(tokens + drafts))
        verified = nxt[n:].tolist()  # verified[i] = the target's token after draft i (or after token n)
        a = 0
        while a < k and drafts[a] == verified[a]:
            a += 1
        tokens += drafts[:a] + [verified[a]]
        rounds.append(a)
        nxt, aux = target_forward(torch.tensor(tokens[:-1]))  # features of every kept position
    return tokens[len(prompt) : len(prompt) + max_new_tokens], rounds


def draft_from_last_slot(drafter: Eagle3Drafter, aux, next_tokens, k) -> list[int]:
    """Depth 1 over all slots (the cache), then k-1 steps from the last slot with an explicit KV list."""
    n = next_tokens.shape[0]
    caches = [LayerCache() for _ in drafter.layers]
    h2, z = drafter.step(drafter.combine([a[None] for a in aux]), next_tokens[None], torch.arange(n), caches)
    last = slice(n - 1, n)
    ids = drafter.to_target_ids(drafter.lm_head(z[:, last]).argmax(-1))
    drafts = [int(ids)]
    hidden = drafter.feedback(h2, z)[:, last]
    keys = [(c.prefix_k, c.prefix_v) for c in caches]
    for s in range(1, k):
        cos, sin = drafter.rope(torch.tensor([n - 1 + s]), hidden)
        embeds = drafter.embed_tokens(ids)
        h = hidden
        for li, layer in enumerate(drafter.layers):
            x, residual = layer.attn_input(h, embeds)
            q, kk, vv = layer.self_attn.project(x, cos, sin)
            ks, vs = (torch.cat([old, new], 1) for old, new in zip(keys[li], (kk, vv), strict=True))
            keys[li] = (ks, vs)
            h = layer.finish(residual + attend(layer.self_attn, q, ks, vs))
        z = drafter.norm(h)
        ids = drafter.to_target_ids(drafter.lm_head(z).argmax(-1))
        drafts.append(int(ids))
        hidden = drafter.feedback(h, z)
    return drafts


def attend(attn, q, keys, values) -> torch.Tensor:
    """Plain attention of queries [B, T, h, d] to an explicit key list (all in the past)."""
    g = attn.n_heads // attn.n_kv
    scores = torch.einsum("bthd,bshd->bhts", q, keys.repeat_interleave(g, dim=-2)).float() * attn.scale
    out = torch.einsum("bhts,bshd->bthd", scores.softmax(-1).to(q.dtype), values.repeat_interleave(g, dim=-2))
    return attn.o_proj(out.reshape(q.shape[0], q.shape[1], -1))
