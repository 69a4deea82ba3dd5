"""DFlash: a block of mask tokens drafted in one non-causal pass over the target's fused states
(docs/formats.md#families), as vLLM 0.32 runs it.

A round whose last verified slot is t (vLLM 0.32, `v1/spec_decode/dflash.py:111-211` and the input kernel
`v1/spec_decode/utils.py:639-743`):

* context: every verified slot 0..t, its aux states concatenated and put through `fc` (no other norm:
  `model_executor/models/qwen3_dflash.py:864-884`); each layer's context keys and values are that layer's k/v
  projections of `hidden_norm(context)`, k normed by the layer's `k_norm` and rotated at the slot's own position
  (`qwen3_dflash.py:599-700`). The context never runs through the layers.
* queries: the block `[token t+1 (the bonus), mask_token_id x K]` at positions t+1..t+K+1, embedded with the
  target's table (`qwen3_dflash.py:515-521`) and run through plain Qwen3 layers (`:390-409`, `:728-747`;
  q/k norms always, `o_proj` with the attention bias, `:229-321`); every query attends to all the context
  keys and to every key of its block (non-causal unless the config says causal: `:86-105`, and
  `dflash.py:194-209`, `seq_lens` = context + block).
* drafts: the K mask positions, read through the target's `lm_head` (`qwen3_dflash.py:790-851`): mask j at
  position t+1+j predicts token t+1+j itself (`utils.py:736-743`, the sampled indices skip the bonus slot).

So draft j from slot t predicts token t+j+1, as EAGLE-3's depth j does, and `draft_chains` returns the same
`Chains`. Unlike EAGLE-3, a shorter block is not a prefix of a longer one (masks attend to later masks, and the
block's length changes every query): acceptance at another K needs its own run.

A drafter trained sampling its anchor (`samples_anchor`: DSpark's layout, the block `[token t+1, mask x K-1]`, each
of its K positions a draft, the anchor predicting t+2) is run so, as llama.cpp runs it
(`common/speculative.cpp:1046-1047`); vLLM 0.32 does not (its V1 input kernel always reads the anchor as the
bonus, `v1/spec_decode/utils.py:731-742`; its V2 runner refuses the key,
`v1/worker/gpu/spec_decode/dflash/speculator.py:80-85`).

What eaglezoo does not run is refused by name: sliding-window layers, attention sinks, a value scale, the
interleaved rotary layout, no aux states; a `mask_embedding.pt` file beside the weights is not read.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from ..checkpoint.spec import DrafterSpec, effective_rope
from .drafter import MLP, SCORES_BUDGET, Chains, RMSNorm, at_slots

# vLLM's DFlash layers default rope_theta to 1e6 when the config has none (qwen3_dflash.py:337).
DEFAULT_THETA = 1000000.0
UNSUPPORTED = {
    "use_swa": "sliding-window layers",
    "attention_sink_bias": "attention sinks",
    "attention_value_scale": "a value scale",
    "swa_window_size": "sliding-window layers",
}


class BlockAttention(nn.Module):
    """Qwen3 attention of one DFlash layer; keys come from the context and from the block itself."""

    def __init__(self, spec: DrafterSpec):
        super().__init__()
        cfg = spec.layer_config
        self.n_heads = int(cfg["num_attention_heads"])
        self.n_kv = int(cfg.get("num_key_value_heads") or self.n_heads)
        self.head_dim = spec.head_dim
        bias = bool(cfg.get("attention_bias", False))
        h = spec.hidden_size
        self.q_proj = nn.Linear(h, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, h, bias=bias)
        eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.q_norm = RMSNorm(self.head_dim, eps)
        self.k_norm = RMSNorm(self.head_dim, eps)
        self.scale = self.head_dim**-0.5

    def keys(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x [B, N, H] -> k, v [B, N, n_kv, d], k normed and rotated."""
        b, n = x.shape[:2]
        k = self.k_norm(self.k_proj(x).view(b, n, self.n_kv, self.head_dim))
        v = self.v_proj(x).view(b, n, self.n_kv, self.head_dim)
        return rotate(k, cos, sin), v

    def forward(
        self, x, cos, sin, context: tuple[torch.Tensor, torch.Tensor], slots: torch.Tensor, causal: bool
    ) -> torch.Tensor:
        """x [B, L, S, H]: L blocks of S queries; block i sees the context keys of slots <= slots[:, i]."""
        b, nb, s = x.shape[:3]
        flat = x.reshape(b, nb * s, -1)
        q = self.q_norm(self.q_proj(flat).view(b, nb * s, self.n_heads, self.head_dim))
        q = rotate(q, cos, sin).view(b, nb, s, self.n_kv, self.n_heads // self.n_kv, self.head_dim)
        k, v = self.keys(flat, cos, sin)
        k, v = k.view(b, nb, s, self.n_kv, -1), v.view(b, nb, s, self.n_kv, -1)
        rows = max(1, SCORES_BUDGET // (b * s * self.n_heads * context[0].shape[1]))
        out = torch.cat(
            [
                self.attend(q[:, a:e], k[:, a:e], v[:, a:e], context, slots[:, a:e], causal)
                for a, e in ((a, min(a + rows, nb)) for a in range(0, nb, rows))
            ],
            dim=1,
        )
        return self.o_proj(out.reshape(b, nb, s, -1))

    def attend(self, q, k, v, context, slots, causal: bool) -> torch.Tensor:
        """q [B, C, S, kv, g, d] over the context keys up to each block's slot and the block's own keys."""
        ck, cv = context
        end = int(slots.max()) + 1
        scores = torch.einsum("bcskgd,btkd->bkgcst", q, ck[:, :end]).float() * self.scale
        later = torch.arange(end, device=q.device) > slots[..., None]  # [1 or B, C, end]
        scores = scores.masked_fill(later[:, None, None, :, None], float("-inf"))
        own = torch.einsum("bcskgd,bcrkd->bkgcsr", q, k).float() * self.scale
        if causal:
            n = q.shape[2]
            own = own.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        probs = torch.cat([scores, own], dim=-1).softmax(-1).to(q.dtype)
        out = torch.einsum("bkgcst,btkd->bcskgd", probs[..., :end], cv[:, :end])
        out = out + torch.einsum("bkgcsr,bcrkd->bcskgd", probs[..., end:], v)
        return out.flatten(3, 4)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, N, heads, d] rotated at cos/sin [B, N, d] (the neox layout vLLM uses by default)."""
    out, _ = apply_rotary_pos_emb(x.transpose(1, 2), x.transpose(1, 2), cos, sin)
    return out.transpose(1, 2)


class BlockLayer(nn.Module):
    def __init__(self, spec: DrafterSpec, causal: bool):
        super().__init__()
        eps = float(spec.layer_config.get("rms_norm_eps", 1e-6))
        self.causal = causal
        self.input_layernorm = RMSNorm(spec.hidden_size, eps)
        self.self_attn = BlockAttention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, eps)
        self.mlp = MLP(spec)

    def forward(self, h, cos, sin, context, slots):
        h = h + self.self_attn(self.input_layernorm(h), cos, sin, context, slots, self.causal)
        return h + self.mlp(self.post_attention_layernorm(h))


class DFlashDrafter(nn.Module):
    def __init__(self, spec: DrafterSpec, mask_token_id: int, causal: list[bool]):
        super().__init__()
        self.spec, self.mask_token_id = spec, mask_token_id
        self.anchor = spec.family == "dflash" and samples_anchor(spec)
        h = spec.hidden_size
        eps = float(spec.layer_config.get("rms_norm_eps", 1e-6))
        self.embed_tokens = nn.Embedding(spec.vocab_size, h)
        self.fc = nn.Linear(spec.num_aux * spec.target_hidden_size, h, bias=False)
        self.hidden_norm = RMSNorm(h, eps)
        self.layers = nn.ModuleList(BlockLayer(spec, c) for c in causal)
        self.norm = RMSNorm(h, eps)
        self.lm_head = nn.Linear(h, spec.draft_vocab_size, bias=False)
        if spec.has_vocab_map:
            self.register_buffer("d2t", torch.zeros(spec.draft_vocab_size, dtype=torch.long))
            self.register_buffer("t2d", torch.zeros(spec.vocab_size, dtype=torch.bool))
        self.rotary = LlamaRotaryEmbedding(config=rope_config(spec))

    def context(self, aux: list[torch.Tensor]) -> torch.Tensor:
        """The fused target states [B, T, H] every layer's context keys are projected from."""
        return self.hidden_norm(self.fc(torch.cat(aux, dim=-1)))

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids] if self.spec.has_vocab_map else draft_ids

    def draft_chains(
        self,
        aux: list[torch.Tensor],
        next_tokens: torch.Tensor,
        depth: int,
        keep_logits: bool = False,
        start: int | torch.Tensor = 0,
    ) -> Chains:
        """As `Eagle3Drafter.draft_chains`: from every slot t >= start, one block of `depth` masks after token t+1.
        `feedback_sq` holds the mean square of each mask position's final (pre-norm) state: nothing is fed back."""
        batched = next_tokens.dim() == 2
        if not batched:
            aux, next_tokens = [a[None] for a in aux], next_tokens[None]
        b, t, device = *next_tokens.shape, next_tokens.device
        starts = torch.as_tensor(start, device=device).reshape(-1, 1)
        slots = starts + torch.arange(t - int(starts.max()), device=device)  # [1 or B, L]
        fused = self.context(aux)
        cos, sin = self.rotary(fused, torch.arange(t, device=device)[None].expand(b, -1))
        contexts = [layer.self_attn.keys(fused, cos, sin) for layer in self.layers]
        bonus = at_slots(next_tokens, slots)
        block = self.block_tokens(bonus, depth)  # [B, L, K + 1] (DSpark sampling from the anchor: K)
        positions = (slots[..., None] + 1 + torch.arange(block.shape[-1], device=device)).expand(b, -1, -1)
        cos, sin = self.rotary(fused, positions.reshape(b, -1))
        h = self.embed_tokens(block)
        for layer, context in zip(self.layers, contexts, strict=True):
            h = layer(h, cos, sin, context, slots)
        h = h[:, :, block.shape[-1] - depth :]
        logits = self.head(self.lm_head(self.norm(h)), bonus)  # [B, L, K, V_d]
        ids = self.to_target_ids(logits.argmax(-1)).permute(2, 0, 1)
        sq = h.detach().float().pow(2).mean(-1).permute(2, 0, 1)
        per_depth = list(logits.permute(2, 0, 1, 3)) if keep_logits else None
        if not batched:
            ids, sq = ids[:, 0], sq[:, 0]
            per_depth = [x[0] for x in per_depth] if per_depth is not None else None
        return Chains(ids, sq, per_depth)

    def head(self, logits: torch.Tensor, bonus: torch.Tensor) -> torch.Tensor:
        """The draft logits [B, L, K, V_d] as read (DSpark adds its Markov bias here)."""
        return logits

    def block_tokens(self, bonus: torch.Tensor, depth: int) -> torch.Tensor:
        """[B, L] bonus tokens -> [B, L, depth + 1]: each followed by `depth` mask tokens (`depth - 1` where the
        anchor is sampled too: every slot of the block is then a draft)."""
        return F.pad(bonus[..., None], (0, depth - 1 if self.anchor else depth), value=self.mask_token_id)


