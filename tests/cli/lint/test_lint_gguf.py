"""lint DRAFT.gguf: a drafter GGUF checked as llama.cpp b11434 reads it. One tiny GGUF per rule, each made from
eaglezoo's own conversion of the example with one fact changed. The GGUFs llama.cpp's own converter bakes are linted in
tests/engine/test_lint_gguf_vs_llamacpp.py (they run the converter)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, assert_clean_failure, run_cli, run_inprocess
from support import llamacpp

TARGET = EXAMPLE / "target"
DRAFTER = EXAMPLE / "eagle3-safeai"


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf") / "eagle3-gguf"
    r = run_inprocess("convert", DRAFTER, out, "--to", "gguf", "--target", TARGET, *EXAMPLE_IDS)
    assert r.code == 0, r.err
    return out / "drafter.gguf"


def lint(path, *more):
    r = run_inprocess("lint", path, "--target", TARGET, "--json", *more)
    assert r.code in (0, 1), r.err
    return r, {f["code"]: f for f in r.json()["findings"]}


def test_eaglezoo_gguf_of_the_example(ours):
    """The trained taps [2, 3, 4]: the third is the 4-layer Llama target's last pre-norm state, which llama.cpp
    reads from a buffer a Llama graph never fills."""
    r, codes = lint(ours)
    assert r.code == 1
    assert "gguf-taps-default" not in codes and "gguf-taps-repeated" not in codes
    assert codes["gguf-tap-final-unfilled"]["severity"] == "error"
    assert codes["gguf-vocab-map"]["severity"] == "info"
    assert {c for c, f in codes.items() if f["severity"] == "error"} == {"gguf-tap-final-unfilled"}


def test_taps_below_the_last_layer_are_clean(ours, tmp_path):
    path = llamacpp.rewrite(ours, tmp_path / "d.gguf", keys={"eagle3.target_layers": [1, 2, 3]})
    r, codes = lint(path)
    assert r.code == 0, codes
    assert not [f for f in codes.values() if f["severity"] != "info"]


@pytest.mark.parametrize(
    "keys, drop, code",
    [
        ({"eagle3.target_layers": [1, 2, 3, 4]}, (), "gguf-taps-count"),
        ({"eagle3.target_layers": [1, 2, 9]}, (), "gguf-taps-out-of-range"),
        ({"eagle3.target_layers": None}, (), "gguf-taps-missing"),
        ({"eagle3.norm_before_residual": None}, (), "gguf-norm-before-residual-default"),
        ({"eagle3.norm_before_fc": None}, (), "gguf-norm-before-fc-default"),
        ({"eagle3.norm_before_fc": True}, (), "gguf-norm-before-fc-no-weight"),
        ({"eagle3.target_hidden_size": None}, (), "gguf-target-hidden-missing"),
        ({"eagle3.target_hidden_size": 64}, (), "gguf-target-hidden-mismatch"),
        ({"tokenizer.ggml.model": None}, (), "gguf-tokenizer-missing"),
        ({}, ("d2t",), "gguf-d2t-missing"),
    ],
)
def test_rule(ours, tmp_path, keys, drop, code):
    keys = {"eagle3.target_layers": [1, 2, 3], **keys}
    path = llamacpp.rewrite(ours, tmp_path / "d.gguf", keys=keys, drop_tensors=drop)
    _, codes = lint(path)
    assert code in codes, codes


def test_d2t_offsets(ours, tmp_path):
    """A checkpoint's d2t copied as is (offsets): llama.cpp reads absolute ids."""
    import torch

    offsets = torch.load(DRAFTER / "pytorch_model.bin", weights_only=True)["d2t"].numpy().astype(np.int64)
    path = llamacpp.rewrite(ours, tmp_path / "d.gguf", keys={"eagle3.target_layers": [1, 2, 3]}, data={"d2t": offsets})
    r, codes = lint(path)
    assert r.code == 1 and "gguf-d2t-offsets" in codes


def test_stray_tensor(ours, tmp_path):
    path = llamacpp.rewrite(
        ours,
        tmp_path / "d.gguf",
        keys={"eagle3.target_layers": [1, 2, 3]},
        data={
            "fc_norm.0.weight": np.ones(128, dtype=np.float32),
            "enc.output_norm.weight": np.ones(384, dtype=np.float32),
        },
    )
    _, codes = lint(path)
    assert "gguf-tensor-unknown" in codes and "gguf-norm-before-fc-unused" in codes


