#!/usr/bin/env python3
"""Train the tiny P-EAGLE example (seeded) against examples/tiny/target, starting from the EAGLE 3.1 example.

P-EAGLE is EAGLE-3 weights that draft K tokens in one pass: depth 1 as EAGLE-3, depths 2..K fed the mask token and
a learned `mask_hidden` (eaglezoo/verify/peagle.py). So the EAGLE 3.1 example's weights are the start, `mask_hidden`
is new, and training runs `PeagleDrafter.draft_chains` itself (the module the native engine measures) against the
target's distributions on its own greedy continuations, with `scripts/train/train_example.py`'s helpers. Written
in P-EAGLE's native form (the canonical EAGLE 3.1 config, `PeagleLlamaForCausalLM`, a top-level `mask_token_id`;
safetensors, fp16, no `embed_tokens`: the target's is shared). About two minutes on 2 cores:

    .venv/bin/python -m scripts.train.train_peagle --out examples/tiny/peagle
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

import scripts.train.train_example as tr
from eaglezoo.checkpoint.formats import peagle
from eaglezoo.checkpoint.read import read_drafter
from eaglezoo.checkpoint.spec import FamilyFields
from eaglezoo.verify.drafter import build_drafter
from eaglezoo.verify.peagle import PeagleDrafter

START = Path("examples/tiny/eagle31-safeai")
TARGET = Path("examples/tiny/target")
AUX = (2, 3, 4)  # the example's boundary ids (examples/tiny/README.md)
MASK_TOKEN = 1023  # the last BPE merge: a rare real token, neither pad, bos nor eos (lint's mask-token-real)
DEPTH_WEIGHT = 0.8  # depth s counts DEPTH_WEIGHT ** s, as in train_example's loop


def start_drafter(target) -> PeagleDrafter:
    """The EAGLE 3.1 example's weights (fp32), a fresh unit-variance mask_hidden (speculators' init)."""
    from eaglezoo.checkpoint.formats.base import ReadOptions

    d = read_drafter(START, None, ReadOptions(aux_layers=AUX, aux_convention="boundary", target_layers=4))
    spec = d.spec.model_copy(
        update={
            "family": "peagle",
            "family_fields": FamilyFields(mask_token_id=MASK_TOKEN),
            "architectures": [peagle.ARCH_NAMES["llama"]],
        }
    )
    eagle = build_drafter(spec, d.state(), embed=target.get_input_embeddings().weight.detach().clone())
    eagle.embed_tokens.weight.requires_grad_(False)  # frozen, shared with the target
    torch.manual_seed(tr.SEED + 11)
    model = PeagleDrafter(eagle.train(), torch.randn(spec.num_aux * spec.target_hidden_size), MASK_TOKEN)
    model.mask_hidden.requires_grad_(True)
    return model


def loss_of(model: PeagleDrafter, target, x: torch.Tensor, used: torch.Tensor, depth: int) -> torch.Tensor:
    """Soft cross-entropy at every depth against the target's next-token distribution over the draft vocabulary."""
    feats, logits = tr.target_features(target, x, model.spec.aux.boundary())
    logits = logits[..., used]
    slots = x.shape[1] - 1
    chains = model.draft_chains([a[:, :slots] for a in feats], x[:, 1:], depth, keep_logits=True)
    loss = 0.0
    for s, out in enumerate(chains.logits):  # depth s+1 from slot t predicts token t+s+2: target argmax at t+s+1
        valid = slots - s - 1
        want = logits[:, s + 1 : s + 1 + valid].softmax(-1)
        loss = loss + DEPTH_WEIGHT**s * -(want * out[:, :valid].log_softmax(-1)).sum(-1).mean()
    return loss


def train(  # noqa: PLR0913 - a script's settings, each named at its call
    model: PeagleDrafter, target, stream, pool, steps: int, depth: int, lr: float, batch: int, log
) -> PeagleDrafter:
    used, _, _ = tr.draft_vocab(stream, model.spec.vocab_size, model.spec.draft_vocab_size)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(tr.SEED + 13)
    t0 = time.time()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = tr.cosine_lr(step, steps, lr, warmup=20)
        x = pool[torch.randint(0, len(pool), (batch,), generator=gen)]
        loss = loss_of(model, target, x, used, depth)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 20 == 0 or step == steps - 1:
            log(f"peagle step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)")
    return model.eval()


def save(model: PeagleDrafter, out: Path) -> None:
    """P-EAGLE's native form; mask_hidden as speculators saves it, [1, 1, k x target hidden]."""
    out.mkdir(parents=True, exist_ok=True)
    state = {
        n: t.detach().half().contiguous() if t.is_floating_point() else t.detach().contiguous()
        for n, t in model.eagle.state_dict().items()
        if not n.startswith("embed_tokens")
    }
    state["mask_hidden"] = model.mask_hidden.detach().half().reshape(1, 1, -1).contiguous()
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = peagle.write_config(model.spec, "float16")
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("examples/tiny/peagle"))
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--depth", type=int, default=3, help="tokens drafted in one pass while training")
    ap.add_argument("--pool", type=int, default=128, help="target-generated training sequences")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--log", type=Path, default=Path("examples/tiny/train_log.peagle.txt"))
    args = ap.parse_args()
    torch.manual_seed(tr.SEED)
    lines, log = tr.logger()
    target, stream, pool = tr.distillation_data(TARGET, args.pool, log)
    model = train(start_drafter(target), target, stream, pool, args.steps, args.depth, args.lr, args.batch, log)
    save(model, args.out)
    args.log.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
