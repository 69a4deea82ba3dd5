"""convert --to gguf: the example EAGLE-3 drafter as llama.cpp b11434 reads it, compared key for key and tensor for
tensor with llama.cpp's own converter (every difference named), and what llama.cpp cannot run refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, assert_clean_failure, run_cli, run_inprocess, tree_digest
from support import llamacpp
from support.factory import make_drafter, make_spec

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
    out = tmp_path_factory.mktemp("gguf") / "eagle3-gguf"
    before = tree_digest(DRAFTER)
    r = run_cli("convert", DRAFTER, out, "--to", "gguf", "--target", TARGET, *EXAMPLE_IDS, "--json")
    assert r.code == 0, r.err
    assert tree_digest(DRAFTER) == before
    return out, r.json()


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


def test_dflash_gguf_matches_llamacpp_converter(src, tmp_path):
    """The example DFlash drafter: every tensor byte-identical to llama.cpp's converter's; the keys differ only in
    the cosmetic name and size label (its taps [2, 3, 4] are the z-lab ids + 1 in both: conversion/qwen.py:798-801)."""
    ref, out = tmp_path / "ref.gguf", tmp_path / "dflash-gguf"
    r = llamacpp.convert(src, EXAMPLE / "dflash", TARGET, ref)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_cli("convert", EXAMPLE / "dflash", out, "--to", "gguf", "--target", TARGET, "--json")
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


def test_dspark_gguf_matches_llamacpp_converter(src, tmp_path):
    """The example DSpark drafter (DeepSpec form): every key and tensor as llama.cpp's converter writes them
    (conversion/qwen.py:924-1012), the cosmetic name and size label apart; its anchor and confidence-head facts
    written explicitly."""
    ref, out = tmp_path / "ref.gguf", tmp_path / "dspark-gguf"
    r = llamacpp.convert(src, DSPARK, TARGET, ref)
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_cli("convert", DSPARK, out, "--to", "gguf", "--target", TARGET, "--json")
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
