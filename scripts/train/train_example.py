#!/usr/bin/env python3
"""Train the embedded example pair (seeded): a tiny Llama target with its own BPE tokenizer on
CPython's `pydoc_data` text (PSF licence), then an EAGLE-3 and an EAGLE 3.1 drafter against it.

The drafters are written in the SafeAILab dialect (`pytorch_model.bin`, `midlayer.*`, no
`embed_tokens`, fp16) so that `eaglezoo convert` has real input. Nothing here runs in CI: the
results are committed under examples/tiny/ (training takes minutes, so it never runs in CI).

    python -m scripts.train.train_example --out examples/tiny            # about 10 minutes on 2 cores

`--only-eagle3 NAME --reuse-target --aux-layers 1,2,3` trains the plain EAGLE-3 drafter alone, on other boundary
taps, into OUT/NAME in the canonical schema (aux ids top-level, every flag explicit: what llama.cpp's converter and
eaglezoo both read without flags), with its log in OUT/train_log.NAME.txt; nothing else in OUT is written.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from eaglezoo.checkpoint.formats import eagle31
from eaglezoo.checkpoint.spec import AuxLayers, DrafterSpec
from eaglezoo.verify.drafter import Eagle3Drafter

SEED = 0
VOCAB = 1024
DRAFT_VOCAB = 512
SEQ = 128
DRAFT_SEQ = 512  # drafter windows: long-context prompts need attention spans the target windows lack
DRAFTER_FFN = 640
# 4-layer target: the default (2, L//2, L-3) = (2, 2, 1) is degenerate. Boundary 4 = L is the last
# layer's (pre-norm) output, which engines capture too; it carries the most next-token information.
AUX_BOUNDARY = [2, 3, 4]


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
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([text], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def batches(stream: torch.Tensor, batch: int, seq: int, gen: torch.Generator):
    while True:
        starts = torch.randint(0, len(stream) - seq - 1, (batch,), generator=gen)
        yield torch.stack([stream[s : s + seq] for s in starts])


def cosine_lr(step: int, total: int, peak: float, warmup: int = 50) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


def train_target(stream, steps: int, log):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=320,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
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


def draft_vocab(stream: torch.Tensor, vocab: int = VOCAB, size: int = DRAFT_VOCAB):
    counts = torch.bincount(stream, minlength=vocab)
    used = counts.topk(size).indices.sort().values  # most frequent, ascending (docs/formats.md#vocabulary-maps)
    d2t = used - torch.arange(size)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[used] = True
    return used, d2t, t2d


def drafter_spec(
    v31: bool,
    target_cfg: dict | None = None,
    draft_vocab_size: int = DRAFT_VOCAB,
    aux: list[int] = AUX_BOUNDARY,
    ffn: int = DRAFTER_FFN,
) -> DrafterSpec:
    """A one-layer drafter shaped like one layer of the target (its hidden size, heads and RoPE)."""
    t = target_cfg or {
        "hidden_size": 128,
        "vocab_size": VOCAB,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    layer = {
        "model_type": "llama",
        "intermediate_size": ffn,
        "num_attention_heads": t["num_attention_heads"],
        "num_key_value_heads": t["num_key_value_heads"],
        "rms_norm_eps": t["rms_norm_eps"],
        "max_position_embeddings": t["max_position_embeddings"],
        "hidden_act": "silu",
    }
    if t.get("head_dim"):
        layer["head_dim"] = t["head_dim"]
    if float(t.get("rope_theta") or 10000.0) != 10000.0:
        layer["rope_theta"] = float(t["rope_theta"])
    layer.update({k: t[k] for k in ("pad_token_id", "bos_token_id", "eos_token_id") if t.get(k) is not None})
    return DrafterSpec(
        arch="llama",
        architectures=["LlamaForCausalLM"],
        num_layers=1,
        hidden_size=t["hidden_size"],
        target_hidden_size=t["hidden_size"],
        vocab_size=t["vocab_size"],
        draft_vocab_size=draft_vocab_size,
        num_aux=len(aux),
        aux=AuxLayers(ids=tuple(aux), convention="boundary"),
        fc_norm=v31,
        norm_output=v31,
        layer_config=layer,
    )


def target_features(target, x: torch.Tensor, aux: list[int]):
    store = {}
    layers = target.model.layers
    hooks = [
        layers[i - 1].register_forward_hook(
            lambda m, a, out, i=i: store.__setitem__(i, out[0] if isinstance(out, tuple) else out)
        )
        for i in aux
    ]
    with torch.no_grad():
        logits = target(x).logits
    for h in hooks:
        h.remove()
    return [store[i] for i in aux], logits


@torch.no_grad()
def self_distillation_pool(  # noqa: PLR0913 - a script's settings, each named at its call
    target, stream, n: int, log, prompt_len: int = 24, seq: int = SEQ, batch: int = 64
):
    """The target's own greedy continuations of corpus snippets: what the drafter sees when serving."""
    gen = torch.Generator().manual_seed(SEED + 3)
    starts = torch.randint(0, len(stream) - prompt_len, (n,), generator=gen)
    prompts = torch.stack([stream[s : s + prompt_len] for s in starts])
    out = []
    for i in range(0, n, batch):
        part = prompts[i : i + batch]
        out.append(
            target.generate(
                part,
                attention_mask=torch.ones_like(part),
                max_new_tokens=seq - prompt_len,
                min_new_tokens=seq - prompt_len,
                do_sample=False,
                pad_token_id=target.config.pad_token_id or 0,
            )
        )
    pool = torch.cat(out)
    log(
        f"self-distillation pool: {len(pool)} sequences of {pool.shape[1]} tokens, "
        f"{len(set(pool[:, prompt_len:].flatten().tolist()))} distinct generated tokens"
    )
    return pool


