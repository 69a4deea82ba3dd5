"""Acceptance from chain drafts against the target's greedy continuation.

From every slot t the drafter proposes K tokens; the chain's accepted length is the number of
leading drafts equal to the target's tokens. Two views are reported:

* **decoding path**: the chains a real greedy speculative decoder visits (start after the prompt,
  then jump by accepted + 1), with a round whenever fewer than N tokens have been produced, as in
  vLLM. This is what vLLM's counters measure, and `speculative_decode` below reproduces it.
* **all positions**: every slot of the continuation; more samples, same drafter.

Mean acceptance length is counted as vLLM counts it: 1 + accepted / drafts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


def accepted_lengths(drafts: torch.Tensor, tokens: torch.Tensor, first: int, last: int, start: int = 0) -> list[int]:
    """drafts [K, T - start]: depth i from slot t (column t - start) predicts tokens[t + i + 2].
    Slots first..last inclusive."""
    k = drafts.shape[0]
    if last < first:
        return []
    slots = torch.arange(first, last + 1, device=drafts.device)
    truth = torch.stack([tokens[slots + i + 2] for i in range(k)])
    matches = drafts[:, slots - start] == truth.to(drafts.device)
    return matches.long().cumprod(0).sum(0).tolist()


def decoding_path(accepted: list[int], max_new_tokens: int) -> list[int]:
    """The accepted lengths a greedy speculative decoder sees. accepted[j] belongs to the round
    started when j + 1 tokens had been produced; rounds run while fewer than max_new_tokens exist."""
    path, produced = [], 1
    while produced < max_new_tokens and produced - 1 < len(accepted):
        a = accepted[produced - 1]
        path.append(a)
        produced += a + 1
    return path


@dataclass
class Tally:
    k: int
    accepted: list[int] = field(default_factory=list)

    def add(self, lengths: list[int]) -> None:
        self.accepted += lengths

    @property
    def num_drafts(self) -> int:
        return len(self.accepted)

    @property
    def num_accepted(self) -> int:
        return sum(self.accepted)

    def per_position(self) -> list[float]:
        n = max(1, self.num_drafts)
        return [sum(a > i for a in self.accepted) / n for i in range(self.k)]

    def mean_acceptance_length(self) -> float:
        return 1.0 + self.num_accepted / max(1, self.num_drafts)

    def histogram(self) -> list[int]:
        return [sum(a == j for a in self.accepted) for j in range(self.k + 1)]

    def summary(self) -> dict:
        return {"acceptance_per_position": self.per_position(), "mean_acceptance_length": self.mean_acceptance_length(),
                "num_drafts": self.num_drafts, "num_accepted": self.num_accepted, "histogram": self.histogram()}


# --------------------------------------------------------------------------------------------
# The reference: a plain sequential greedy speculative-decoding loop.


@torch.inference_mode()
def speculative_decode(target_forward, drafter, prompt: list[int], max_new_tokens: int, k: int):
    """Greedy speculative decoding, one round at a time, recomputing everything (slow and obvious).

    `target_forward(tokens[T]) -> (greedy next ids [T], aux states list of [T, H_t])`.
    Each round: the drafter ingests every slot the target has features for, proposes k tokens
    from the last one (its own KV cache for the deeper steps), the target verifies them and the
    longest matching prefix plus the target's own next token is kept, while fewer than
    max_new_tokens exist. Returns (the first max_new_tokens new tokens, accepted length per round).
    """
    tokens = list(prompt)
    nxt, aux = target_forward(torch.tensor(tokens))
    tokens.append(int(nxt[-1]))
    rounds = []
    while len(tokens) - len(prompt) < max_new_tokens:
        n = len(tokens) - 1  # the target has features for slots 0..n-1; token n is its newest output
        t = torch.tensor(tokens)
        drafts = _draft_from_last_slot(drafter, [a[:n] for a in aux], t[1:n + 1], k)
        nxt, aux = target_forward(torch.tensor(tokens + drafts))
        verified = nxt[n:].tolist()  # verified[i] = the target's token after draft i (or after token n)
        a = 0
        while a < k and drafts[a] == verified[a]:
            a += 1
        tokens += drafts[:a] + [verified[a]]
        rounds.append(a)
        nxt, aux = target_forward(torch.tensor(tokens[:-1]))  # features of every kept position
    return tokens[len(prompt):len(prompt) + max_new_tokens], rounds


def _draft_from_last_slot(drafter, aux, next_tokens, k) -> list[int]:
    """Depth 1 over all slots (the cache), then k-1 steps from the last slot with an explicit KV list."""
    from .drafter import LayerCache

    n = next_tokens.shape[0]
    positions = torch.arange(n)
    caches = [LayerCache() for _ in drafter.layers]
    h2, z = drafter.step(drafter.combine([a[None] for a in aux]), next_tokens[None], positions, caches)
    last = slice(n - 1, n)
    ids = drafter.to_target_ids(drafter.lm_head(z[:, last]).argmax(-1))
    drafts = [int(ids)]
    hidden = drafter.feedback(h2, z)[:, last]
    keys = [(c.prefix_k, c.prefix_v) for c in caches]
    for s in range(1, k):
        pos = torch.tensor([n - 1 + s])
        cos, sin = drafter.rope(pos, hidden)
        embeds = drafter.embed_tokens(ids)
        h = hidden
        for li, layer in enumerate(drafter.layers):
            x, residual = layer.attn_input(h, embeds)
            q, kk, vv = layer.self_attn.project(x, cos, sin)
            ks, vs = keys[li]
            ks, vs = torch.cat([ks, kk], 1), torch.cat([vs, vv], 1)
            keys[li] = (ks, vs)
            h = layer.finish(residual + layer.self_attn.attend_cached(q, ks, vs))
        z = drafter.norm(h)
        ids = drafter.to_target_ids(drafter.lm_head(z).argmax(-1))
        drafts.append(int(ids))
        hidden = drafter.feedback(h, z)
    return drafts