# Where a DFlash config states that its anchor is sampled: the family field (speculators', a converted copy's top
# level), else z-lab's `dflash_config`, the key vLLM's V2 runner reads (dflash/speculator.py:77-80).
NESTED_ANCHOR = "dflash_config.sample_from_anchor"


def samples_anchor(spec: DrafterSpec) -> bool:
    """Whether the drafter's block samples its anchor (trained so), as its config states; false where unstated."""
    f = spec.family_fields
    if f is None:
        return False
    return bool(f.sample_from_anchor if f.sample_from_anchor is not None else f.extra.get(NESTED_ANCHOR))


def as_vllm_runs(spec: DrafterSpec) -> DrafterSpec:
    """The DFlash spec as vLLM 0.32 runs it: the anchor the bonus token, whatever the config says."""
    f = spec.family_fields
    if spec.family != "dflash" or f is None or not samples_anchor(spec):
        return spec
    fields = f.model_copy(
        update={"sample_from_anchor": False, "extra": {k: v for k, v in f.extra.items() if k != NESTED_ANCHOR}}
    )
    return spec.model_copy(update={"family_fields": fields})


def rope_config(spec: DrafterSpec) -> LlamaConfig:
    cfg = dict(spec.layer_config)
    if not cfg.get("rope_theta") and not (cfg.get("rope_parameters") or {}).get("rope_theta"):
        cfg["rope_theta"] = DEFAULT_THETA
    return LlamaConfig(
        hidden_size=spec.hidden_size,
        num_attention_heads=int(cfg["num_attention_heads"]),
        head_dim=spec.head_dim,
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 2048),
        rope_parameters={"rope_type": "default", **effective_rope(cfg)},
    )