def distillation_data(target_dir: Path, pool_size: int, log):
    """The example target, the training half of the corpus as its tokens, and a pool of the target's own greedy
    continuations: what every example drafter (EAGLE 3.1, P-EAGLE, DFlash) is trained on."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    target = LlamaForCausalLM.from_pretrained(target_dir).eval()
    train_text, _ = corpus_split()
    stream = torch.tensor(AutoTokenizer.from_pretrained(target_dir)(train_text)["input_ids"], dtype=torch.long)
    return target, stream, self_distillation_pool(target, stream, pool_size, log)


def logger() -> tuple[list[str], Callable[[str], None]]:
    """Lines printed as they come and kept for the training log."""
    lines: list[str] = []

    def log(msg: str) -> None:
        print(msg, flush=True)
        lines.append(msg)

    return lines, log


def mixed_batches(stream, pool, gen: torch.Generator, corpus=(4, DRAFT_SEQ), pool_batch: int = 16):
    """Alternate long corpus windows (attention spans a long prompt needs) and target generations."""
    windows = batches(stream, corpus[0], corpus[1], gen)
    while True:
        yield next(windows)
        yield pool[torch.randint(0, len(pool), (pool_batch,), generator=gen)]


def train_drafter(  # noqa: PLR0913 - a script's settings, each named at its call
    target,
    stream,
    pool,
    v31: bool,
    steps: int,
    depth: int,
    log,
    spec: DrafterSpec | None = None,
    corpus=(4, DRAFT_SEQ),
    pool_batch: int = 16,
    lr: float = 3e-3,
    data=None,
    device: str = "cpu",
    deadline: float | None = None,
    init: dict[str, torch.Tensor] | None = None,
    log_every: int = 100,
):
    """`data` (an iterator of [B, T] token batches) replaces the corpus/pool mix; it may also yield
    (tokens, aux features, target logits over the draft vocabulary) computed once beforehand, and then
    the target is not run. Training stops early at `deadline` (time.time()) so a run on a lent GPU
    always ends with a drafter; `init` (a state dict in the module's canonical names, e.g.
    `canonical_state`) starts from those weights: an earlier run, or `init_from_target`."""
    spec = spec or drafter_spec(v31)
    aux = spec.aux.boundary()
    used, d2t, t2d = draft_vocab(stream, spec.vocab_size, spec.draft_vocab_size)
    used = used.to(device)
    torch.manual_seed(SEED + (1 if v31 else 0))
    drafter = Eagle3Drafter(spec)
    drafter.d2t.copy_(d2t)
    drafter.t2d.copy_(t2d)
    drafter.embed_tokens.weight.data.copy_(target.get_input_embeddings().weight.data)
    drafter.embed_tokens.weight.requires_grad_(False)  # frozen, shared with the target
    if init is not None:
        drafter.load_state_dict({**init, "embed_tokens.weight": drafter.embed_tokens.weight.data}, strict=True)
    drafter.to(device)
    params = [p for p in drafter.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(SEED + 7)
    data = data or mixed_batches(stream, pool, gen, corpus, pool_batch)
    t0 = time.time()
    for step in range(steps):
        if deadline is not None and time.time() > deadline:
            log(f"drafter: deadline reached at step {step} of {steps}")
            break
        for g in opt.param_groups:
            g["lr"] = cosine_lr(step, steps, lr)
        batch = next(data)
        if isinstance(batch, tuple):
            x, feats, logits = batch
            x, feats, logits = x.to(device), [a.to(device).float() for a in feats], logits.to(device).float()
        else:
            x = batch.to(device)
            feats, logits = target_features(target, x, aux)
            logits = logits[..., used]
        slots = x.shape[1] - 1
        feats = [a[:, :slots] for a in feats]
        teacher = torch.stack([F.pad(x[:, s + 2 :], (0, s + 1)) for s in range(depth - 1)])[:, :, :slots]
        chains = drafter.draft_chains(feats, x[:, 1:], depth, teacher_tokens=teacher, keep_logits=True)
        loss = 0.0
        for s, out in enumerate(chains.logits):  # depth s+1 predicts token t+s+2 = target argmax at t+s+1
            valid = slots - s - 1
            tgt = logits[:, s + 1 : s + 1 + valid].softmax(-1)
            loss = loss + (0.8**s) * -(tgt * out[:, :valid].log_softmax(-1)).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % log_every == 0 or step == steps - 1:
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
        t = t.detach().cpu().clone()
        state[name] = t.half() if t.is_floating_point() else t
    torch.save(state, out / "pytorch_model.bin")
    spec = drafter.spec
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": spec.hidden_size,
        **spec.layer_config,
        "num_hidden_layers": 1,
        "vocab_size": spec.vocab_size,
        "draft_vocab_size": spec.draft_vocab_size,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }
    if v31:
        cfg.update({"fc_norm": True, "norm_output": True})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def save_canonical(drafter: Eagle3Drafter, out: Path) -> None:
    """The canonical EAGLE 3.1 schema (formats/eagle31.py): safetensors in canonical names, no embed_tokens (the
    target's), fp16 weights; the config from eaglezoo's own writer, so the aux ids are top-level (boundary) and
    nested (layer-output), and all four norm flags are explicit."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {
        name: (t.detach().cpu().half() if t.is_floating_point() else t.detach().cpu()).contiguous()
        for name, t in drafter.state_dict().items()
        if not name.startswith("embed_tokens")
    }
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(eagle31.write_config(drafter.spec, "float16"), indent=2) + "\n")


