"""convert --to gguf: the example EAGLE-3 drafter as llama.cpp b11434 reads it (the record, d2t as absolute ids), and
what llama.cpp cannot run refused in one line. The comparison with llama.cpp's own converter, key for key and tensor
for tensor, runs that converter: tests/engine/test_convert_gguf_vs_llamacpp.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, assert_clean_failure, run_inprocess
from support import llamacpp
from support.factory import make_drafter, make_spec
from support.gguf_example import converted

TARGET = EXAMPLE / "target"
DRAFTER = EXAMPLE / "eagle3-safeai"


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return converted(tmp_path_factory.mktemp("gguf") / "eagle3-gguf", DRAFTER, "--target", TARGET, *EXAMPLE_IDS)


def test_gguf_record(ours):
    out, _ = ours
    assert sorted(p.name for p in out.iterdir()) == ["conversion.json", "drafter.gguf"]
    record = json.loads((out / "conversion.json").read_text())
    assert record["to"] == "gguf" and record["gguf"]["llama_cpp"] == "b11434"
    keys = record["gguf"]["keys"]
    assert keys["eagle3.target_layers"] == [2, 3, 4]
    assert keys["eagle3.norm_before_residual"] is False and keys["eagle3.norm_before_fc"] is False
    assert keys["eagle3.target_hidden_size"] == 128 and keys["tokenizer.ggml.pre"] == "gpt-2"
    assert record["gguf"]["tensors"]["d2t"] == {
        "from": "d2t",
        "dtype": "I64",
        "shape": [512],
        "transform": "d2t-absolute",
    }
    assert record["drops"] == {
        "t2d": "llama.cpp b11434 does not read t2d (its converter skips it: conversion/llama.py:247-249)"
    }
    # the example's third tap is the target's last pre-norm state, which a Llama target never gives llama.cpp
    assert any("tap 4 is the target's last pre-norm state" in w for w in record["warnings"])
    # every source tensor accounted for: renamed into the GGUF or dropped with a reason
    assert len(record["renames"]) + len(record["drops"]) == 15


def test_d2t_written_as_absolute_ids(ours):
    import torch

    out, _ = ours
    offsets = torch.load(DRAFTER / "pytorch_model.bin", weights_only=True)["d2t"].numpy()
    _, _, d2t = llamacpp.tensors(out / "drafter.gguf")["d2t"]
    assert np.array_equal(d2t, offsets + np.arange(offsets.size))


def test_refuses_eagle31_flags(tmp_path):
    """The example 3.1 drafter has both flags: both reasons are named, and the engines that serve 3.1
    (serving.engine_support's floors for vLLM and SGLang)."""
    out = tmp_path / "out"
    r = run_inprocess("convert", EXAMPLE / "eagle31-safeai", out, "--to", "gguf", "--target", TARGET, *EXAMPLE_IDS)
    assert_clean_failure(r, out, contains="fc_norm (EAGLE 3.1)")
    assert "norm_output (EAGLE 3.1)" in r.err
    assert "vLLM >= 0.22.0" in r.err and "SGLang >= 0.5.23" in r.err and "native" in r.err


def test_refuses_fc_norm_alone_naming_why(tmp_path):
    """fc_norm without norm_output is still not llama.cpp's norm_before_fc: refused, with the reason."""
    spec = make_spec(hidden=128, target_hidden=128, vocab=1024, draft_vocab=512, fc_norm=True, ids=(2, 3, 4))
    src = make_drafter(tmp_path / "src", "speculators", spec=spec)
    out = tmp_path / "out"
    r = run_inprocess("convert", src, out, "--to", "gguf", "--target", TARGET)
    assert_clean_failure(r, out, contains="fc_norm (EAGLE 3.1)")
    assert "per aux state" in r.err and "concatenated" in r.err and "norm_output" not in r.err
    assert "SGLang >= 0.5.23" in r.err


def test_refuses_norm_output(tmp_path):
    spec = make_spec(hidden=128, target_hidden=128, vocab=1024, draft_vocab=512, norm_output=True, ids=(2, 3, 4))
    src = make_drafter(tmp_path / "src", "speculators", spec=spec)
    out = tmp_path / "out"
    r = run_inprocess("convert", src, out, "--to", "gguf", "--target", TARGET)
    assert_clean_failure(r, out, contains="norm_output (EAGLE 3.1)")


def test_refuses_four_taps(tmp_path):
    spec = make_spec(hidden=128, target_hidden=128, vocab=1024, draft_vocab=512, k=4, ids=(1, 2, 3, 4))
    src = make_drafter(tmp_path / "src", "speculators", spec=spec)
    out = tmp_path / "out"
    r = run_inprocess("convert", src, out, "--to", "gguf", "--target", TARGET)
    assert_clean_failure(r, out, contains="4 aux layers: llama.cpp b11434 reads exactly 3")


def test_needs_the_target(tmp_path):
    out = tmp_path / "out"
    r = run_inprocess("convert", DRAFTER, out, "--to", "gguf", *EXAMPLE_IDS)
    assert_clean_failure(r, out, contains="--to gguf needs the target")


def test_refuses_dflash_without_block_size(tmp_path):
    import shutil

    src = tmp_path / "dflash"
    shutil.copytree(EXAMPLE / "dflash", src)
    cfg = json.loads((src / "config.json").read_text())
    del cfg["block_size"]
    (src / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = run_inprocess("convert", src, out, "--to", "gguf", "--target", TARGET)
    assert_clean_failure(r, out, contains="no block_size stated")


def test_refuses_peagle(tmp_path):
    out = tmp_path / "out"
    r = run_inprocess("convert", EXAMPLE / "peagle", out, "--to", "gguf", "--target", TARGET)
    assert_clean_failure(r, out, contains="peagle drafter")


DSPARK = EXAMPLE / "dspark-llamacpp"


@pytest.mark.parametrize(
    "change, drop, why",
    [
        ({"markov_head_type": "gated"}, (), "markov_head_type 'gated'"),
        ({}, ("markov_head.markov_w1.weight",), "markov_head.markov_w1.weight is missing"),
    ],
    ids=["markov-type", "no-markov"],
)
def test_refuses_dspark_llamacpp_cannot_run(tmp_path, change, drop, why):
    """What llama.cpp b11434 would not run as trained: another Markov head (its converter refuses it,
    conversion/qwen.py:961-962); half a Markov head (llama-server would take it for DFlash without markov_w1,
    speculative.cpp:2378-2381): the reader refuses it first."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "d"
    shutil.copytree(DSPARK, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **change}))
    state = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in state.items() if k not in drop}, folder / "model.safetensors")
    out = tmp_path / "out"
    r = run_inprocess("convert", folder, out, "--to", "gguf", "--target", TARGET)
    assert_clean_failure(r, out, contains=why)
