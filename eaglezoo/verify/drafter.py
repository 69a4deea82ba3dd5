"""The EAGLE-3 / EAGLE 3.1 drafter as one readable `torch.nn.Module` (docs/formats.md#forward-pass).

State-dict keys are the canonical tensor names (`layers.{i}.*`, `fc.weight`, `fc_norm.{j}.weight`,
`input_norm.weight`, `norm.weight`, `lm_head.weight`, `embed_tokens.weight`, `d2t`, `t2d`).

Chain drafting is batched over every position of a sequence at once (`draft_chains`): depth 1 is
an ordinary causal pass over the target's features; at depth s >= 2 the chain started at slot t
attends to the depth-1 keys of slots <= t plus its own keys from depths 2..s. That is exactly the
drafter's KV cache in a real speculative-decoding round, so the target is never re-run per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.activations import ACT2FN
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from ..checkpoint.spec import DrafterSpec, effective_rope

# fp32 attention scores held at once: queries are taken in chunks of rows under this bound, so peak
# memory grows with T, never T * T (16 MiB per chunk, cache-sized, which is also faster than one big
# block; the bound moves results by fp32 rounding only).
SCORES_BUDGET = 1 << 22


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


@dataclass
class LayerCache:
    """Keys/values of one layer: depth-1 keys for every slot, then one key per chain per deeper step."""

    slots: torch.Tensor | None = None  # [1 or B, L]: the slot chain i of each row starts from (deeper steps)
    reach: int = 0  # the largest first slot: chain i never looks past slot reach + i
    prefix_k: torch.Tensor | None = None  # [B, T, n_kv, d]
    prefix_v: torch.Tensor | None = None
    extra_k: list[torch.Tensor] = field(default_factory=list)  # each [B, L, n_kv, d], one per chain
    extra_v: list[torch.Tensor] = field(default_factory=list)


class Attention(nn.Module):
    def __init__(self, spec: DrafterSpec, in_width: int):
        super().__init__()
        cfg = spec.layer_config
        self.n_heads = int(cfg["num_attention_heads"])
        self.n_kv = int(cfg.get("num_key_value_heads") or self.n_heads)
        self.head_dim = spec.head_dim
        bias = bool(cfg.get("attention_bias", False))
        self.q_proj = nn.Linear(in_width, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(in_width, self.n_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(in_width, self.n_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, spec.hidden_size, bias=False)
        if spec.arch == "qwen3":
            eps = float(cfg.get("rms_norm_eps", 1e-6))
            self.q_norm = RMSNorm(self.head_dim, eps)
            self.k_norm = RMSNorm(self.head_dim, eps)
        self.scale = self.head_dim**-0.5

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x [B, T, in] -> q [B, T, n_h, d], k/v [B, T, n_kv, d], rotary applied."""
        b, t = x.shape[:2]
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        # apply_rotary_pos_emb works on [B, H, T, d] with cos/sin [B, T, d].
        q, k = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        return q.transpose(1, 2), k.transpose(1, 2), v

    def forward(self, x, cos, sin, cache: LayerCache) -> torch.Tensor:
        q, k, v = self.project(x, cos, sin)
        if cache.prefix_k is None:  # depth 1: every slot, causal over the slots themselves
            cache.prefix_k, cache.prefix_v = k, v
            slots, reach = torch.arange(k.shape[1], device=q.device)[None], 0
        else:
            cache.extra_k.append(k)
            cache.extra_v.append(v)
            slots, reach = cache.slots, cache.reach
        b, t = q.shape[:2]
        rows = max(1, SCORES_BUDGET // (b * self.n_heads * cache.prefix_k.shape[1]))
        # Last rows first: each chunk's scores then fit in the blocks the larger chunk before it freed,
        # so the allocator's heap does not grow chunk by chunk.
        pieces = [
            self.attend_rows(q, cache, slots[:, a:e], reach + e, a, e)
            for a, e in ((a, min(a + rows, t)) for a in reversed(range(0, t, rows)))
        ]
        return self.o_proj(torch.cat(pieces[::-1], dim=1).reshape(b, t, -1))

    def attend_rows(self, q, cache: LayerCache, slots: torch.Tensor, end: int, a: int, e: int) -> torch.Tensor:
        """Query rows a..e-1 [B, e-a, h, d], from `slots` [1 or B, e-a] (all below `end`): each attends
        to the depth-1 keys of slots up to its own and to its own deeper keys, under one softmax."""
        g = self.n_heads // self.n_kv
        qg = q[:, a:e].unflatten(2, (self.n_kv, g))  # [B, C, kv, g, d]: head i reads kv head i // g
        scores = torch.einsum("bckgd,bskd->bkgcs", qg, cache.prefix_k[:, :end]).float() * self.scale
        later = torch.arange(end, device=q.device) > slots[..., None]  # [1 or B, C, end]: key after query
        scores = scores.masked_fill(later[:, None, None], float("-inf"))
        if cache.extra_k:
            ek = torch.stack([x[:, a:e] for x in cache.extra_k], 2)  # [B, C, R, kv, d]
            scores = torch.cat([scores, torch.einsum("bckgd,bcrkd->bkgcr", qg, ek).float() * self.scale], dim=-1)
        probs = scores.softmax(-1).to(q.dtype)
        out = torch.einsum("bkgcs,bskd->bckgd", probs[..., :end], cache.prefix_v[:, :end])
        if cache.extra_k:
            ev = torch.stack([x[:, a:e] for x in cache.extra_v], 2)
            out = out + torch.einsum("bkgcr,bcrkd->bckgd", probs[..., end:], ev)
        return out.flatten(2, 3)


class MLP(nn.Module):
    def __init__(self, spec: DrafterSpec):
        super().__init__()
        cfg = spec.layer_config
        inter = int(cfg["intermediate_size"])
        bias = bool(cfg.get("mlp_bias", False))
        self.gate_proj = nn.Linear(spec.hidden_size, inter, bias=bias)
        self.up_proj = nn.Linear(spec.hidden_size, inter, bias=bias)
        self.down_proj = nn.Linear(inter, spec.hidden_size, bias=bias)
        self.act = ACT2FN[cfg.get("hidden_act", "silu")]

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """Layer 0 takes concat(input_layernorm(embed), hidden_norm(hidden)) (width 2H); later layers are plain."""

    def __init__(self, spec: DrafterSpec, first: bool):
        super().__init__()
        h = spec.hidden_size
        eps = float(spec.layer_config.get("rms_norm_eps", 1e-6))
        self.first = first
        self.norm_before_residual = spec.norm_before_residual
        self.input_layernorm = RMSNorm(h, eps)
        if first:
            self.hidden_norm = RMSNorm(h, eps)
        self.self_attn = Attention(spec, 2 * h if first else h)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.mlp = MLP(spec)

    def attn_input(self, hidden, embeds):
        """Returns (attention input, residual)."""
        if not self.first:
            return self.input_layernorm(hidden), hidden
        normed = self.hidden_norm(hidden)
        residual = normed if self.norm_before_residual else hidden
        return torch.cat([self.input_layernorm(embeds), normed], dim=-1), residual

    def finish(self, h):
        return h + self.mlp(self.post_attention_layernorm(h))

    def forward(self, hidden, embeds, cos, sin, cache: LayerCache):
        x, residual = self.attn_input(hidden, embeds)
        return self.finish(residual + self.self_attn(x, cos, sin, cache))


@dataclass
class Chains:
    """Result of drafting K steps from L slots of a sequence (chain i of a row: its start + i)."""

    draft_ids: torch.Tensor  # [K, (B,) L] target-vocabulary ids
    feedback_sq: torch.Tensor  # [K, (B,) L] mean square of the hidden state fed to the next depth
    logits: list[torch.Tensor] | None = None  # per depth [(B,) L, V_d], when asked for


class Eagle3Drafter(nn.Module):
    def __init__(self, spec: DrafterSpec):
        super().__init__()
        if spec.arch == "mla":
            raise ValueError("MLA (Kimi/DeepSeek) drafters can be converted and linted, but not run by eaglezoo")
        self.spec = spec
        cfg = spec.layer_config
        eps = float(cfg.get("rms_norm_eps", 1e-6))
        k, ht, h = spec.num_aux, spec.target_hidden_size, spec.hidden_size
        self.embed_tokens = nn.Embedding(spec.vocab_size, h)
        if spec.norm_before_fc:
            self.input_norm = RMSNorm(k * ht, eps)
        if spec.fc_norm:
            self.fc_norm = nn.ModuleList(RMSNorm(ht, eps) for _ in range(k))
        self.fc = nn.Linear(k * ht, h, bias=False)
        self.layers = nn.ModuleList(DecoderLayer(spec, first=i == 0) for i in range(spec.num_layers))
        self.norm = RMSNorm(h, eps)
        self.lm_head = nn.Linear(h, spec.draft_vocab_size, bias=False)
        if spec.has_vocab_map:
            self.register_buffer("d2t", torch.zeros(spec.draft_vocab_size, dtype=torch.long))
            self.register_buffer("t2d", torch.zeros(spec.vocab_size, dtype=torch.bool))
        self.rotary = LlamaRotaryEmbedding(config=rope_config(spec))

    # -- pieces -------------------------------------------------------------------------------
    def combine(self, aux: list[torch.Tensor]) -> torch.Tensor:
        """k captured target states [T, H_t] each -> fc input -> [T, H]."""
        if self.spec.fc_norm:
            aux = [norm(a) for norm, a in zip(self.fc_norm, aux, strict=True)]
        u = torch.cat(aux, dim=-1)
        if self.spec.norm_before_fc:
            u = self.input_norm(u)
        return self.fc(u)

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids] if self.spec.has_vocab_map else draft_ids

    def rope(self, positions: torch.Tensor, like: torch.Tensor):
        """positions [T], or [1 or B, T] (one row each)."""
        return self.rotary(like, positions if positions.dim() == 2 else positions[None])

    def step(self, hidden, tokens, positions, caches: list[LayerCache]):
        """One draft step for every slot: returns (pre-norm h2, post-norm z)."""
        cos, sin = self.rope(positions, hidden)
        embeds = self.embed_tokens(tokens)
        h = hidden
        for layer, cache in zip(self.layers, caches, strict=True):
            h = layer(h, embeds, cos, sin, cache)
        return h, self.norm(h)

    def feedback(self, h2, z):
        return z if self.spec.norm_output else h2

    # -- chains ------------------------------------------------------------------------------
    def draft_chains(
        self,
        aux: list[torch.Tensor],
        next_tokens: torch.Tensor,
        depth: int,
        teacher_tokens: torch.Tensor | None = None,
        keep_logits: bool = False,
        start: int | torch.Tensor = 0,
    ) -> Chains:
        """Draft `depth` tokens from the slots t >= start of a sequence (or a batch [B, T] of them).

        aux[j][t] is the j-th captured target state at position t; next_tokens[t] is token t+1.
        Depth s (1-based) from slot t predicts token t+s+1. With teacher_tokens ([depth-1, (B,) T]:
        row s-1 holds token t+s+1) deeper steps take the true tokens (training); otherwise the
        drafter's own predictions, as in real chain drafting. `start` (one for all rows, or one per
        row [B]) gives every row L = T - max(start) chains, from its start on. Depth 1 runs over
        every slot (its keys are what every chain attends to); deeper steps only for the chains.
        """
        batched = next_tokens.dim() == 2
        if not batched:
            aux, next_tokens = [a[None] for a in aux], next_tokens[None]
            if teacher_tokens is not None:
                teacher_tokens = teacher_tokens[:, None]
        t, device = next_tokens.shape[1], next_tokens.device
        starts = torch.as_tensor(start, device=device).reshape(-1, 1)
        reach = int(starts.max())
        slots = starts + torch.arange(t - reach, device=device)  # [1 or B, L]
        caches = [LayerCache(slots, reach) for _ in self.layers]
        hidden, tokens, positions = self.combine(aux), next_tokens, torch.arange(t, device=device)[None]
        drafts, sq, logits_out = [], [], []
        for s in range(depth):
            h2, z = self.step(hidden, tokens, positions + s, caches)
            if s == 0:  # depth 1 ran every slot for its keys; the chains go on from theirs
                h2, z, positions = at_slots(h2, slots), at_slots(z, slots), slots
            logits = self.lm_head(z)
            ids = self.to_target_ids(logits.argmax(-1))
            drafts.append(ids if batched else ids[0])
            hidden = self.feedback(h2, z)
            per_slot = hidden.detach().float().pow(2).mean(-1)
            sq.append(per_slot if batched else per_slot[0])
            if keep_logits:
                logits_out.append(logits if batched else logits[0])
            tokens = at_slots(teacher_tokens[s], slots) if teacher_tokens is not None and s < depth - 1 else ids
        return Chains(torch.stack(drafts), torch.stack(sq), logits_out if keep_logits else None)


