#!/usr/bin/env python3
"""Train the embedded example pair (seeded): a tiny Llama target with its own BPE tokenizer on
CPython's `pydoc_data` text (PSF licence), then an EAGLE-3 and an EAGLE 3.1 drafter against it.

The drafters are written in the SafeAILab dialect (`pytorch_model.bin`, `midlayer.*`, no
`embed_tokens`, fp16) so that `eaglezoo convert` has real input. Nothing here runs in CI: the
results are committed under examples/tiny/ (see small-models.md: never train in CI).

    python scripts/train_example.py --out examples/tiny            # about 10 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from eaglezoo.drafter import Eagle3Drafter
from eaglezoo.spec import AuxLayers, DrafterSpec

SEED = 0
VOCAB = 1024
DRAFT_VOCAB = 512
SEQ = 128
DRAFT_SEQ = 512  # drafter windows: long-context prompts need attention spans the target windows lack
DRAFTER_FFN = 640
AUX_BOUNDARY = [1, 2, 3]  # 4-layer target: the default (2, L//2, L-3) = (2, 2, 1) is degenerate


def corpus_split(holdout_fraction: float = 0.1):
    from pydoc_data.topics import topics

    names = sorted(topics)
    random.Random(SEED).shuffle(names)
    n_hold = max(1, int(len(names) * holdout_fraction))
    held, train = names[:n_hold], names[n_hold:]
    return "\n\n".join(topics[n] for n in train), [topics[n] for n in held]


def train_tokenizer(text: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([text], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def batches(stream: torch.Tensor, batch: int, seq: int, gen: torch.Generator):
    while True:
        starts = torch.randint(0, len(stream) - seq - 1, (batch,), generator=gen)
        yield torch.stack([stream[s:s + seq] for s in starts])


def cosine_lr(step: int, total: int, peak: float, warmup: int = 50) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


def train_target(stream, steps: int, log):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=320, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-6,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(SEED)
    data = batches(stream, 16, SEQ, gen)
    t0 = time.time()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = cosine_lr(step, steps, 3e-3)
        x = next(data)
        loss = model(x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            log(f"target step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)")
    return model.eval()


def draft_vocab(stream: torch.Tensor):
    counts = torch.bincount(stream, minlength=VOCAB)
    used = counts.topk(DRAFT_VOCAB).indices.sort().values  # most frequent, ascending (formats.md §3.3)
    d2t = used - torch.arange(DRAFT_VOCAB)
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[used] = True
    return used, d2t, t2d


def drafter_spec(v31: bool) -> DrafterSpec:
    return DrafterSpec(
        arch="llama", architectures=["LlamaForCausalLM"], num_layers=1, hidden_size=128,
        target_hidden_size=128, vocab_size=VOCAB, draft_vocab_size=DRAFT_VOCAB, num_aux=3,
        aux=AuxLayers(ids=tuple(AUX_BOUNDARY), convention="boundary"),
        fc_norm=v31, norm_output=v31, layer_config={
            "model_type": "llama", "intermediate_size": DRAFTER_FFN, "num_attention_heads": 4,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "max_position_embeddings": 1024,
            "hidden_act": "silu", "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2})


def target_features(target, x: torch.Tensor):
    store = {}
    layers = target.model.layers
    hooks = [layers[i - 1].register_forward_hook(
        lambda m, a, out, i=i: store.__setitem__(i, out[0] if isinstance(out, tuple) else out))
        for i in AUX_BOUNDARY]
    with torch.no_grad():
        logits = target(x).logits
    for h in hooks:
        h.remove()
    return [store[i] for i in AUX_BOUNDARY], logits


@torch.no_grad()
def self_distillation_pool(target, stream, n: int, log, prompt_len: int = 24) -> torch.Tensor:
    """The target's own greedy continuations of corpus snippets: what the drafter sees when serving."""
    gen = torch.Generator().manual_seed(SEED + 3)
    starts = torch.randint(0, len(stream) - prompt_len, (n,), generator=gen)
    prompts = torch.stack([stream[s:s + prompt_len] for s in starts])
    out = []
    for i in range(0, n, 64):
        batch = prompts[i:i + 64]
        out.append(target.generate(batch, attention_mask=torch.ones_like(batch), max_new_tokens=SEQ - prompt_len,
                                   min_new_tokens=SEQ - prompt_len, do_sample=False, pad_token_id=0))
    pool = torch.cat(out)
    log(f"self-distillation pool: {len(pool)} sequences of {pool.shape[1]} tokens, "
        f"{len(set(pool[:, prompt_len:].flatten().tolist()))} distinct generated tokens")
    return pool


def mixed_batches(stream, pool, gen: torch.Generator):
    """Alternate long corpus windows (attention spans a long prompt needs) and target generations."""
    corpus = batches(stream, 4, DRAFT_SEQ, gen)
    while True:
        yield next(corpus)
        yield pool[torch.randint(0, len(pool), (16,), generator=gen)]


