"""DSpark: DFlash plus a Markov head (docs/formats.md#families), as llama.cpp b11434 and vLLM 0.32 run it.

The body is DFlash's (`dflash.py`): the same context keys and non-causal block. Two differences:

* the anchor is sampled (`sample_from_anchor`, true by default for the DeepSpec form: vLLM
  v1/worker/gpu/spec_decode/dspark/speculator.py:49-50; llama.cpp conversion/qwen.py:941-944): the block is
  `[token t+1, mask x (K-1)]` at positions t+1..t+K and every position is read, position j predicting token
  t+j+2 (llama.cpp common/speculative.cpp:1264-1268 and 1326-1333);
* the Markov head: position j's logits get the bias `markov_w2(markov_w1[prev])`, `prev` the anchor token for
  j = 0 and the previous position's greedy (argmax of its biased logits) after it (llama.cpp
  src/models/dflash.cpp:296-384; vLLM model_executor/models/qwen3_dspark.py:48-91, dspark/speculator.py:173-190).

The confidence head only truncates drafts when a minimum probability is asked (llama.cpp `--spec-draft-p-min`,
speculative.cpp:1058-1065, 1326-1334); eaglezoo measures greedy drafts at p-min 0, so its tensors are not loaded.
A bonus-anchor DSpark (`sample_from_anchor` false, the speculators default), another Markov head or a reduced
vocabulary is refused by name (dspark_form.py).
"""

from __future__ import annotations

import torch
from torch import nn

from ..checkpoint.spec import DrafterSpec
from .dflash import DFlashDrafter, build_dflash
from .dspark_form import native_refusal


class MarkovHead(nn.Module):
    def __init__(self, vocab: int, draft_vocab: int, rank: int):
        super().__init__()
        self.markov_w1 = nn.Embedding(vocab, rank)
        self.markov_w2 = nn.Linear(rank, draft_vocab, bias=False)


class DSparkDrafter(DFlashDrafter):
    """`forced` [B, L, K-1] (training only): the tokens the Markov head reads after position 0, instead of the
    chain's own greedy."""

    forced: torch.Tensor | None = None

    def __init__(self, spec: DrafterSpec, mask_token_id: int, causal: list[bool]):
        super().__init__(spec, mask_token_id, causal)
        rank = spec.family_fields.markov_rank if spec.family_fields else None
        if not rank:
            raise ValueError("a DSpark drafter needs markov_rank in its config")
        self.markov_head = MarkovHead(spec.vocab_size, spec.draft_vocab_size, rank)

    def block_tokens(self, bonus: torch.Tensor, depth: int) -> torch.Tensor:
        return super().block_tokens(bonus, depth - 1)

    def head(self, logits: torch.Tensor, bonus: torch.Tensor) -> torch.Tensor:
        """The chained Markov bias, position by position (src/models/dflash.cpp:338-384)."""
        prev, cols = bonus, []
        for j in range(logits.shape[2]):
            bias = self.markov_head.markov_w2(self.markov_head.markov_w1(prev))
            col = logits[:, :, j] + bias
            cols.append(col)
            forced = self.forced
            prev = forced[:, :, j] if forced is not None and j < forced.shape[2] else col.argmax(-1)
        return torch.stack(cols, dim=2)


def check_dspark(spec: DrafterSpec) -> None:
    """What the module cannot run (dspark_form.py); an unstated anchor is the dialect's, checked before by verify."""
    why = native_refusal(spec, "dspark")
    if why:
        raise ValueError(f"the native engine cannot run this DSpark drafter: {why}")


def build_dspark(
    spec: DrafterSpec,
    state: dict[str, torch.Tensor],
    embed: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    lm_head: torch.Tensor | None = None,
) -> DFlashDrafter:
    check_dspark(spec)
    state = {k: v for k, v in state.items() if not k.startswith("confidence_head.")}  # unread at p-min 0 (module doc)
    return build_dflash(spec, state, embed, dtype, device, lm_head, cls=DSparkDrafter)