def at_slots(x: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """x [B, T, ...] at each row's slots [1 or B, L] -> [B, L, ...]."""
    rows = torch.arange(x.shape[0], device=x.device)[:, None]
    return x[rows, slots.expand(x.shape[0], -1)]


def rope_config(spec: DrafterSpec) -> LlamaConfig:
    """A LlamaConfig carrying only what rotary embeddings need (theta 10000 when absent,
    docs/formats.md#rope-theta-default)."""
    cfg = spec.layer_config
    return LlamaConfig(
        hidden_size=spec.hidden_size,
        num_attention_heads=int(cfg["num_attention_heads"]),
        head_dim=spec.head_dim,
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 2048),
        rope_parameters={"rope_type": "default", **effective_rope(cfg)},
    )


def build_drafter(
    spec: DrafterSpec,
    state: dict[str, torch.Tensor],
    embed: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> Eagle3Drafter:
    """A drafter with its weights; `embed` (the target's table) fills in a missing `embed_tokens`."""
    with torch.device("meta"):
        model = Eagle3Drafter(spec)
    model = model.to_empty(device=device)
    state = dict(state)
    if "embed_tokens.weight" not in state:
        if embed is None:
            raise ValueError("drafter has no embed_tokens and no target embedding was given")
        state["embed_tokens.weight"] = embed
    expected = set(model.state_dict())
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        raise ValueError(
            f"drafter tensors do not fit its config: missing {sorted(missing)}, unexpected {sorted(unexpected)}"
        )
    model.load_state_dict(
        {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}, strict=True, assign=False
    )
    model = model.to(dtype)
    model.rotary = LlamaRotaryEmbedding(config=rope_config(spec)).to(device)  # inv_freq stays fp32
    return model.eval()
