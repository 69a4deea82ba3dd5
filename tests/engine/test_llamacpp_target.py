"""The example target's GGUF written by eaglezoo (`eaglezoo convert TARGET OUT --to gguf`), served by a real
llama-server b11434: its greedy continuation of token ids equals transformers' on the same fp32 weights, token for
token; and serve-config --engine llamacpp's path, run as printed, drafts."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.request

import pytest
from conftest import CLI_ENV, EXAMPLE, ROOT, run_inprocess
from support import llamacpp_serve

TARGET = EXAMPLE / "target"
PROMPTS = ([1, 45, 210, 37, 88, 301, 12], [1, 500, 7, 900, 33])


def transformers_greedy(ids: list[int], n: int = 16) -> list[int]:
    """transformers' greedy continuation on the example target in fp32: argmax, one token at a time."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()
    seq = torch.tensor([ids])
    out: list[int] = []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(seq).logits[0, -1].argmax())
            out.append(nxt)
            seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
    return out


@pytest.fixture(scope="module")
def target_gguf(tmp_path_factory):
    out = tmp_path_factory.mktemp("target") / "target-gguf"
    r = run_inprocess("convert", TARGET, out, "--to", "gguf", "--json")
    assert r.code == 0, r.err
    return out / "target.gguf"


def test_llama_server_serves_eaglezoo_target_as_transformers(target_gguf, tmp_path):
    server = llamacpp_serve.binary()
    cmd = [str(server), "-m", str(target_gguf), "-t", "1", "-c", "512", "-np", "1"]
    with llamacpp_serve.serving(cmd, tmp_path / "server.log") as url:
        for ids in PROMPTS:
            got = llamacpp_serve.greedy(url, list(ids))
            assert got["tokens"] == transformers_greedy(list(ids)), ids
            assert len(got["tokens"]) == 16


def run_from(folder, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eaglezoo", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=folder,
        env={**CLI_ENV, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )


def test_the_printed_llamacpp_path_runs_and_drafts(tmp_path):
    """serve-config --engine llamacpp for the example EAGLE-3 entry, run as printed from where it was printed: both
    converts through the CLI, then the llama-server line (eaglezoo's binary, a port and one thread added); a greedy
    completion drafts."""
    server = llamacpp_serve.binary()
    here = tmp_path / "here"
    here.mkdir()
    os.symlink(ROOT / "examples", here / "examples")
    proc = run_from(here, "serve-config", "tiny-example-eagle3", "--engine", "llamacpp", "--json")
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)["steps"]
    assert len(steps) == 3
    for step in steps[:2]:
        words = shlex.split(step)
        assert words[0] == "eaglezoo"
        done = run_from(here, *words[1:])
        assert done.returncode == 0, (step, done.stderr)
    words = shlex.split(steps[2])
    assert words[0] == "llama-server"
    with llamacpp_serve.serving([str(server), *words[1:], "-t", "1", "-c", "512"], tmp_path / "server.log") as url:
        got = llamacpp_serve.post(
            url, "/completion", {"prompt": "The quick brown fox", "n_predict": 32, "temperature": 0}, timeout=300
        )
        assert got["timings"]["draft_n"] > 0, got["timings"]
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode()  # --metrics, as printed
        assert "llamacpp:spec_decode_num_drafts_total" in metrics