def layer_causality(spec: DrafterSpec) -> list[bool]:
    """Each layer's causality as vLLM resolves it (qwen3_dflash.py:86-180); what eaglezoo does not run refused."""
    cfg, extra = spec.layer_config, spec.family_fields.extra if spec.family_fields else {}
    stated = {k: extra.get(f"dflash_config.{k}", cfg.get(k)) for k in UNSUPPORTED}
    for key, what in UNSUPPORTED.items():
        if stated[key] not in (None, False):
            raise ValueError(f"this DFlash drafter uses {what} ({key}), which eaglezoo's native engine does not run")
    if cfg.get("is_neox_style") is False:
        raise ValueError("this DFlash drafter uses the interleaved rotary layout, which eaglezoo does not run")
    if extra.get("dflash_config.use_aux_hidden_state", cfg.get("use_aux_hidden_state")) is False:
        raise ValueError("this DFlash drafter reads no aux states, which eaglezoo does not run")
    if spec.family_fields and spec.family_fields.sliding_window_non_causal:
        raise ValueError(
            "this DFlash drafter sets sliding_window_non_causal, which eaglezoo's native engine does not run"
        )
    layer_types = cfg.get("layer_types") or []
    if "sliding_attention" in layer_types:
        raise ValueError("this DFlash drafter has sliding-window layers, which eaglezoo's native engine does not run")
    forced = cfg.get("is_causal", extra.get("dflash_config.causal"))
    return [bool(forced)] * spec.num_layers


