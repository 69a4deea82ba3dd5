#!/usr/bin/env python3
"""Train the tiny DFlash example (seeded) against examples/tiny/target.

DFlash drafts a block of mask tokens in one non-causal pass over the target's fused aux states
(eaglezoo/verify/dflash.py). The drafter is new (one Qwen3 layer, `fc`, `hidden_norm`, `norm`; the target's
embedding and lm_head borrowed, frozen), trained by running `DFlashDrafter.draft_chains` itself (the module the
native engine measures) against the target's distributions on its own greedy continuations, with
`scripts/train/train_example.py`'s helpers. Written in z-lab's form (`DFlashDraftModel`, `dflash_config:
{target_layer_ids, mask_token_id}`, `block_size`; safetensors, fp16, no embed_tokens or lm_head). A few minutes on
2 cores:

    .venv/bin/python -m scripts.train.train_dflash --out examples/tiny/dflash

`--target-layer-ids 0,1,2` (z-lab's layer-output ids; boundary = id + 1) trains on other taps, e.g. the ones
llama.cpp b11434 can capture from a Llama target (boundary < L: examples/tiny/README.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

import scripts.train.train_example as tr
from eaglezoo.checkpoint.formats import aux_ids, zlab_dflash
from eaglezoo.checkpoint.spec import AuxLayers, DrafterSpec, FamilyFields
from eaglezoo.verify.dflash import DFlashDrafter, layer_causality

TARGET = Path("examples/tiny/target")
BOUNDARY = [2, 3, 4]  # the example's boundary states (examples/tiny/README.md): target_layer_ids 1, 2, 3
MASK_TOKEN = 1023  # the last BPE merge: a rare real token, neither pad, bos nor eos (as the P-EAGLE example)
BLOCK = 4  # the anchor (bonus token) and 3 drafts
DEPTH_WEIGHT = 0.8
LAYER = {
    "model_type": "qwen3",
    "hidden_size": 128,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 320,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 1024,
    "rope_theta": 10000.0,
    "vocab_size": 1024,
    "attention_bias": False,
    "tie_word_embeddings": False,
}


def dflash_spec(boundary: list[int] = BOUNDARY) -> DrafterSpec:
    key = aux_ids.DFLASH_TARGET
    return DrafterSpec(
        arch="qwen3",
        architectures=[zlab_dflash.ARCH],
        num_layers=1,
        hidden_size=128,
        target_hidden_size=128,
        vocab_size=1024,
        draft_vocab_size=1024,
        num_aux=3,
        aux=AuxLayers(ids=tuple(key.from_boundary(boundary)), convention=key.convention),
        dtype="float16",
        family="dflash",
        layer_config=dict(LAYER),
        family_fields=FamilyFields(block_size=BLOCK, mask_token_id=MASK_TOKEN, num_target_layers=4),
    )


def start_drafter(target, boundary: list[int] = BOUNDARY) -> DFlashDrafter:
    spec = dflash_spec(boundary)
    torch.manual_seed(tr.SEED + 21)
    model = DFlashDrafter(spec, MASK_TOKEN, layer_causality(spec))
    model.embed_tokens.weight.data.copy_(target.get_input_embeddings().weight.detach())
    model.lm_head.weight.data.copy_(target.get_output_embeddings().weight.detach())
    model.embed_tokens.weight.requires_grad_(False)  # borrowed from the target, never saved
    model.lm_head.weight.requires_grad_(False)
    return model.train()


def loss_of(model: DFlashDrafter, target, x: torch.Tensor, depth: int) -> torch.Tensor:
    """Soft cross-entropy at every block position against the target's next-token distribution."""
    feats, logits = tr.target_features(target, x, model.spec.aux.boundary())
    slots = x.shape[1] - 1
    chains = model.draft_chains([a[:, :slots] for a in feats], x[:, 1:], depth, keep_logits=True)
    loss = 0.0
    for s, out in enumerate(chains.logits):  # draft s+1 from slot t predicts token t+s+2: target's logits at t+s+1
        valid = slots - s - 1
        want = logits[:, s + 1 : s + 1 + valid].softmax(-1)
        loss = loss + DEPTH_WEIGHT**s * -(want * out[:, :valid].log_softmax(-1)).sum(-1).mean()
    return loss


def train(  # noqa: PLR0913 - a script's settings, each named at its call
    model: DFlashDrafter,
    target,
    pool,
    steps: int,
    lr: float,
    batch: int,
    log,
    deadline: float | None = None,
    loss_fn=None,
) -> DFlashDrafter:
    """`deadline` (time.time()): stop there, logged, so a run on busy cores still ends with a drafter. `loss_fn`
    (model, target, x): another family's loss (train_dspark.py); DFlash's at K = BLOCK - 1 by default."""
    loss_fn = loss_fn or (lambda m, t, x: loss_of(m, t, x, BLOCK - 1))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(tr.SEED + 23)
    t0 = time.time()
    for step in range(steps):
        if deadline is not None and time.time() > deadline:
            log(f"{model.spec.family}: deadline reached at step {step} of {steps}")
            break
        for g in opt.param_groups:
            g["lr"] = tr.cosine_lr(step, steps, lr, warmup=20)
        x = pool[torch.randint(0, len(pool), (batch,), generator=gen)]
        loss = loss_fn(model, target, x)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 20 == 0 or step == steps - 1:
            log(f"{model.spec.family} step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)")
    return model.eval()


def save(model: DFlashDrafter, out: Path, write_config=zlab_dflash.write_config) -> None:
    """The drafter in fp16 without the target's borrowed tensors, and its config in the form `write_config` writes
    (z-lab's DFlash; train_dspark.py passes DeepSpec's DSpark)."""
    out.mkdir(parents=True, exist_ok=True)
    state = {
        n: t.detach().half().contiguous()
        for n, t in model.state_dict().items()
        if not n.startswith(("embed_tokens", "lm_head"))
    }
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = write_config(model.spec, [])
    cfg["torch_dtype"] = "float16"
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("examples/tiny/dflash"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--pool", type=int, default=128, help="target-generated training sequences")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--log", type=Path, default=Path("examples/tiny/train_log.dflash.txt"))
    ap.add_argument(
        "--target-layer-ids",
        type=tr.int_list,
        default=aux_ids.DFLASH_TARGET.from_boundary(BOUNDARY),
        help="z-lab's dflash_config.target_layer_ids (layer-output ids; boundary = id + 1): 1,2,3",
    )
    ap.add_argument("--max-minutes", type=float, help="stop training after this long (logged), keeping the drafter")
    args = ap.parse_args()
    deadline = time.time() + 60 * args.max_minutes if args.max_minutes else None
    boundary = aux_ids.DFLASH_TARGET.to_boundary(args.target_layer_ids)
    torch.manual_seed(tr.SEED)
    lines, log = tr.logger()
    target, stream, pool = tr.distillation_data(TARGET, args.pool, log)
    if boundary != BOUNDARY:
        log(f"dflash taps: target_layer_ids {args.target_layer_ids} = boundary {boundary}")
    model = train(start_drafter(target, boundary), target, pool, args.steps, args.lr, args.batch, log, deadline)
    save(model, args.out)
    args.log.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