def train_drafter(target, stream, pool, v31: bool, steps: int, depth: int, log):
    used, d2t, t2d = draft_vocab(stream)
    torch.manual_seed(SEED + (1 if v31 else 0))
    drafter = Eagle3Drafter(drafter_spec(v31))
    drafter.d2t.copy_(d2t)
    drafter.t2d.copy_(t2d)
    drafter.embed_tokens.weight.data.copy_(target.get_input_embeddings().weight.data)
    drafter.embed_tokens.weight.requires_grad_(False)  # frozen, shared with the target
    params = [p for p in drafter.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.0)
    gen = torch.Generator().manual_seed(SEED + 7)
    data = mixed_batches(stream, pool, gen)
    t0 = time.time()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = cosine_lr(step, steps, 3e-3)
        x = next(data)
        aux, logits = target_features(target, x)
        slots = x.shape[1] - 1
        aux = [a[:, :slots] for a in aux]
        teacher = torch.stack([F.pad(x[:, s + 2:], (0, s + 1)) for s in range(depth - 1)])[:, :, :slots]
        chains = drafter.draft_chains(aux, x[:, 1:], depth, teacher_tokens=teacher, keep_logits=True)
        loss = 0.0
        for s, out in enumerate(chains.logits):  # depth s+1 predicts token t+s+2 = target argmax at t+s+1
            valid = slots - s - 1
            tgt = logits[:, s + 1:s + 1 + valid][..., used].softmax(-1)
            loss = loss + (0.8 ** s) * -(tgt * out[:, :valid].log_softmax(-1)).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 100 == 0 or step == steps - 1:
            log(f"drafter({'3.1' if v31 else '3'}) step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)")
    return drafter.eval()


def save_safeai(drafter: Eagle3Drafter, out: Path, v31: bool):
    """The SafeAILab dialect: pytorch_model.bin with midlayer.*, no embed_tokens, fp16 weights."""
    out.mkdir(parents=True, exist_ok=True)
    state = {}
    for name, t in drafter.state_dict().items():
        if name.startswith("embed_tokens"):
            continue
        name = name.replace("layers.0.", "midlayer.")
        state[name] = t.detach().clone().half() if t.is_floating_point() else t.detach().clone()
    torch.save(state, out / "pytorch_model.bin")
    spec = drafter.spec
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": spec.hidden_size, **spec.layer_config,
           "num_hidden_layers": 1, "vocab_size": spec.vocab_size, "draft_vocab_size": spec.draft_vocab_size,
           "tie_word_embeddings": False, "torch_dtype": "float16"}
    if v31:
        cfg.update({"fc_norm": True, "norm_output": True})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def write_prompts(held: list[str], path: Path):
    """Held-out prompts: paragraph starts of topics the models never saw, plus long and chat-wrapped ones."""
    rng = random.Random(SEED)
    paragraphs = [p.strip() for text in held for p in text.split("\n\n") if len(p.strip()) > 120]
    rng.shuffle(paragraphs)
    rows = [{"bucket": "short", "prompt": p[:240]} for p in paragraphs[:24]]
    longest = sorted(held, key=len, reverse=True)
    rows += [{"bucket": "long-context", "prompt": text[:2400]} for text in longest[:4]]
    templates = ["User: {q}\nAssistant:", "<|user|>\n{q}\n<|assistant|>\n", "### Question\n{q}\n\n### Answer\n"]
    rows += [{"bucket": "chat-perturbed", "prompt": templates[i % 3].format(q=p[:160])}
             for i, p in enumerate(paragraphs[24:32])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("examples/tiny"))
    ap.add_argument("--target-steps", type=int, default=2200)
    ap.add_argument("--drafter-steps", type=int, default=2600)
    ap.add_argument("--depth", type=int, default=3, help="training-time test (TTT) depth")
    ap.add_argument("--pool", type=int, default=512, help="target-generated training sequences")
    args = ap.parse_args()
    torch.manual_seed(SEED)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    log_lines = []

    def log(msg):
        print(msg, flush=True)
        log_lines.append(msg)

    train_text, held = corpus_split()
    tokenizer = train_tokenizer(train_text)
    stream = torch.tensor(tokenizer(train_text)["input_ids"], dtype=torch.long)
    log(f"corpus: {len(train_text)} chars, {len(stream)} tokens; {len(held)} held-out topics")

    target = train_target(stream, args.target_steps, log)
    target_dir = args.out / "target"
    target.save_pretrained(target_dir)
    tokenizer.save_pretrained(target_dir)

    pool = self_distillation_pool(target, stream, args.pool, log)
    for v31, name in ((False, "eagle3-safeai"), (True, "eagle31-safeai")):
        drafter = train_drafter(target, stream, pool, v31, args.drafter_steps, args.depth, log)
        save_safeai(drafter, args.out / name, v31)

    write_prompts(held, args.out / "prompts.jsonl")
    (args.out / "train_log.txt").write_text("\n".join(log_lines) + "\n")


if __name__ == "__main__":
    main()
