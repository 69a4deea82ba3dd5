"""Builds tiny drafters in every published dialect, and tiny targets, as real files on disk."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from eaglezoo.checkpoint.spec import AuxLayers, DrafterSpec
from eaglezoo.verify.drafter import Eagle3Drafter

LAYER_CFG = {
    "model_type": "llama",
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 512,
    "hidden_act": "silu",
}


def make_spec(  # noqa: PLR0913 - a test builder: its calls each name the few fields they vary
    hidden=64,
    target_hidden=64,
    vocab=256,
    draft_vocab=128,
    k=3,
    fc_norm=False,
    norm_output=False,
    norm_before_fc=False,
    norm_before_residual=False,
    ids=(1, 2, 3),
    arch="llama",
    num_layers=1,
) -> DrafterSpec:
    cfg = dict(LAYER_CFG)
    if arch == "qwen3":
        cfg.update(model_type="qwen3", head_dim=16)
    return DrafterSpec(
        arch=arch,
        architectures=["LlamaForCausalLM"],
        num_layers=num_layers,
        hidden_size=hidden,
        target_hidden_size=target_hidden,
        vocab_size=vocab,
        draft_vocab_size=draft_vocab,
        num_aux=k,
        aux=AuxLayers(ids=tuple(ids), convention="boundary"),
        fc_norm=fc_norm,
        norm_output=norm_output,
        norm_before_fc=norm_before_fc,
        norm_before_residual=norm_before_residual,
        layer_config=cfg,
    )


def canonical_state(spec: DrafterSpec, seed=0, dtype=torch.float16) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    model = Eagle3Drafter(spec)
    state = {}
    for name, t in model.state_dict().items():
        if name.endswith("norm.weight") or ".weight" in name and "norm" in name:
            t = 1.0 + 0.1 * torch.randn_like(t)  # trained-looking norms, not all ones
        state[name] = t.clone()
    if spec.has_vocab_map:
        used = torch.sort(
            torch.randperm(spec.vocab_size, generator=torch.Generator().manual_seed(seed))[: spec.draft_vocab_size]
        ).values
        state["d2t"] = used - torch.arange(spec.draft_vocab_size)
        t2d = torch.zeros(spec.vocab_size, dtype=torch.bool)
        t2d[used] = True
        state["t2d"] = t2d
    return {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in state.items()}


def _flat_config(spec: DrafterSpec, arch_name: str) -> dict:
    cfg = {
        "architectures": [arch_name],
        "hidden_size": spec.hidden_size,
        **spec.layer_config,
        "num_hidden_layers": spec.num_layers,
        "vocab_size": spec.vocab_size,
        "draft_vocab_size": spec.draft_vocab_size,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }
    if spec.target_hidden_size != spec.hidden_size:
        cfg["target_hidden_size"] = spec.target_hidden_size
    for flag in ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual"):
        if getattr(spec, flag):
            cfg[flag] = True
    return cfg


def write_weights(out: Path, state: dict[str, torch.Tensor], file: str, metadata=None) -> None:
    if file == "bin":
        torch.save(state, out / "pytorch_model.bin")
    elif file == "safetensors":
        save_file(state, str(out / "model.safetensors"), metadata=metadata or {"format": "pt"})
    elif file == "sharded":
        names = sorted(state)
        half = len(names) // 2
        weight_map = {}
        for i, part in enumerate((names[:half], names[half:])):
            fname = f"model-0000{i + 1}-of-00002.safetensors"
            save_file({n: state[n] for n in part}, str(out / fname), metadata=metadata or {"format": "pt"})
            weight_map.update({n: fname for n in part})
        (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    else:
        raise ValueError(file)


def make_drafter(  # noqa: PLR0913 - a test builder: its ~80 calls each name the few settings they vary
    out: Path,
    dialect: str = "safeai",
    spec: DrafterSpec | None = None,
    file: str | None = None,
    seed: int = 0,
    embed: bool = False,
    legacy_aux_norm: bool = False,
    with_ids: bool = True,
    state: dict | None = None,
) -> Path:
    """A drafter in `dialect` at `out`; returns `out`. The canonical state is `canonical_state(spec, seed)`."""
    spec = spec or make_spec()
    out.mkdir(parents=True, exist_ok=True)
    state = dict(state or canonical_state(spec, seed))
    state.pop("embed_tokens.weight", None)
    if embed:
        torch.manual_seed(seed + 100)
        state["embed_tokens.weight"] = torch.randn(spec.vocab_size, spec.hidden_size).to(torch.float16)
    if dialect not in DIALECTS:
        raise ValueError(dialect)
    state, cfg, default_file, metadata = DIALECTS[dialect](spec, state, with_ids)
    if legacy_aux_norm:
        state = {
            k.replace("fc_norm.0.", "aux_norm_low.")
            .replace("fc_norm.1.", "aux_norm_mid.")
            .replace("fc_norm.2.", "aux_norm_high."): v
            for k, v in state.items()
        }
        cfg.pop("fc_norm", None)
        cfg["use_aux_norm"] = True
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    write_weights(out, state, file or default_file, metadata)
    return out


# Each dialect's form of a drafter: (its state dict, its config, its default weight file, safetensors metadata)
Form = tuple[dict, dict, str, "dict | None"]


def _renamed(state: dict, old: str, new: str) -> dict:
    return {(new + k[len(old) :] if k.startswith(old) else k): v for k, v in state.items()}


def _safeai(spec: DrafterSpec, state: dict, with_ids: bool) -> Form:
    return _renamed(state, "layers.0.", "midlayer."), _flat_config(spec, "LlamaForCausalLM"), "bin", None


def _specforge(spec: DrafterSpec, state: dict, with_ids: bool) -> Form:
    state = _renamed(state, "layers.0.", "midlayer.")
    if not spec.has_vocab_map:  # SpecForge always registers the buffers
        state["d2t"] = torch.zeros(spec.draft_vocab_size, dtype=torch.long)
        state["t2d"] = torch.ones(spec.vocab_size, dtype=torch.bool)
    cfg = _flat_config(spec, "LlamaForCausalLMEagle3")
    if with_ids:
        cfg["eagle_config"] = {
            "eagle_aux_hidden_state_layer_ids": spec.aux.layer_output(),
            "use_aux_hidden_state": True,
        }
    return state, cfg, "safetensors", None


def _modelopt(spec: DrafterSpec, state: dict, with_ids: bool) -> Form:
    state = _renamed(state, "layers.0.", "midlayer.")
    state.pop("t2d", None)
    cfg = _flat_config(spec, "LlamaForCausalLMEagle3")
    cfg["eagle_config"] = {
        "eagle_aux_hidden_state_layer_ids": spec.aux.layer_output(),
        "use_aux_hidden_state": True,
        "use_input_layernorm_in_first_layer": True,
        "use_last_layernorm": False,
        "use_mtp_layernorm": False,
    }
    return state, cfg, "safetensors", None


def _nemo(spec: DrafterSpec, state: dict, with_ids: bool) -> Form:
    state = {("model." + k if k != "lm_head.weight" else k): v for k, v in state.items()}
    return state, _flat_config(spec, "LlamaForCausalLMEagle3"), "safetensors", None


def _torchspec(spec: DrafterSpec, state: dict, with_ids: bool) -> Form:
    cfg = _flat_config(spec, "LlamaForCausalLMEagle3")
    cfg["_torchspec_version"] = "0.3.0"
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": spec.aux.layer_output(), "use_aux_hidden_state": True}
    metadata = {"format": "pt", "torchspec_version": "0.3.0"}
    return _renamed(state, "layers.0.", "midlayer."), cfg, "safetensors", metadata


def _speculators(spec: DrafterSpec, state: dict, with_ids: bool) -> Form:
    layer = {
        **spec.layer_config,
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_layers,
        "vocab_size": spec.vocab_size,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }
    cfg = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "transformer_layer_config": layer,
        "draft_vocab_size": spec.draft_vocab_size,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": spec.aux.boundary(),
        **spec.flags(),
        "speculators_config": {"algorithm": "eagle3", "proposal_methods": [], "verifier": {"name_or_path": None}},
    }
    return state, cfg, "safetensors", None


DIALECTS = {
    "safeai": _safeai,
    "specforge": _specforge,
    "modelopt": _modelopt,
    "nemo": _nemo,
    "torchspec": _torchspec,
    "speculators": _speculators,
}


def make_target(out: Path, layers: int = 4, hidden: int = 64, vocab: int = 256, **extra) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "vocab_size": vocab,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        **extra,
    }
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def make_mla_drafter(out: Path, hidden: int = 64, vocab: int = 256, layer_output_ids=(1, 29, 57)) -> tuple[Path, dict]:
    """A TorchSpec Kimi-style MLA drafter (docs/formats.md#mla-drafters); returns (out, its source state)."""
    n_h, q_rank, kv_rank, nope, rope, v_head, inter = 4, 32, 16, 8, 8, 8, 96
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g).to(torch.bfloat16)  # noqa: E731
    state = {
        "fc.weight": r(hidden, 3 * hidden),
        "norm.weight": r(hidden),
        "lm_head.weight": r(vocab, hidden),
        "midlayer.input_layernorm.weight": r(hidden),
        "midlayer.hidden_norm.weight": r(hidden),
        "midlayer.post_attention_layernorm.weight": r(hidden),
        "midlayer.self_attn.q_a_proj.weight": r(q_rank, 2 * hidden),
        "midlayer.self_attn.q_a_layernorm.weight": r(q_rank),
        "midlayer.self_attn.q_b_proj.weight": r(n_h * (nope + rope), q_rank),
        "midlayer.self_attn.kv_a_proj_with_mqa.weight": r(kv_rank + rope, 2 * hidden),
        "midlayer.self_attn.kv_a_layernorm.weight": r(kv_rank),
        "midlayer.self_attn.kv_b_proj.weight": r(n_h * (nope + v_head), kv_rank),
        "midlayer.self_attn.o_proj.weight": r(hidden, n_h * v_head),
        "midlayer.mlp.gate_proj.weight": r(inter, hidden),
        "midlayer.mlp.up_proj.weight": r(inter, hidden),
        "midlayer.mlp.down_proj.weight": r(hidden, inter),
        **{f"fc_norm.{i}.weight": r(hidden) for i in range(3)},
    }
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt", "torchspec_version": "0.3"})
    cfg = {
        "architectures": ["Eagle3DeepseekV2ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": hidden,
        "vocab_size": vocab,
        "draft_vocab_size": vocab,
        "num_hidden_layers": 1,
        "num_attention_heads": n_h,
        "q_lora_rank": q_rank,
        "kv_lora_rank": kv_rank,
        "qk_nope_head_dim": nope,
        "qk_rope_head_dim": rope,
        "v_head_dim": v_head,
        "intermediate_size": inter,
        "fc_norm": True,
        "norm_output": True,
        "_torchspec_version": "0.3",
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": list(layer_output_ids),
            "use_aux_hidden_state": True,
            "use_last_layernorm": True,
        },
    }
    (out / "config.json").write_text(json.dumps(cfg))
    return out, state


