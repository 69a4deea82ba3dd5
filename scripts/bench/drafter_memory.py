#!/usr/bin/env python3
"""Peak memory of the drafter's chain drafting against sequence length T: the chunked attention in
`eaglezoo.verify.drafter` ("new") against the whole T x T softmax it replaced ("old", kept below as the
reference the tests compare with). Each (implementation, T) runs in a fresh process.

A child builds the example's EAGLE 3.1 drafter (4 heads over 2 kv heads, hidden 128, fp32, CPU),
warms up on 16 slots, then drafts K tokens from every slot of one random T-slot sequence. It
reports its peak resident memory (ru_maxrss) after set-up and after drafting; the difference is
what drafting at length T costs. torch allocations are invisible to tracemalloc, not to ru_maxrss.

glibc's malloc raises its mmap threshold each time a large block is freed, after which freed
blocks stay in the heap and count in the resident size. Children therefore run with
MALLOC_MMAP_THRESHOLD_=131072 (a fixed threshold: large blocks go back to the system when freed),
so the peak follows what is alive; --default-malloc measures the allocator as it comes.

    .venv/bin/python -m scripts.bench.drafter_memory [--lengths 1024,2048,4096,8192,16384] [--impls new,old] [-k 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def expand(attn, kv: torch.Tensor) -> torch.Tensor:
    """Each kv head repeated for the query heads that read it."""
    return kv.repeat_interleave(attn.n_heads // attn.n_kv, dim=-2)


def whole_softmax(self, x, cos, sin, cache):
    """`Attention.forward` as first written: every score of the T x T matrix at once."""
    q, k, v = self.project(x, cos, sin)
    if cache.prefix_k is None:
        cache.prefix_k, cache.prefix_v = k, v
    else:
        cache.extra_k.append(k)
        cache.extra_v.append(v)
    pk, pv = expand(self, cache.prefix_k), expand(self, cache.prefix_v)
    b, t = q.shape[:2]
    scores = torch.einsum("bthd,bshd->bhts", q, pk).float() * self.scale
    scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    if cache.extra_k:
        ek, ev = expand(self, torch.stack(cache.extra_k, 2)), expand(self, torch.stack(cache.extra_v, 2))
        scores = torch.cat([scores, torch.einsum("bthd,btrhd->bhtr", q, ek).float() * self.scale], dim=-1)
    probs = scores.softmax(-1).to(q.dtype)
    out = torch.einsum("bhts,bshd->bthd", probs[..., :t], pv)
    if cache.extra_k:
        out = out + torch.einsum("bhtr,btrhd->bthd", probs[..., t:], ev)
    return self.o_proj(out.reshape(b, t, -1))


def example_drafter():
    from safetensors.torch import load_file

    from eaglezoo.checkpoint.config import target_config
    from eaglezoo.checkpoint.formats.base import ReadOptions
    from eaglezoo.checkpoint.read import read_drafter
    from eaglezoo.verify.drafter import build_drafter

    ex = ROOT / "examples" / "tiny"
    opts = ReadOptions(aux_layers=[2, 3, 4], aux_convention="boundary", target_config=target_config(ex / "target"))
    read = read_drafter(ex / "eagle31-safeai", None, opts)
    embed = load_file(ex / "target" / "model.safetensors")["model.embed_tokens.weight"]
    return build_drafter(read.spec, read.state(), embed=embed)


def child(impl: str, t: int, k: int) -> dict:
    from eaglezoo.verify.drafter import Attention

    if impl == "old":
        Attention.forward = whole_softmax
    drafter = example_drafter()
    hidden, vocab = drafter.spec.target_hidden_size, drafter.spec.vocab_size
    g = torch.Generator().manual_seed(0)

    def draft(n):
        aux = [torch.randn(n, hidden, generator=g) for _ in range(drafter.spec.num_aux)]
        with torch.inference_mode():
            return drafter.draft_chains(aux, torch.randint(0, vocab, (n,), generator=g), k)

    draft(16)
    aux_bytes = drafter.spec.num_aux * t * hidden * 4
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    draft(t)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "impl": impl,
        "T": t,
        "k": k,
        "setup_peak_mb": base / 1024,
        "peak_mb": peak / 1024,
        "drafting_mb": (peak - base) / 1024,
        "inputs_mb": aux_bytes / 2**20,
        "seconds": seconds,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="1024,2048,4096,8192,16384")
    ap.add_argument("--impls", default="new,old")
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--default-malloc", action="store_true", help="leave glibc's dynamic mmap threshold on")
    ap.add_argument("--child", nargs=2, metavar=("IMPL", "T"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.k)))
        return
    env = dict(os.environ) if args.default_malloc else {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    rows = []
    for t in [int(x) for x in args.lengths.split(",")]:
        for impl in args.impls.split(","):
            child_cmd = [
                sys.executable,
                "-m",
                "scripts.bench.drafter_memory",
                "--child",
                impl,
                str(t),
                "-k",
                str(args.k),
            ]
            proc = subprocess.run(child_cmd, capture_output=True, text=True, env=env, cwd=ROOT)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["killed"])[-1]
                rows.append({"impl": impl, "T": t, "failed": f"exit {proc.returncode}: {tail}"})
            else:
                rows.append(json.loads(proc.stdout))
            r = rows[-1]
            print(
                f"T={t:6d} {impl}: "
                + (
                    r["failed"]
                    if "failed" in r
                    else f"drafting {r['drafting_mb']:8.1f} MB (peak {r['peak_mb']:.0f} MB, "
                    f"set-up {r['setup_peak_mb']:.0f} MB), {r['seconds']:.2f} s"
                ),
                flush=True,
            )
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
