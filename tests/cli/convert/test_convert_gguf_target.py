"""convert TARGET OUT --to gguf: the example target (a plain causal LM, no drafter) as llama.cpp b11434 reads it,
written by eaglezoo where llama.cpp's own converter refuses its tokenizer, compared key for key and tensor for tensor
with that converter's output (run with tests/support/llamacpp.py's WORKAROUND), every difference named; what eaglezoo
does not write for llama.cpp refused in one line naming llama.cpp's converter."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, assert_clean_failure, run_inprocess, tree_digest
from support import llamacpp

TARGET = EXAMPLE / "target"

# Every key where eaglezoo's target GGUF deliberately differs from llama.cpp's converter's, with why.
DELIBERATE = {
    # cosmetic: the converter titles the folder name and adds a parameter-count label; eaglezoo names the folder.
    "general.name": ("Target", "target"),
    "general.size_label": ("820K", None),
}
# Not a difference in the file, but in how it was made: llama.cpp's converter refuses this tokenizer ("BPE
# pre-tokenizer was not recognized", conversion/base.py:1958) and writes tokenizer.ggml.pre "gpt-2" only with the
# WORKAROUND; eaglezoo names it "gpt-2" from what tokenizer.json is (checkpoint/formats/gguf_tokenizer.py).


@pytest.fixture(scope="module")
def src():
    return llamacpp.source_dir()


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf") / "target-gguf"
    before = tree_digest(TARGET)
    r = run_inprocess("convert", TARGET, out, "--to", "gguf", "--json")
    assert r.code == 0, r.err
    assert tree_digest(TARGET) == before
    return out, json.loads(r.out)


def test_target_gguf_matches_llamacpp_converter(src, ours, tmp_path):
    ref = tmp_path / "ref.gguf"
    r = llamacpp.convert(src, TARGET, None, ref, outtype="f32")
    assert r.returncode == 0, r.stderr[-2000:]
    out, _ = ours
    a, b = llamacpp.fields(ref), llamacpp.fields(out / "target.gguf")
    differ = {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert differ == DELIBERATE
    assert b["general.architecture"] == "llama" and b["tokenizer.ggml.pre"] == "gpt-2"
    ta, tb = llamacpp.tensors(ref), llamacpp.tensors(out / "target.gguf")
    assert list(ta) == list(tb)  # same names in the same order
    for name, (kind, shape, data) in ta.items():
        assert (kind, shape) == tb[name][:2], name
        assert np.array_equal(data, tb[name][2]), name


def test_llamacpp_converter_refuses_the_example_target(src, tmp_path):
    """Why eaglezoo writes the target itself: llama.cpp's converter stops on its tokenizer."""
    r = llamacpp.convert(src, TARGET, None, tmp_path / "ref.gguf", pre_workaround=False, outtype="f32")
    assert r.returncode != 0
    assert "BPE pre-tokenizer was not recognized" in r.stderr


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


def test_refuses_drafter_options_on_a_target(tmp_path):
    out = tmp_path / "out"
    r = run_inprocess("convert", TARGET, out, "--to", "gguf", *EXAMPLE_IDS)
    assert_clean_failure(r, out, contains="applies to a drafter")
