#!/usr/bin/env python3
"""Benchmark `eaglezoo verify --engine vllm` against the engine's own plain generation of the same tokens.

Both sides start the same vLLM engine (same target, the same converted drafter, same K, dtype and
prompts as token ids) and warm it up; engine start is excluded from the ratios and reported apart.

* loop ratio: eaglezoo's measured pass (requests driven through LLMEngine.add_request/step with
  per-request spec-decode metrics, counters read before and after) / `llm.generate` of the same
  prompts, both timed inside their engine process;
* end-to-end ratio: (verify's whole wall time - its engine start) / (the plain script's whole wall
  time - its engine start): conversion, tokenisation, subprocess and imports included.

    python -m scripts.bench.verify --engine vllm --engine-python .venv-vllm/bin/python [--prompts 32] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples" / "tiny"
CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "HF_HUB_OFFLINE": "1",
}
PLAIN = """
import json, sys, time
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
if __name__ == "__main__":
    req = json.load(open(sys.argv[1]))
    t0 = time.perf_counter()
    llm = LLM(model=req["target"], dtype="float32", max_model_len=1024, enforce_eager=True, disable_log_stats=False,
              enable_prefix_caching=False, speculative_config={"method": "eagle3", "model": req["drafter"],
              "num_speculative_tokens": req["k"]})
    start = time.perf_counter() - t0
    prompts = [TokensPrompt(prompt_token_ids=p) for p in req["prompts"]]
    params = SamplingParams(temperature=0.0, max_tokens=req["max_tokens"], ignore_eos=True, detokenize=False)
    llm.generate(prompts[:1], SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True), use_tqdm=False)
    t1 = time.perf_counter()
    llm.generate(prompts, params, use_tqdm=False)
    print(json.dumps({"start_s": start, "generate_s": time.perf_counter() - t1}))
"""


def run(args: argparse.Namespace) -> None:
    env = {**os.environ, **CPU_ENV}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        drafter = tmp / "drafter"
        subprocess.run(
            [sys.executable, "-m", "eaglezoo", "convert", "tiny-example-eagle31", str(drafter)],
            check=True,
            capture_output=True,
            cwd=ROOT,
            timeout=300,
        )
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(EX / "target")
        rows = [json.loads(x) for x in (EX / "prompts.jsonl").read_text().splitlines()]
        rows = [r for r in rows if r.get("bucket") != "long-context"][: args.prompts]
        (tmp / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        request = {
            "target": str(EX / "target"),
            "drafter": str(drafter),
            "k": args.k,
            "max_tokens": args.new_tokens,
            "prompts": [tok(r["prompt"], add_special_tokens=False)["input_ids"] for r in rows],
        }
        (tmp / "request.json").write_text(json.dumps(request))
        (tmp / "plain.py").write_text(PLAIN)
        verify_cmd = [
            sys.executable,
            "-m",
            "eaglezoo",
            "verify",
            "tiny-example-eagle31",
            "--prompts",
            str(tmp / "prompts.jsonl"),
            "-k",
            str(args.k),
            "--max-new-tokens",
            str(args.new_tokens),
            "--engine",
            "vllm",
            "--engine-python",
            args.engine_python,
            "--dtype",
            "float32",
            "--enforce-eager",
            "--max-model-len",
            "1024",
            "--json",
        ]
        plain_cmd = [args.engine_python, str(tmp / "plain.py"), str(tmp / "request.json")]
        runs = {"verify": [], "plain": []}
        for _ in range(args.reps):
            for name, cmd in (("verify", verify_cmd), ("plain", plain_cmd)):
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200)
                wall = time.perf_counter() - t0
                assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: a registry floor not met; still measured
                data = json.loads(proc.stdout.strip().splitlines()[-1] if name == "plain" else proc.stdout)
                if name == "verify":
                    data = {
                        "start_s": data["timing"]["engine_start_s"],
                        "generate_s": data["timing"]["measure_s"],
                        "al": data["mean_acceptance_length"],
                    }
                runs[name].append({**data, "wall_s": wall})
    med = {
        name: {key: statistics.median(r[key] for r in rs) for key in ("start_s", "generate_s", "wall_s")}
        for name, rs in runs.items()
    }
    v, p = med["verify"], med["plain"]
    result = {
        "prompts": len(rows),
        "new_tokens": args.new_tokens,
        "k": args.k,
        "reps": args.reps,
        "median": med,
        "loop_ratio": v["generate_s"] / p["generate_s"],
        "end_to_end_ratio": (v["wall_s"] - v["start_s"]) / (p["wall_s"] - p["start_s"]),
        "runs": runs,
    }
    print(
        f"{len(rows)} prompts x {args.new_tokens} tokens, K={args.k}: measured pass {v['generate_s']:.2f} s vs "
        f"llm.generate {p['generate_s']:.2f} s (loop ratio {result['loop_ratio']:.2f}); wall without engine start "
        f"{v['wall_s'] - v['start_s']:.1f} s vs {p['wall_s'] - p['start_s']:.1f} s (end-to-end ratio "
        f"{result['end_to_end_ratio']:.2f}); engine start {v['start_s']:.1f} s / {p['start_s']:.1f} s"
    )
    print(json.dumps(result, indent=2))
