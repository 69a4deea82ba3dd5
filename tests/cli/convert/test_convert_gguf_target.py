"""convert TARGET OUT --to gguf: the example target (a plain causal LM, no drafter) as llama.cpp b11434 reads it,
written by eaglezoo where llama.cpp's own converter refuses its tokenizer (the record, the dropped rope frequencies);
what eaglezoo does not write for llama.cpp refused in one line naming llama.cpp's converter. The comparison with that
converter's output runs the converter: tests/engine/test_convert_gguf_target_vs_llamacpp.py."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, assert_clean_failure, run_inprocess
from support import llamacpp
from support.gguf_example import converted

TARGET = EXAMPLE / "target"

# Not a difference in the file, but in how it was made: llama.cpp's converter refuses this tokenizer ("BPE
# pre-tokenizer was not recognized", conversion/base.py:1958) and writes tokenizer.ggml.pre "gpt-2" only with the
# WORKAROUND; eaglezoo names it "gpt-2" from what tokenizer.json is (checkpoint/formats/gguf_tokenizer.py).


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return converted(tmp_path_factory.mktemp("gguf") / "target-gguf", TARGET)


def test_target_record_accounts_for_every_tensor(ours):
    out, shown = ours
    assert sorted(p.name for p in out.iterdir()) == ["conversion.json", "target.gguf"]
    record = json.loads((out / "conversion.json").read_text())
    from eaglezoo.checkpoint.tensors import Checkpoint

    source = set(Checkpoint(TARGET).refs)
    assert set(record["renames"]) == source and record["drops"] == {}
    assert len(record["gguf"]["tensors"]) == len(source) == 38
    assert record["gguf"]["tensors"]["blk.0.attn_q.weight"]["transform"] == "permute-q"
    assert record["gguf"]["keys"]["llama.block_count"] == 4 and record["dtype"] == "float32"
    assert shown["gguf"].endswith("target.gguf")


def test_rope_frequencies_are_dropped_with_their_reason(ours, tmp_path):
    """Older checkpoints carry `rotary_emb.inv_freq`: llama.cpp's converter skips it (conversion/base.py:1059), so
    eaglezoo drops it, recorded; the GGUF is the same."""
    import torch
    from safetensors.torch import load_file, save_file

    older = tmp_path / "older"
    shutil.copytree(TARGET, older)
    weights = load_file(older / "model.safetensors")
    weights["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(16)
    save_file(weights, older / "model.safetensors", metadata={"format": "pt"})
    out = tmp_path / "out"
    r = run_inprocess("convert", older, out, "--to", "gguf", "--json")
    assert r.code == 0, r.err
    record = json.loads((out / "conversion.json").read_text())
    assert list(record["drops"]) == ["model.layers.0.self_attn.rotary_emb.inv_freq"]
    assert "conversion/base.py:1059" in record["drops"]["model.layers.0.self_attn.rotary_emb.inv_freq"]
    assert len(record["renames"]) + len(record["drops"]) == 39
    a, b = llamacpp.tensors(ours[0] / "target.gguf"), llamacpp.tensors(out / "target.gguf")
    assert list(a) == list(b) and all(np.array_equal(a[n][2], b[n][2]) for n in a)


def test_dry_run_writes_nothing(tmp_path):
    out = tmp_path / "out"
    r = run_inprocess("convert", TARGET, out, "--to", "gguf", "--dry-run", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["plan"]["kind"] == "target" and not out.exists()


def test_refuses_a_non_llama_target(tmp_path):
    other = tmp_path / "qwen2"
    shutil.copytree(TARGET, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg.update(architectures=["Qwen2ForCausalLM"], model_type="qwen2")
    (other / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = run_inprocess("convert", other, out, "--to", "gguf")
    assert_clean_failure(r, out, contains="a Qwen2ForCausalLM: eaglezoo writes LlamaForCausalLM targets")
    assert "convert_hf_to_gguf.py" in r.err
    coded = run_inprocess("convert", other, out, "--to", "gguf", "--json")
    assert json.loads(coded.out)["code"] == "gguf-target-unsupported" and not out.exists()


def test_refuses_a_target_without_tokenizer_json(tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(TARGET, bare)
    (bare / "tokenizer.json").unlink()
    out = tmp_path / "out"
    r = run_inprocess("convert", bare, out, "--to", "gguf")
    assert_clean_failure(r, out, contains="has no tokenizer.json: eaglezoo writes the target's vocabulary from it")


def test_a_target_converted_to_a_drafter_format_says_what_it_is(tmp_path):
    out = tmp_path / "out"
    r = run_inprocess("convert", TARGET, out)
    assert_clean_failure(r, out, contains="is a target (a plain causal LM), not a drafter")
    assert "--to gguf" in r.err


def test_refuses_drafter_options_on_a_target(tmp_path):
    out = tmp_path / "out"
    r = run_inprocess("convert", TARGET, out, "--to", "gguf", *EXAMPLE_IDS)
    assert_clean_failure(r, out, contains="applies to a drafter")
