#!/usr/bin/env python3
"""Benchmark `eaglezoo verify` against plain greedy generation, and its prompt batching.

For each pair: (a) plain `model.generate` of N tokens per prompt, one prompt at a time, no hooks;
(b) eaglezoo's native measurement loop (`verify_native.run_batches`: target greedy generation of
N + K tokens with aux capture, then batched drafting from every position) at each `--batch-sizes`
value; the accepted lengths must be identical at every batch size (checked). Model loading is
excluded. Pairs: the embedded example, and a random-weight pair at SmolLM2-135M geometry (30 layers,
hidden 576) for a deeper target.

    python -m scripts.bench.verify [--device auto] [--reps 3] [--prompts 32] [--batch-sizes 1,8,16]
    python -m scripts.bench.verify --example-only --prompts 32 --batch-sizes 1,8,16,32
    python -m scripts.bench.verify --pair DRAFTER TARGET PROMPTS   # also a real pair (e.g. the real-model tier)
    # see scripts/bench/verify_engine.py:
    python -m scripts.bench.verify --engine vllm --engine-python .venv-vllm/bin/python
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from eaglezoo.checkpoint.config import target_config
from eaglezoo.checkpoint.formats.base import ReadOptions
from eaglezoo.checkpoint.read import read_drafter
from eaglezoo.verify.drafter import build_drafter
from eaglezoo.verify.native import run_batches
from eaglezoo.verify.target import Target, resolve_device, resolve_dtype
from eaglezoo.verify.workload import load_prompts

ROOT = Path(__file__).resolve().parents[2]


def smollm_geometry_pair(work: Path):
    """Random weights at SmolLM2-135M geometry: timing only, acceptance meaningless."""
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    cfg = LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(work / "target")
    PreTrainedTokenizerFast.from_pretrained(ROOT / "examples/tiny/target").save_pretrained(work / "target")
    from eaglezoo.checkpoint.spec import AuxLayers, DrafterSpec
    from eaglezoo.verify.drafter import Eagle3Drafter

    spec = DrafterSpec(
        arch="llama",
        architectures=["LlamaForCausalLMEagle3"],
        num_layers=1,
        hidden_size=576,
        target_hidden_size=576,
        vocab_size=49152,
        draft_vocab_size=49152,
        num_aux=3,
        aux=AuxLayers(ids=(2, 15, 27), convention="boundary"),
        layer_config={
            "model_type": "llama",
            "intermediate_size": 1536,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "head_dim": 64,
            "max_position_embeddings": 2048,
        },
    )
    state = {k: v for k, v in Eagle3Drafter(spec).state_dict().items() if k != "embed_tokens.weight"}
    (work / "drafter").mkdir()
    save_file(state, str(work / "drafter" / "model.safetensors"), metadata={"format": "pt"})
    from eaglezoo.checkpoint.formats.eagle31 import write_config

    (work / "drafter" / "config.json").write_text(json.dumps(write_config(spec, "float32")))
    return work / "drafter", work / "target", {}


def bench(  # noqa: PLR0913 - a script's settings, each named at its call
    drafter_dir: Path,
    target_dir: Path,
    opts: dict,
    prompts,
    device: str,
    n: int,
    k: int,
    reps: int,
    batch_sizes: list[int],
):
    device = resolve_device(device)
    dtype = resolve_dtype("auto", device)
    target = Target(target_dir, device=device, dtype=dtype)
    read = read_drafter(drafter_dir, None, ReadOptions(**opts, target_config=target_config(target_dir)))
    drafter = build_drafter(
        read.spec, read.state(), embed=target.input_embeddings().detach(), dtype=dtype, device=device
    )
    boundary = read.spec.aux.boundary()
    ids = [target.tokenizer(p.prompt, add_special_tokens=False)["input_ids"] for p in prompts]
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    paths, split = {}, {b: [] for b in batch_sizes}

    def plain():
        for x in ids:
            t = torch.tensor([x], device=target.model.device)
            target.model.generate(
                t,
                attention_mask=torch.ones_like(t),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=0,
            )
        sync()

    def measure(batch_size):
        results, t_target, t_drafter = run_batches(target, drafter, boundary, ids, k, n, batch_size)
        sync()
        paths[batch_size] = [r.path for r in results]
        split[batch_size].append({"target_s": t_target, "drafter_s": t_drafter})

    runs = [("plain_generate_s", plain)] + [(f"verify_batch{b}_s", lambda b=b: measure(b)) for b in batch_sizes]
    with torch.inference_mode():
        for _, fn in runs:  # warm-up
            fn()
        times = {name: [] for name, _ in runs}
        for _ in range(reps):
            for name, fn in runs:
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(v) for name, v in times.items()}
    first = med[f"verify_batch{batch_sizes[0]}_s"]
    return {
        "device": device,
        "dtype": str(dtype),
        "prompts": len(ids),
        "new_tokens": n,
        "k": k,
        **med,
        "ratio": first / med["plain_generate_s"],
        "speedup_over_first_batch_size": {b: first / med[f"verify_batch{b}_s"] for b in batch_sizes},
        "identical_across_batch_sizes": all(p == paths[batch_sizes[0]] for p in paths.values()),
        "runs": times,
        "target_drafter_split": {b: v[1:] for b, v in split.items()},
    }  # the warm-up's dropped


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--batch-sizes", default="1,8", help="native: batch sizes to time (the first is the baseline)")
    ap.add_argument("--example-only", action="store_true", help="native: skip the random SmolLM2-geometry pair")
    ap.add_argument(
        "--pair",
        nargs=3,
        type=Path,
        metavar=("DRAFTER", "TARGET", "PROMPTS"),
        help="also time this converted drafter against its target on the first --prompts of these prompts",
    )
    ap.add_argument("--engine", choices=["native", "vllm"], default="native")
    ap.add_argument("--engine-python", help="--engine vllm: the interpreter that has vLLM")
    ap.add_argument("--prompts", type=int, default=32, help="number of prompts (the example set's first N)")
    args = ap.parse_args()
    if args.engine == "vllm":
        from bench_verify_engine import run

        return run(args)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    ex = ROOT / "examples" / "tiny"
    prompts = load_prompts(ex / "prompts.jsonl")[: args.prompts]
    common = (args.device, args.new_tokens, args.k, args.reps, sizes)
    ids = {"aux_layers": [2, 3, 4], "aux_convention": "boundary"}
    results = {
        "example eagle31 (4 layers, hidden 128)": bench(ex / "eagle31-safeai", ex / "target", ids, prompts, *common)
    }
    if not args.example_only:
        with tempfile.TemporaryDirectory() as tmp:
            d, t, o = smollm_geometry_pair(Path(tmp))
            results["SmolLM2-135M geometry, random weights (30 layers, hidden 576)"] = bench(d, t, o, prompts, *common)
    if args.pair:
        drafter, target, prompts_file = args.pair
        results[f"{drafter.name} -> {target.name}"] = bench(
            drafter, target, {}, load_prompts(prompts_file)[: args.prompts], *common
        )
    for name, r in results.items():
        batches = ", ".join(
            f"batch {b} {r[f'verify_batch{b}_s']:.2f} s ({r['speedup_over_first_batch_size'][b]:.2f}x)" for b in sizes
        )
        print(
            f"{name}: plain {r['plain_generate_s']:.2f} s; verify {batches}; ratio {r['ratio']:.2f}; identical "
            f"{r['identical_across_batch_sizes']} ({r['prompts']} prompts x {r['new_tokens']} tokens, {r['device']})"
        )
        for b, runs in r["target_drafter_split"].items():
            target_s = statistics.median(x["target_s"] for x in runs)
            drafter_s = statistics.median(x["drafter_s"] for x in runs)
            print(f"  batch {b}: target {target_s:.2f} s, drafter {drafter_s:.2f} s (medians)")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