def build_dflash(  # noqa: PLR0913 - the target's two borrowed tensors and the module class, each named
    spec: DrafterSpec,
    state: dict[str, torch.Tensor],
    embed: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    lm_head: torch.Tensor | None = None,
    cls: type[DFlashDrafter] = DFlashDrafter,
) -> DFlashDrafter:
    """A DFlash drafter (or `cls`, DSpark's) with its weights; the target's `embed` and `lm_head` fill in those it
    borrows."""
    fields = spec.family_fields
    if fields is None or fields.mask_token_id is None:
        raise ValueError("a DFlash drafter needs mask_token_id (dflash_config.mask_token_id) in its config")
    if not 0 <= fields.mask_token_id < spec.vocab_size:
        raise ValueError(f"mask_token_id {fields.mask_token_id} is outside the vocabulary (0..{spec.vocab_size - 1})")
    with torch.device("meta"):
        model = cls(spec, fields.mask_token_id, layer_causality(spec))
    model = model.to_empty(device=device)
    state = {k: v for k, v in state.items() if k != "verifier_norm.weight"}  # speculators' copy of the target's norm
    for name, borrowed in (("embed_tokens.weight", embed), ("lm_head.weight", lm_head)):
        if name not in state:
            if borrowed is None:
                raise ValueError(f"the DFlash drafter has no {name.split('.')[0]} and the target's was not given")
            state[name] = borrowed
    expected = set(model.state_dict())
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        raise ValueError(
            f"drafter tensors do not fit its config: missing {sorted(missing)}, unexpected {sorted(unexpected)}"
        )
    model.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}, strict=True)
    model = model.to(dtype)
    model.rotary = LlamaRotaryEmbedding(config=rope_config(spec)).to(device)  # inv_freq stays fp32
    return model.eval()
