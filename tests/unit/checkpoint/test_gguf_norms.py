"""EAGLE 3.1's fc_norm against llama.cpp b11434's norm_before_fc: not the same operation, which is why
`convert --to gguf` refuses fc_norm instead of writing it as norm_before_fc
(docs/commands/convert-lint.md#gguf-llamacpp).

fc_norm: one RMSNorm per aux state, each over its own H_t values (eaglezoo/verify/drafter.py:189-190, 203-204).
norm_before_fc in llama.cpp: one RMSNorm over the 3 x H_t concatenation (src/models/eagle3.cpp:131-133)."""

from __future__ import annotations

import torch
from conftest import EXAMPLE

from eaglezoo.checkpoint.formats.base import ReadOptions
from eaglezoo.checkpoint.read import read_drafter


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def both(states: list[torch.Tensor], weights: list[torch.Tensor], eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    per_state = torch.cat([w * rms(s, eps) for w, s in zip(weights, states, strict=True)], -1)  # fc_norm
    whole = torch.cat(weights) * rms(torch.cat(states, -1), eps)  # norm_before_fc with the weights concatenated
    return per_state, whole


def test_fc_norm_is_not_norm_before_fc():
    drafter = read_drafter(
        EXAMPLE / "eagle31-safeai", None, ReadOptions(aux_layers=(2, 3, 4), aux_convention="boundary")
    )
    weights = [drafter.load(f"fc_norm.{j}.weight").float() for j in range(3)]
    torch.manual_seed(0)
    # the residual stream grows with depth: states of different scale, as a target's layers 2, 3 and 4 give
    states = [torch.randn(8, 128) * scale for scale in (1.0, 3.0, 9.0)]
    per_state, whole = both(states, weights, 1e-6)
    assert not torch.allclose(per_state, whole, rtol=1e-3, atol=1e-3)
    # the same only where the three states have one RMS
    same = [s / s.pow(2).mean(-1, keepdim=True).sqrt() for s in states]
    per_state, whole = both(same, weights, 0.0)
    assert torch.allclose(per_state, whole, atol=1e-5)
