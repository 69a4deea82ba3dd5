"""The example target's GGUF written by eaglezoo (`eaglezoo convert TARGET OUT --to gguf`), served by a real
llama-server b11434: its greedy continuation of token ids equals transformers' on the same fp32 weights, token for
token."""

from __future__ import annotations

import pytest
from conftest import EXAMPLE, run_cli
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
    r = run_cli("convert", TARGET, out, "--to", "gguf", "--json")
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