def quantized_copy(src: Path, out: Path, quantization_config: dict) -> Path:
    """A copy of target `src` whose config.json declares `quantization_config` (the weights stay as they are)."""
    import shutil

    shutil.copytree(src, out)
    cfg = json.loads((src / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**cfg, "quantization_config": quantization_config}))
    return out


def make_mxfp4_target(out: Path, tokenizer_from: Path, hidden: int = 64, layers: int = 4) -> Path:
    """A tiny gpt-oss target stored as MXFP4 checkpoints are: expert weights as packed fp4 `_blocks` (two values
    a byte, 32 a block) and e8m0 `_scales`, random bytes; everything else random bf16/fp32 weights."""
    import shutil

    from safetensors.torch import load_file
    from transformers import GptOssConfig, GptOssForCausalLM

    cfg = GptOssConfig(
        vocab_size=1024,
        hidden_size=hidden,
        intermediate_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=1024,
        sliding_window=128,
        layer_types=["sliding_attention", "full_attention"] * (layers // 2),
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    GptOssForCausalLM(cfg).save_pretrained(out)
    state = load_file(out / "model.safetensors")
    g = torch.Generator().manual_seed(0)
    for name in [n for n in state if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        experts, fan_in, fan_out = state.pop(name).shape
        state[name + "_blocks"] = torch.randint(
            0, 256, (experts, fan_out, fan_in // 32, 16), dtype=torch.uint8, generator=g
        )
        state[name + "_scales"] = torch.randint(
            118, 124, (experts, fan_out, fan_in // 32), dtype=torch.uint8, generator=g
        )
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((out / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
    }
    (out / "config.json").write_text(json.dumps(config))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_from / f, out / f)
    return out
