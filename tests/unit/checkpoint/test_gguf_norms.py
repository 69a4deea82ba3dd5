"""EAGLE 3.1's fc_norm against llama.cpp b11434's norm_before_fc: not the same operation, which is why
`convert --to gguf` refuses fc_norm instead of writing it as norm_before_fc
(docs/commands/convert-lint.md#gguf-llamacpp).

fc_norm: one RMSNorm per aux state, each over its own H_t values (eaglezoo/verify/drafter.py:191-192, 205-206).
norm_before_fc in llama.cpp: one RMSNorm over the 3 x H_t concatenation (src/models/eagle3.cpp:61-63, 131-133).
The whole comparison: docs/notes/llamacpp-eagle31.md."""

from __future__ import annotations

import pytest
import torch
from conftest import EXAMPLE
from support.factory import make_spec

from eaglezoo import serving
from eaglezoo.checkpoint.formats import gguf_eagle3
from eaglezoo.checkpoint.formats.base import ReadOptions
from eaglezoo.checkpoint.read import read_drafter
from eaglezoo.errors import UsageError


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


def test_the_example_targets_taps_differ_in_rms():
    """On the real example target the three taps a 3.1 drafter normalises have very different RMS, so fc_norm and
    norm_before_fc give different fc inputs there, not only on made-up states."""
    from transformers import AutoTokenizer, LlamaForCausalLM  # noqa: PLC0415 - heavy, this test only

    target = LlamaForCausalLM.from_pretrained(EXAMPLE / "target").eval()
    ids = AutoTokenizer.from_pretrained(EXAMPLE / "target")("The for statement is used to iterate", return_tensors="pt")
    taps: dict[int, torch.Tensor] = {}  # boundary b = the output of layer b - 1, pre-norm (HF's last hidden state
    for b in (2, 3, 4):  # is post-norm, so the layers' outputs are read directly)
        target.model.layers[b - 1].register_forward_hook(
            lambda _m, _a, out, b=b: taps.__setitem__(b, out[0] if isinstance(out, tuple) else out)
        )
    with torch.no_grad():
        target(**ids)
    states = [taps[b][0].float() for b in (2, 3, 4)]  # the boundary taps the example 3.1 drafter was trained on
    per_tap_rms = torch.stack([s.pow(2).mean(-1).sqrt() for s in states])  # [3, T]
    assert (per_tap_rms.max(0).values / per_tap_rms.min(0).values).mean() > 1.15  # 1.24 measured
    drafter = read_drafter(
        EXAMPLE / "eagle31-safeai", None, ReadOptions(aux_layers=(2, 3, 4), aux_convention="boundary")
    )
    weights = [drafter.load(f"fc_norm.{j}.weight").float() for j in range(3)]
    per_state, whole = both(states, weights, 1e-6)
    assert (per_state - whole).abs().max() > 0.1 * per_state.abs().max()


@pytest.mark.parametrize("flags", [{"fc_norm": True}, {"norm_output": True}, {"fc_norm": True, "norm_output": True}])
def test_refusal_names_the_engines_that_serve_31(flags):
    """The hint's engines and versions are serving.py's own floors for the drafter (one fact, checked here)."""
    spec = make_spec(hidden=128, target_hidden=128, vocab=1024, draft_vocab=512, ids=(2, 3, 4), **flags)
    with pytest.raises(UsageError) as raised:
        gguf_eagle3.refuse(spec)
    floors = {e.engine: e.min_version for e in serving.engine_support(spec)}
    hint = raised.value.hint or ""
    assert f"vLLM >= {floors['vllm']}" in hint and f"SGLang >= {floors['sglang']}" in hint
    for flag in flags:
        assert f"{flag} (EAGLE 3.1)" in raised.value.message
