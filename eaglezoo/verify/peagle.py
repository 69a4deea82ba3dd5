"""P-EAGLE: EAGLE-3 weights drafting K tokens in one parallel pass (docs/formats.md#p-eagle), as vLLM 0.32 runs it.

vLLM serves P-EAGLE as `method: eagle3` with `parallel_drafting: true`. One drafter pass per round takes the
verified tokens (each with the target's fused aux state, as EAGLE-3), then the bonus token, then K - 1 slots whose
input token is the config's `mask_token_id` and whose hidden state is the checkpoint's `mask_hidden` (the width of
the concatenated aux states) put through the same norms and `fc` as a real one; positions run on by one, attention
stays causal, and the K drafts are read at the bonus slot and the K - 1 mask slots (vLLM 0.32:
`v1/spec_decode/utils.py:499-535`, the expand kernel's bonus and parallel-draft regions, token `parallel_drafting_
token_id` and position `start_pos + j`; `v1/spec_decode/llm_base_proposer.py:921-930`, `mask_hidden` swapped in at
the masked slots; `:1401-1414`, `combine_hidden_states(mask_hidden)` computed once; `:629-637`, one forward pass
and no loop; `model_executor/models/llama_eagle3.py:347-353,431-455`, the `mask_hidden` buffer [1, fc input] that
parallel drafting requires).

So the chain from slot t is EAGLE-3's chain with one change: depths 2..K take the mask token and the projected
mask state instead of the drafter's own token and state. Depth s still attends to the depth-1 keys of slots <= t
and to the chain's own depths < s, which is `drafter.LayerCache`; the pieces are the EAGLE-3 module's.
"""

from __future__ import annotations

import torch
from torch import nn

from ..checkpoint.spec import DrafterSpec
from .drafter import Chains, Eagle3Drafter, LayerCache, at_slots, build_drafter

MASK_HIDDEN = "mask_hidden"


class PeagleDrafter(nn.Module):
    """An EAGLE-3 drafter, its learned `mask_hidden` and the mask token id."""

    def __init__(self, eagle: Eagle3Drafter, mask_hidden: torch.Tensor, mask_token_id: int):
        super().__init__()
        self.eagle = eagle
        self.spec = eagle.spec
        self.mask_hidden = nn.Parameter(mask_hidden.reshape(-1).clone(), requires_grad=False)
        self.mask_token_id = mask_token_id

    @property
    def fc(self) -> nn.Linear:
        return self.eagle.fc

    def mask_state(self) -> torch.Tensor:
        """`mask_hidden` through the aux norms and fc, as a real fused state: [H]."""
        return self.eagle.combine(list(self.mask_hidden.to(self.fc.weight.dtype).chunk(self.spec.num_aux)))

    def draft_chains(
        self,
        aux: list[torch.Tensor],
        next_tokens: torch.Tensor,
        depth: int,
        keep_logits: bool = False,
        start: int | torch.Tensor = 0,
    ) -> Chains:
        """As `Eagle3Drafter.draft_chains` (same arguments, same result), depths 2..K fed the mask token and state."""
        batched = next_tokens.dim() == 2
        if not batched:
            aux, next_tokens = [a[None] for a in aux], next_tokens[None]
        eagle, device = self.eagle, next_tokens.device
        slots, reach = chain_slots(next_tokens.shape[1], start, device)
        caches = [LayerCache(slots, reach) for _ in eagle.layers]
        hidden, tokens, positions = (
            eagle.combine(aux),
            next_tokens,
            torch.arange(next_tokens.shape[1], device=device)[None],
        )
        drafts, sq, logits_out = [], [], []
        for s in range(depth):
            h2, z = eagle.step(hidden, tokens, positions + s, caches)
            if s == 0:  # depth 1 ran every slot for its keys; the chains go on from theirs
                h2, z, positions = at_slots(h2, slots), at_slots(z, slots), slots
                hidden = self.mask_state().expand(*z.shape[:2], -1)
                tokens = torch.full(z.shape[:2], self.mask_token_id, dtype=next_tokens.dtype, device=device)
            logits = eagle.lm_head(z)
            ids = eagle.to_target_ids(logits.argmax(-1))
            drafts.append(ids if batched else ids[0])
            per_slot = eagle.feedback(h2, z).detach().float().pow(2).mean(-1)  # what EAGLE-3 would feed on
            sq.append(per_slot if batched else per_slot[0])
            if keep_logits:
                logits_out.append(logits if batched else logits[0])
        return Chains(torch.stack(drafts), torch.stack(sq), logits_out if keep_logits else None)


def chain_slots(t: int, start: int | torch.Tensor, device) -> tuple[torch.Tensor, int]:
    """The first slot of every chain ([1 or B, T - max start]) and the largest start."""
    starts = torch.as_tensor(start, device=device).reshape(-1, 1)
    reach = int(starts.max())
    return starts + torch.arange(t - reach, device=device), reach


def build_peagle(
    spec: DrafterSpec,
    state: dict[str, torch.Tensor],
    embed: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> PeagleDrafter:
    """A P-EAGLE drafter with its weights: the EAGLE-3 tensors, plus `mask_hidden` (any shape of k x target hidden
    elements: vLLM views it as [1, fc input])."""
    state = dict(state)
    mask = state.pop(MASK_HIDDEN, None)
    width = spec.num_aux * spec.target_hidden_size
    if mask is None:
        raise ValueError("a P-EAGLE drafter needs mask_hidden (the state of its parallel slots), and this one has none")
    if mask.numel() != width:
        raise ValueError(f"mask_hidden has {mask.numel()} values, expected k x target_hidden_size = {width}")
    if spec.family_fields is None or spec.family_fields.mask_token_id is None:
        raise ValueError("a P-EAGLE drafter needs mask_token_id in its config")
    if not 0 <= spec.family_fields.mask_token_id < spec.vocab_size:
        raise ValueError(
            f"mask_token_id {spec.family_fields.mask_token_id} is outside the vocabulary (0..{spec.vocab_size - 1})"
        )
    eagle = build_drafter(spec, state, embed, dtype, device)
    return PeagleDrafter(eagle, mask.to(device, dtype), spec.family_fields.mask_token_id).eval()
