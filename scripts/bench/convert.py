#!/usr/bin/env python3
"""Benchmark `eaglezoo convert` against `cp -r` and `speculators convert` (speculators 0.9.0).

Builds a synthetic drafter at Llama-3.1-8B geometry (hidden 4096, vocab 128256, draft vocab 32000,
one layer, bf16) in the SafeAILab layout, with and without `embed_tokens`, and times each tool
several times (median), recording peak RSS via /usr/bin/time -v (GNU time; falls back to
getrusage of the child). Every run reads a warm page cache; outputs go to the same disk.

    python -m scripts.bench.convert --reps 3 [--speculators .venv-speculators/bin/speculators]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

H, V, VD, HEADS, KV, FFN = 4096, 128256, 32000, 32, 8, 14336


def build(out: Path, embed: bool) -> int:
    out.mkdir(parents=True)
    g = torch.Generator().manual_seed(0)

    def w(*shape):
        return (torch.randn(*shape, generator=g, dtype=torch.float32) * 0.02).to(torch.bfloat16)

    d = H // HEADS
    state = {
        "fc.weight": w(H, 3 * H),
        "norm.weight": torch.ones(H, dtype=torch.bfloat16),
        "lm_head.weight": w(VD, H),
        "midlayer.input_layernorm.weight": torch.ones(H, dtype=torch.bfloat16),
        "midlayer.hidden_norm.weight": torch.ones(H, dtype=torch.bfloat16),
        "midlayer.post_attention_layernorm.weight": torch.ones(H, dtype=torch.bfloat16),
        "midlayer.self_attn.q_proj.weight": w(HEADS * d, 2 * H),
        "midlayer.self_attn.k_proj.weight": w(KV * d, 2 * H),
        "midlayer.self_attn.v_proj.weight": w(KV * d, 2 * H),
        "midlayer.self_attn.o_proj.weight": w(H, HEADS * d),
        "midlayer.mlp.gate_proj.weight": w(FFN, H),
        "midlayer.mlp.up_proj.weight": w(FFN, H),
        "midlayer.mlp.down_proj.weight": w(H, FFN),
    }
    used = torch.sort(torch.randperm(V, generator=g)[:VD]).values
    state["d2t"] = used - torch.arange(VD)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[used] = True
    state["t2d"] = t2d
    if embed:
        state["embed_tokens.weight"] = w(V, H)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": H,
        "intermediate_size": FFN,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "num_hidden_layers": 1,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 2048,
        "vocab_size": V,
        "draft_vocab_size": VD,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "hidden_act": "silu",
    }
    (out / "config.json").write_text(json.dumps(cfg))
    return (out / "model.safetensors").stat().st_size


def target_config(out: Path) -> Path:
    out.mkdir(parents=True)
    (out / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": H,
                "intermediate_size": FFN,
                "num_attention_heads": HEADS,
                "num_key_value_heads": KV,
                "num_hidden_layers": 32,
                "vocab_size": V,
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-5,
                "rope_theta": 500000.0,
            }
        )
    )
    return out


def timed(cmd: list[str], env=None) -> tuple[float, float]:
    """(wall seconds, peak RSS MB of the child)."""
    gnu_time = shutil.which("time") if os.path.exists("/usr/bin/time") else None
    full = ["/usr/bin/time", "-v", *cmd] if gnu_time else cmd
    t0 = time.perf_counter()
    proc = subprocess.run(full, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-2000:]}")
    if gnu_time:
        line = next(x for x in proc.stderr.splitlines() if "Maximum resident set size" in x)
        return wall, int(line.split()[-1]) / 1024
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--eaglezoo", default=str(Path(sys.executable).parent / "eaglezoo"))
    ap.add_argument("--speculators", default=".venv-speculators/bin/speculators")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-convert-"))
    target = target_config(work / "target")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    results = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "reps": args.reps,
        "cases": {},
    }
    for embed in (False, True):
        name = "with embed_tokens" if embed else "without embed_tokens"
        src = work / f"src-{int(embed)}"
        size = build(src, embed)
        tools = {
            "cp -r": lambda out, src=src: ["cp", "-r", str(src), str(out)],
            "eaglezoo convert": lambda out, src=src: [
                args.eaglezoo,
                "convert",
                str(src),
                str(out),
                "--aux-layers",
                "2,16,29",
                "--aux-convention",
                "boundary",
            ],
        }
        if Path(args.speculators).exists():
            tools["speculators convert"] = lambda out, src=src: [
                args.speculators,
                "convert",
                str(src),
                "--algorithm",
                "eagle3",
                "--verifier",
                str(target),
                "--output-path",
                str(out),
                "--algorithm-kwargs",
                '{"eagle_aux_hidden_state_layer_ids": [2, 16, 29]}',
            ]
        case = {"bytes": size, "tools": {}}
        for tool, cmd in tools.items():
            walls, rss = [], []
            for i in range(args.reps):
                out = work / f"out-{tool.split()[0]}-{int(embed)}-{i}"
                w, r = timed(cmd(out), env)
                walls.append(w)
                rss.append(r)
                shutil.rmtree(out, ignore_errors=True)
            case["tools"][tool] = {"median_s": statistics.median(walls), "walls_s": walls, "peak_rss_mb": max(rss)}
            print(
                f"{name:22} {tool:20} median {statistics.median(walls):6.2f} s  peak RSS {max(rss):7.0f} MB", flush=True
            )
        cp = case["tools"]["cp -r"]["median_s"]
        case["eaglezoo_vs_cp"] = case["tools"]["eaglezoo convert"]["median_s"] / cp
        results["cases"][name] = case
        shutil.rmtree(src)
    print(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
