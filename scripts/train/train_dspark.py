#!/usr/bin/env python3
"""Train the tiny DSpark example (seeded) against examples/tiny/target, with train_dflash.py's recipe.

DSpark is DFlash with a sampled anchor and a Markov head (eaglezoo/verify/dspark.py): the block `[token t+1,
mask x 3]` drafts 4 tokens, each position's logits biased by `markov_w2(markov_w1[previous token])`. Trained by
running `DSparkDrafter.draft_chains` itself, the Markov head fed the target's own tokens (teacher forcing), against
the target's distributions on its greedy continuations. Written in DeepSpec's form (`Qwen3DSparkModel`, top-level
`target_layer_ids` [0, 1, 2] = boundary 1, 2, 3, below the target's 4 layers so llama.cpp b11434 can capture them:
examples/tiny/README.md; `block_size` 4, `sample_from_anchor` true, `markov_rank` 32, no confidence head;
safetensors, fp16, no embed_tokens or lm_head). About two minutes on 2 cores:

    OMP_NUM_THREADS=1 .venv/bin/python -m scripts.train.train_dspark
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import scripts.train.train_dflash as td
import scripts.train.train_example as tr
from eaglezoo.checkpoint.formats import aux_ids, deepspec_dspark
from eaglezoo.checkpoint.spec import AuxLayers, DrafterSpec, FamilyFields
from eaglezoo.verify.dflash import layer_causality
from eaglezoo.verify.dspark import DSparkDrafter

BOUNDARY = [1, 2, 3]  # below L = 4: llama.cpp's reach (examples/tiny/README.md)
BLOCK = 4  # the sampled anchor and 3 masks: 4 drafts
MARKOV_RANK = 32


def dspark_spec() -> DrafterSpec:
    key = aux_ids.DEEPSPEC_TARGET
    return DrafterSpec(
        arch="qwen3",
        architectures=[deepspec_dspark.ARCHS[0]],
        num_layers=1,
        hidden_size=128,
        target_hidden_size=128,
        vocab_size=1024,
        draft_vocab_size=1024,
        num_aux=3,
        aux=AuxLayers(ids=tuple(key.from_boundary(BOUNDARY)), convention=key.convention),
        dtype="float16",
        family="dspark",
        layer_config=dict(td.LAYER),
        family_fields=FamilyFields(
            block_size=BLOCK,
            mask_token_id=td.MASK_TOKEN,
            sample_from_anchor=True,
            num_target_layers=4,
            markov_rank=MARKOV_RANK,
            markov_head_type="vanilla",
            enable_confidence_head=False,
        ),
    )


def start_drafter(target) -> DSparkDrafter:
    spec = dspark_spec()
    torch.manual_seed(tr.SEED + 31)
    model = DSparkDrafter(spec, td.MASK_TOKEN, layer_causality(spec))
    model.embed_tokens.weight.data.copy_(target.get_input_embeddings().weight.detach())
    model.lm_head.weight.data.copy_(target.get_output_embeddings().weight.detach())
    model.embed_tokens.weight.requires_grad_(False)  # borrowed from the target, never saved
    model.lm_head.weight.requires_grad_(False)
    torch.nn.init.normal_(model.markov_head.markov_w1.weight, std=0.02)
    torch.nn.init.zeros_(model.markov_head.markov_w2.weight)  # the bias starts at zero: DFlash's drafts
    return model.train()


def loss_of(model: DSparkDrafter, target, x: torch.Tensor) -> torch.Tensor:
    """DFlash's loss at K = BLOCK, the Markov head reading token t+j+1 (draft j-1's target) at position j."""
    slots = x.shape[1] - 1
    padded = F.pad(x, (0, BLOCK))
    model.forced = torch.stack([padded[:, 2 + j : 2 + j + slots] for j in range(BLOCK - 1)], dim=-1)
    try:
        return td.loss_of(model, target, x, BLOCK)
    finally:
        model.forced = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("examples/tiny/dspark-llamacpp"))
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--pool", type=int, default=128, help="target-generated training sequences")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--log", type=Path, default=Path("examples/tiny/train_log.dspark-llamacpp.txt"))
    ap.add_argument("--max-minutes", type=float, help="stop training after this long (logged), keeping the drafter")
    args = ap.parse_args()
    deadline = time.time() + 60 * args.max_minutes if args.max_minutes else None
    torch.manual_seed(tr.SEED)
    lines, log = tr.logger()
    target, _, pool = tr.distillation_data(td.TARGET, args.pool, log)
    log(f"dspark taps: target_layer_ids {aux_ids.DEEPSPEC_TARGET.from_boundary(BOUNDARY)} = boundary {BOUNDARY}")
    model = td.train(start_drafter(target), target, pool, args.steps, args.lr, args.batch, log, deadline, loss_of)
    td.save(model, args.out, deepspec_dspark.write_config)
    args.log.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