def test_not_a_drafter(ours, tmp_path):
    path = llamacpp.rewrite(ours, tmp_path / "target.gguf", arch="llama")
    r = run_cli("lint", path, "--target", TARGET)
    assert_clean_failure(r, contains="not a drafter")


def test_not_a_gguf(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"not a gguf at all")
    r = run_inprocess("lint", path)
    assert_clean_failure(r, contains="not a readable GGUF file")


@pytest.fixture(scope="module")
def ours_dflash(tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf") / "dflash-gguf"
    r = run_inprocess("convert", EXAMPLE / "dflash", out, "--to", "gguf", "--target", TARGET)
    assert r.code == 0, r.err
    return out / "drafter.gguf"


def test_dflash_tap_at_the_last_layer(ours_dflash):
    """The DFlash example's taps [2, 3, 4]: llama-server asks the 4-layer Llama target for layer 4's input, which
    its graph never sets, and stops on an assertion."""
    r, codes = lint(ours_dflash)
    assert r.code == 1 and "layer input tensor is null" in codes["gguf-tap-final-unfilled"]["message"]


@pytest.mark.parametrize(
    "keys, code",
    [
        ({"dflash.block_size": None}, "gguf-block-size-default"),
        ({"tokenizer.ggml.mask_token_id": None}, "gguf-mask-token-missing"),
        ({"dflash.target_layers": [1, 2, 7]}, "gguf-taps-out-of-range"),
    ],
)
def test_dflash_rule(ours_dflash, tmp_path, keys, code):
    path = llamacpp.rewrite(ours_dflash, tmp_path / "d.gguf", keys={"dflash.target_layers": [1, 2, 3], **keys})
    _, codes = lint(path)
    assert code in codes, codes


def test_dflash_clean(ours_dflash, tmp_path):
    path = llamacpp.rewrite(ours_dflash, tmp_path / "d.gguf", keys={"dflash.target_layers": [1, 2, 3]})
    r, codes = lint(path)
    assert r.code == 0 and not [f for f in codes.values() if f["severity"] != "info"], codes


@pytest.fixture(scope="module")
def ours_dspark(tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf") / "dspark-gguf"
    r = run_inprocess("convert", EXAMPLE / "dspark-llamacpp", out, "--to", "gguf", "--target", TARGET)
    assert r.code == 0, r.err
    return out / "drafter.gguf"


def test_dspark_read_as_dspark(ours_dspark):
    """The example DSpark GGUF: named DSpark (a `dflash` GGUF with `markov_w1`, as llama-server tells them:
    common/speculative.cpp:2378-2381), its anchor, head and the most it drafts said; clean on the example target."""
    r, codes = lint(ours_dspark)
    assert r.code == 0 and not [f for f in codes.values() if f["severity"] != "info"], codes
    assert "llama.cpp dspark drafter GGUF" in codes["gguf-family"]["message"]
    said = codes["gguf-dspark"]["message"]
    assert "sample_from_anchor true" in said and "no confidence head" in said and "at most 4 tokens" in said
    assert r.json()["dialect"] == "gguf (dflash)"


@pytest.mark.parametrize(
    "keys, code, said",
    [
        ({"dflash.block_size": None}, "gguf-block-size-missing", "asserts"),
        ({"dflash.sample_from_anchor": None}, "gguf-dspark", "(absent: read true)"),
    ],
)
def test_dspark_rule(ours_dspark, tmp_path, keys, code, said):
    _, codes = lint(llamacpp.rewrite(ours_dspark, tmp_path / "d.gguf", keys=keys))
    assert said in codes[code]["message"], codes


def test_dspark_bonus_anchor_drafts_one_less(ours_dspark, tmp_path):
    _, codes = lint(llamacpp.rewrite(ours_dspark, tmp_path / "d.gguf", keys={"dflash.sample_from_anchor": False}))
    assert "sample_from_anchor false" in codes["gguf-dspark"]["message"]
    assert "at most 3 tokens" in codes["gguf-dspark"]["message"]
