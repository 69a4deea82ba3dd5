"""convert --to gguf against llama.cpp b11434's own converter (the pinned sdist's convert_hf_to_gguf.py, run by
tests/support/llamacpp.py): the example drafters compared key for key and tensor for tensor, every difference named.
In the engine tier because each test runs the engine's own converter (torch, transformers and gguf imported again)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, run_inprocess
from support import llamacpp
from support.gguf_example import converted

TARGET = EXAMPLE / "target"


DRAFTER = EXAMPLE / "eagle3-safeai"


# Every key where eaglezoo's GGUF deliberately differs from llama.cpp's converter's, with why.
DELIBERATE = {
    # llama.cpp's converter takes only a top-level eagle_aux_hidden_state_layer_ids and otherwise bakes
    # [2, L//2, L-3] (conversion/llama.py:77-81): [2, 2, 1] for the 4-layer target. eaglezoo writes the ids the
    # drafter was trained on (boundary 2, 3, 4, stated with --aux-layers since SafeAILab configs carry none).
    "eagle3.target_layers": ([2, 2, 1], [2, 3, 4]),
    # cosmetic: the converter titles the folder name and adds a parameter-count label; eaglezoo names the folder.
    "general.name": ("Eagle3 Safeai", "eagle3-safeai"),
    "general.size_label": ("443K", None),
}


@pytest.fixture(scope="module")
def src():
    return llamacpp.source_dir()


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return converted(tmp_path_factory.mktemp("gguf") / "eagle3-gguf", DRAFTER, "--target", TARGET, *EXAMPLE_IDS)


DSPARK = EXAMPLE / "dspark-llamacpp"


# cosmetic, as for DFlash: the converter titles the folder name and adds a parameter-count label.
DSPARK_DELIBERATE = {"general.name": ("Dspark Llamacpp", "dspark-llamacpp"), "general.size_label": ("287K", None)}


def same_gguf(ref, ours, deliberate: dict) -> dict:
    """llama.cpp's converter's GGUF and eaglezoo's: the keys that differ are exactly `deliberate`, the tensors the
    same names, types, shapes and bytes; eaglezoo's keys returned."""
    a, b = llamacpp.fields(ref), llamacpp.fields(ours)
    assert {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == deliberate
    ta, tb = llamacpp.tensors(ref), llamacpp.tensors(ours)
    assert sorted(ta) == sorted(tb)
    for name, (kind, shape, data) in ta.items():
        assert (kind, shape) == tb[name][:2], name
        assert np.array_equal(data, tb[name][2]), name
    return b


def test_llamacpp_converter_refuses_the_example_tokenizer(src, tmp_path):
    """The fact the workaround answers: without it llama.cpp's converter stops on the example target's tokenizer."""
    r = llamacpp.convert(src, DRAFTER, TARGET, tmp_path / "ref.gguf", pre_workaround=False)
    assert r.returncode != 0
    assert "BPE pre-tokenizer was not recognized" in r.stderr


def test_gguf_matches_llamacpp_converter(src, ours, tmp_path):
    ref = tmp_path / "ref.gguf"
    r = llamacpp.convert(src, DRAFTER, TARGET, ref)
    assert r.returncode == 0, r.stderr[-2000:]
    out, _ = ours
    a, b = llamacpp.fields(ref), llamacpp.fields(out / "drafter.gguf")
    differ = {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert differ == DELIBERATE
    ta, tb = llamacpp.tensors(ref), llamacpp.tensors(out / "drafter.gguf")
    # same names; the order is not (llama.cpp's converter writes d2t last, eaglezoo in the source's order), and
    # llama.cpp finds tensors by name (src/models/eagle3.cpp:47-99)
    assert sorted(ta) == sorted(tb)
    for name, (kind, shape, data) in ta.items():
        assert (kind, shape) == tb[name][:2], name
        assert np.array_equal(data, tb[name][2]), name


def test_dflash_gguf_matches_llamacpp_converter(src, tmp_path):
    """The example DFlash drafter: every tensor byte-identical to llama.cpp's converter's; the keys differ only in
    the cosmetic name and size label (its taps [2, 3, 4] are the z-lab ids + 1 in both: conversion/qwen.py:798-801)."""
    ref, out = tmp_path / "ref.gguf", tmp_path / "dflash-gguf"
    r = llamacpp.convert(src, EXAMPLE / "dflash", TARGET, ref)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_inprocess("convert", EXAMPLE / "dflash", out, "--to", "gguf", "--target", TARGET, "--json")
    assert r.code == 0, r.err
    a, b = llamacpp.fields(ref), llamacpp.fields(out / "drafter.gguf")
    differ = {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert differ == {"general.name": ("Dflash", "dflash"), "general.size_label": ("222K", None)}
    assert b["dflash.target_layers"] == [2, 3, 4] and b["dflash.block_size"] == 4
    assert b["tokenizer.ggml.mask_token_id"] == 1023
    ta, tb = llamacpp.tensors(ref), llamacpp.tensors(out / "drafter.gguf")
    assert sorted(ta) == sorted(tb)
    for name, (kind, shape, data) in ta.items():
        assert (kind, shape) == tb[name][:2], name
        assert np.array_equal(data, tb[name][2]), name
    # on this 4-layer Llama target, tap 4 stops llama-server: written, with the finding
    assert any("layer input tensor is null" in w for w in r.json()["plan"]["warnings"])


def test_fp32_gguf_matches_llamacpp_outtype_f32(src, tmp_path):
    """--dtype float32 against llama.cpp's --outtype f32 (the fp32 pair the fidelity check serves)."""
    ref, out = tmp_path / "ref.gguf", tmp_path / "f32"
    assert llamacpp.convert(src, DRAFTER, TARGET, ref, outtype="f32").returncode == 0
    r = run_inprocess("convert", DRAFTER, out, "--to", "gguf", "--target", TARGET, *EXAMPLE_IDS, "--dtype", "float32")
    assert r.code == 0, r.err
    ta, tb = llamacpp.tensors(ref), llamacpp.tensors(out / "drafter.gguf")
    assert {n: t[0] for n, t in tb.items()} == {n: t[0] for n, t in ta.items()}
    assert all(np.array_equal(ta[n][2], tb[n][2]) for n in ta)
    assert llamacpp.fields(out / "drafter.gguf")["general.file_type"] == llamacpp.fields(ref)["general.file_type"] == 0


def test_dspark_gguf_matches_llamacpp_converter(src, tmp_path):
    """The example DSpark drafter (DeepSpec form): every key and tensor as llama.cpp's converter writes them
    (conversion/qwen.py:924-1012), the cosmetic name and size label apart; its anchor and confidence-head facts
    written explicitly."""
    ref, out = tmp_path / "ref.gguf", tmp_path / "dspark-gguf"
    r = llamacpp.convert(src, DSPARK, TARGET, ref)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_inprocess("convert", DSPARK, out, "--to", "gguf", "--target", TARGET, "--json")
    assert r.code == 0, r.err
    b = same_gguf(ref, out / "drafter.gguf", DSPARK_DELIBERATE)
    assert b["dflash.target_layers"] == [1, 2, 3] and b["dflash.block_size"] == 4
    assert b["dflash.sample_from_anchor"] is True and b["dflash.has_confidence_head"] is False
    assert {"markov_w1.weight", "markov_w2.weight"} <= set(llamacpp.tensors(out / "drafter.gguf"))
    assert r.json()["plan"]["warnings"] == []  # every tap inside llama.cpp's reach
    assert any("sample_from_anchor true" in d for d in r.json()["plan"]["decisions"])


def test_dspark_confidence_head_matches_llamacpp_converter(src, tmp_path):
    """A DSpark drafter with a confidence head (the example plus conf_proj): written as `conf_proj` and
    `has_confidence_head` true, as llama.cpp's converter does (qwen.py:974-976, tensor_mapping.py:1487-1489)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "conf"
    shutil.copytree(DSPARK, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(enable_confidence_head=True, confidence_head_with_markov=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    state = load_file(folder / "model.safetensors")
    g = torch.Generator().manual_seed(3)
    state["confidence_head.proj.weight"] = torch.randn(1, 128 + 32, generator=g).half()
    state["confidence_head.proj.bias"] = torch.randn(1, generator=g).half()
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    ref, out = tmp_path / "ref.gguf", tmp_path / "out"
    r = llamacpp.convert(src, folder, TARGET, ref)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_inprocess("convert", folder, out, "--to", "gguf", "--target", TARGET)
    assert r.code == 0, r.err
    b = same_gguf(ref, out / "drafter.gguf", {**DSPARK_DELIBERATE, "general.name": ("Conf", "conf")})
    assert b["dflash.has_confidence_head"] is True


def test_dspark_own_lm_head_is_kept_where_llamacpp_converter_drops_it(src, tmp_path):
    """A deliberate difference: llama.cpp's converter drops a full-vocabulary DSpark lm_head (conversion/qwen.py:
    989-990), so llama-server drafts through the target's head; eaglezoo writes it as output.weight, which the server
    uses when present (src/models/dflash.cpp:169, 804-811), and says so."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "head"
    shutil.copytree(DSPARK, folder)
    state = load_file(folder / "model.safetensors")
    state["lm_head.weight"] = torch.randn(1024, 128, generator=torch.Generator().manual_seed(5)).half()
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    ref, out = tmp_path / "ref.gguf", tmp_path / "out"
    assert llamacpp.convert(src, folder, TARGET, ref).returncode == 0
    r = run_inprocess("convert", folder, out, "--to", "gguf", "--target", TARGET, "--json")
    assert r.code == 0, r.err
    ta, tb = llamacpp.tensors(ref), llamacpp.tensors(out / "drafter.gguf")
    assert set(tb) - set(ta) == {"output.weight"} and set(ta) <= set(tb)
    assert np.array_equal(tb["output.weight"][2], state["lm_head.weight"].numpy())
    assert any("lm_head written as output.weight" in d for d in r.json()["plan"]["decisions"])