def only_eagle3(args) -> None:
    """One plain EAGLE-3 drafter on the existing target's boundary taps `args.aux_layers`, as in `main`'s loop."""
    if not args.reuse_target or not (args.out / "target" / "model.safetensors").is_file():
        raise SystemExit("--only-eagle3 trains against an existing target: give --reuse-target and an OUT with target/")
    torch.manual_seed(SEED)
    lines, log = logger()
    log(f"only the plain EAGLE-3 drafter, boundary taps {args.aux_layers}, into {args.out / args.only_eagle3}")
    target, stream, pool = distillation_data(args.out / "target", args.pool, log)
    spec = drafter_spec(False, aux=args.aux_layers)
    drafter = train_drafter(target, stream, pool, False, args.drafter_steps, args.depth, log, spec=spec)
    save_canonical(drafter, args.out / args.only_eagle3)
    (args.out / f"train_log.{args.only_eagle3}.txt").write_text("\n".join(lines) + "\n")


def int_list(text: str) -> list[int]:
    """A comma-separated list of ids (the CLI flags of the training scripts)."""
    return [int(x) for x in text.split(",")]


def write_prompts(held: list[str], path: Path):
    """Held-out prompts: paragraph starts of topics the models never saw, plus long and chat-wrapped ones."""
    rng = random.Random(SEED)
    paragraphs = [p.strip() for text in held for p in text.split("\n\n") if len(p.strip()) > 120]
    rng.shuffle(paragraphs)
    rows = [{"bucket": "short", "prompt": p[:240]} for p in paragraphs[:24]]
    longest = sorted(held, key=len, reverse=True)
    rows += [{"bucket": "long-context", "prompt": text[:2400]} for text in longest[:4]]
    templates = ["User: {q}\nAssistant:", "<|user|>\n{q}\n<|assistant|>\n", "### Question\n{q}\n\n### Answer\n"]
    rows += [
        {"bucket": "chat-perturbed", "prompt": templates[i % 3].format(q=p[:160])}
        for i, p in enumerate(paragraphs[24:32])
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("examples/tiny"))
    ap.add_argument("--target-steps", type=int, default=900)  # more over-fits: harder to draft for (docs/benchmarks.md)
    ap.add_argument("--drafter-steps", type=int, default=1600)
    ap.add_argument("--depth", type=int, default=3, help="training-time test (TTT) depth")
    ap.add_argument("--pool", type=int, default=512, help="target-generated training sequences")
    ap.add_argument("--reuse-target", action="store_true", help="keep OUT/target from an earlier run of this script")
    ap.add_argument(
        "--aux-layers", type=int_list, default=AUX_BOUNDARY, help="the drafters' taps, boundary ids (2,3,4)"
    )
    ap.add_argument(
        "--only-eagle3", metavar="NAME", help="train only the plain EAGLE-3 drafter into OUT/NAME (canonical schema)"
    )
    args = ap.parse_args()
    if args.only_eagle3:
        only_eagle3(args)
        return
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

    target_dir = args.out / "target"
    if args.reuse_target and (target_dir / "model.safetensors").is_file():
        from transformers import LlamaForCausalLM

        target = LlamaForCausalLM.from_pretrained(target_dir).eval()  # training is seeded: same weights
        log(f"target reused from {target_dir}")
    else:
        target = train_target(stream, args.target_steps, log)
        target.save_pretrained(target_dir)
        tokenizer.save_pretrained(target_dir)

    pool = self_distillation_pool(target, stream, args.pool, log)
    if args.aux_layers != AUX_BOUNDARY:  # SafeAILab configs carry no ids: the log is where the taps are said
        log(f"drafters on boundary taps {args.aux_layers}: convert with --aux-layers and --aux-convention boundary")
    for v31, name in ((False, "eagle3-safeai"), (True, "eagle31-safeai")):
        spec = drafter_spec(v31, aux=args.aux_layers)
        drafter = train_drafter(target, stream, pool, v31, args.drafter_steps, args.depth, log, spec=spec)
        save_safeai(drafter, args.out / name, v31)

    write_prompts(held, args.out / "prompts.jsonl")
    (args.out / "train_log.txt").write_text("\n".join(log_lines) + "\n")


if __name__ == "__main__":
    main()
