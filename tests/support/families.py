"""Tiny drafters of the families beside EAGLE-3 (DFlash, DSpark, P-EAGLE), built in the test: a config in each
family's native form and tensors of the right names and shapes, random values, safetensors written by the
safetensors library itself."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

H, HEADS, KV, HEAD_DIM, INTER, VOCAB = 8, 2, 1, 4, 16, 32

BODY = {
    "model_type": "qwen3",
    "hidden_size": H,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV,
    "head_dim": HEAD_DIM,
    "intermediate_size": INTER,
    "num_hidden_layers": 1,
    "vocab_size": VOCAB,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 256,
    "rope_theta": 1000000.0,
    "torch_dtype": "float32",
}


def _layer(g: torch.Generator) -> dict[str, torch.Tensor]:
    p = "layers.0."

    def r(*s: int) -> torch.Tensor:
        return torch.randn(*s, generator=g)

    return {
        p + "input_layernorm.weight": r(H),
        p + "post_attention_layernorm.weight": r(H),
        p + "self_attn.q_proj.weight": r(HEADS * HEAD_DIM, H),
        p + "self_attn.k_proj.weight": r(KV * HEAD_DIM, H),
        p + "self_attn.v_proj.weight": r(KV * HEAD_DIM, H),
        p + "self_attn.o_proj.weight": r(H, HEADS * HEAD_DIM),
        p + "self_attn.q_norm.weight": r(HEAD_DIM),
        p + "self_attn.k_norm.weight": r(HEAD_DIM),
        p + "mlp.gate_proj.weight": r(INTER, H),
        p + "mlp.up_proj.weight": r(INTER, H),
        p + "mlp.down_proj.weight": r(H, INTER),
    }


def write(folder: Path, cfg: dict, tensors: dict[str, torch.Tensor]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def block_tensors(k: int, *, markov_rank: int = 0, lm_head_rows: int | None = None) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    t = {
        "fc.weight": torch.randn(H, k * H, generator=g),
        "hidden_norm.weight": torch.randn(H, generator=g),
        "norm.weight": torch.randn(H, generator=g),
        **_layer(g),
    }
    if markov_rank:
        t["markov_head.markov_w1.weight"] = torch.randn(VOCAB, markov_rank, generator=g)
        t["markov_head.markov_w2.weight"] = torch.randn(VOCAB, markov_rank, generator=g)
        t["confidence_head.proj.weight"] = torch.randn(1, H + markov_rank, generator=g)
        t["confidence_head.proj.bias"] = torch.randn(1, generator=g)
    if lm_head_rows:
        t["lm_head.weight"] = torch.randn(lm_head_rows, H, generator=g)
    return t


def zlab_dflash(
    folder: Path, *, block_size=4, mask_token_id=31, target_layer_ids=(0, 2), lm_head_rows=None, **more
) -> Path:
    cfg = {
        "architectures": ["DFlashDraftModel"],
        **BODY,
        "block_size": block_size,
        "dflash_config": {"target_layer_ids": list(target_layer_ids), "mask_token_id": mask_token_id},
        "num_target_layers": 4,
        **more,
    }
    return write(folder, cfg, block_tensors(len(target_layer_ids), lm_head_rows=lm_head_rows))


def deepspec_dspark(folder: Path, *, block_size=4, mask_token_id=30, target_layer_ids=(0, 1, 2), **more) -> Path:
    cfg = {
        "architectures": ["Qwen3DSparkModel"],
        **BODY,
        "target_layer_ids": list(target_layer_ids),
        "block_size": block_size,
        "mask_token_id": mask_token_id,
        "num_target_layers": 4,
        "markov_rank": 2,
        "markov_head_type": "vanilla",
        "enable_confidence_head": True,
        "confidence_head_with_markov": True,
        "num_anchors": 16,
        **more,
    }
    return write(folder, cfg, block_tensors(len(target_layer_ids), markov_rank=2))


def peagle_native(folder: Path, *, mask_token_id=29) -> Path:
    cfg = {
        "architectures": ["PeagleLlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": H,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "intermediate_size": INTER,
        "num_hidden_layers": 1,
        "vocab_size": VOCAB,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 256,
        "rope_theta": 10000.0,
        "draft_vocab_size": VOCAB,
        "num_aux_hidden_states": 3,
        "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": [0, 1, 2],
            "use_aux_hidden_state": True,
            "norm_before_fc": False,
        },
        "fc_norm": False,
        "norm_output": False,
        "norm_before_fc": False,
        "norm_before_residual": False,
        "tie_word_embeddings": False,
        "mask_token_id": mask_token_id,
        "torch_dtype": "float32",
    }
    g = torch.Generator().manual_seed(3)
    hd = H // HEADS
    p = "layers.0."
    t = {
        "fc.weight": torch.randn(H, 3 * H, generator=g),
        "norm.weight": torch.randn(H, generator=g),
        "lm_head.weight": torch.randn(VOCAB, H, generator=g),
        p + "input_layernorm.weight": torch.randn(H, generator=g),
        p + "post_attention_layernorm.weight": torch.randn(H, generator=g),
        p + "hidden_norm.weight": torch.randn(H, generator=g),
        p + "self_attn.q_proj.weight": torch.randn(HEADS * hd, 2 * H, generator=g),
        p + "self_attn.k_proj.weight": torch.randn(KV * hd, 2 * H, generator=g),
        p + "self_attn.v_proj.weight": torch.randn(KV * hd, 2 * H, generator=g),
        p + "self_attn.o_proj.weight": torch.randn(H, HEADS * hd, generator=g),
        p + "mlp.gate_proj.weight": torch.randn(INTER, H, generator=g),
        p + "mlp.up_proj.weight": torch.randn(INTER, H, generator=g),
        p + "mlp.down_proj.weight": torch.randn(H, INTER, generator=g),
    }
    return write(folder, cfg, t)


def target(folder: Path, *, layers=4, vocab=VOCAB) -> Path:
    """A target's config alone (what lint and serve-config read of it)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": ["Qwen3ForCausalLM"], **BODY, "num_hidden_layers": layers, "vocab_size": vocab}
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return folder
