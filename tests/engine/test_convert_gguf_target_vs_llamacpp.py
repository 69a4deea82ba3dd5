"""convert TARGET --to gguf against llama.cpp b11434's own converter: the example target's GGUF compared key for key and
tensor for tensor (the converter run with tests/support/llamacpp.py's WORKAROUND), and the converter's refusal of the
example's tokenizer, which is why eaglezoo writes the target itself. In the engine tier: each runs the engine's code."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import EXAMPLE
from support import llamacpp
from support.gguf_example import converted

TARGET = EXAMPLE / "target"


# Every key where eaglezoo's target GGUF deliberately differs from llama.cpp's converter's, with why.
DELIBERATE = {
    # cosmetic: the converter titles the folder name and adds a parameter-count label; eaglezoo names the folder.
    "general.name": ("Target", "target"),
    "general.size_label": ("820K", None),
}


@pytest.fixture(scope="module")
def src():
    return llamacpp.source_dir()


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return converted(tmp_path_factory.mktemp("gguf") / "target-gguf", TARGET)


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
