"""The examples trained within llama.cpp's reach (examples/tiny/README.md): taps at boundary 1, 2, 3 of the 4-layer
target, all below L, so llama.cpp b11434 captures every one of them as a layer input (common/speculative.cpp:600-602).
Their configs state the taps where llama.cpp's converter reads them (the top-level
eagle_aux_hidden_state_layer_ids: conversion/llama.py:77-81; dflash_config.target_layer_ids + 1: conversion/qwen.py:
798-801; DSpark's top-level target_layer_ids, moved there: qwen.py:950-959), so llama.cpp's converter and
eaglezoo bake the same taps without a flag, and the GGUFs agree tensor for tensor."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLE, run_inprocess
from support import llamacpp

TARGET = EXAMPLE / "target"
COSMETIC = {"general.name", "general.size_label"}  # the converter titles the folder name and adds a size label


@pytest.fixture(scope="module")
def src():
    return llamacpp.source_dir()


@pytest.mark.parametrize(
    ("folder", "arch"), [("eagle3-llamacpp", "eagle3"), ("dflash-llamacpp", "dflash"), ("dspark-llamacpp", "dflash")]
)
def test_both_converters_bake_taps_1_2_3_without_flags(src, tmp_path, folder, arch):
    ref, out = tmp_path / "ref.gguf", tmp_path / "ours"
    r = llamacpp.convert(src, EXAMPLE / folder, TARGET, ref, outtype="f32")
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_inprocess(
        "convert", EXAMPLE / folder, out, "--to", "gguf", "--target", TARGET, "--dtype", "float32", "--json"
    )
    assert r.code == 0, r.err
    a, b = llamacpp.fields(ref), llamacpp.fields(out / "drafter.gguf")
    assert a[f"{arch}.target_layers"] == b[f"{arch}.target_layers"] == [1, 2, 3]
    assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} <= COSMETIC
    ta, tb = llamacpp.tensors(ref), llamacpp.tensors(out / "drafter.gguf")
    assert sorted(ta) == sorted(tb)
    for name, (kind, shape, data) in ta.items():
        assert (kind, shape) == tb[name][:2], name
        assert np.array_equal(data, tb[name][2]), name
    # no tap at L = 4 (the target's last pre-norm state, which llama.cpp's Llama graph never fills)
    warnings = " ".join(r.json()["plan"]["warnings"])
    assert "tap 4" not in warnings and "layer input tensor is null" not in warnings


def test_eagle3_example_is_plain_eagle3_with_every_flag_explicit():
    cfg = json.loads((EXAMPLE / "eagle3-llamacpp" / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert {k: cfg[k] for k in ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual")} == dict.fromkeys(
        ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual"), False
    )
