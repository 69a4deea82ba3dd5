"""lint on the GGUFs llama.cpp b11434's own converter bakes (tests/support/llamacpp.py): the taps it bakes from a folder
without top-level ids, and norm_before_residual baked false from a speculators config without the key, each named with
the fix. In the engine tier: each runs the engine's converter."""

from __future__ import annotations

from conftest import EXAMPLE, assert_clean_failure, run_inprocess
from support import llamacpp

TARGET = EXAMPLE / "target"


DRAFTER = EXAMPLE / "eagle3-safeai"


def lint(path, *more):
    r = run_inprocess("lint", path, "--target", TARGET, "--json", *more)
    assert r.code in (0, 1), r.err
    return r, {f["code"]: f for f in r.json()["findings"]}


def test_llamacpp_converter_taps_named_with_the_fix(tmp_path):
    """llama.cpp's own converter on the example SafeAILab folder (no top-level aux ids) bakes [2, 2, 1]."""
    src = llamacpp.source_dir()
    ref = tmp_path / "ref.gguf"
    assert llamacpp.convert(src, DRAFTER, TARGET, ref).returncode == 0
    r = run_inprocess("lint", ref, "--target", TARGET)
    assert r.code == 1, r.err
    assert "gguf-taps-default" in r.out and "gguf-taps-repeated" in r.out
    assert "eaglezoo convert SRC OUT --to gguf --target TARGET" in r.out


def test_speculators_config_without_norm_before_residual(tmp_path):
    """llama.cpp's converter bakes norm_before_residual false from a speculators config without the key
    (conversion/llama.py:96), where vLLM reads true: lint names it with the fix, and eaglezoo's convert asks for the
    trained behaviour instead of guessing, then writes it."""
    import json

    from support.factory import make_drafter, make_spec

    spec = make_spec(hidden=128, target_hidden=128, vocab=1024, draft_vocab=512, ids=(1, 2, 3))
    src = make_drafter(tmp_path / "src", "speculators", spec=spec)
    cfg = json.loads((src / "config.json").read_text())
    del cfg["norm_before_residual"]
    (src / "config.json").write_text(json.dumps(cfg))
    ref = tmp_path / "ref.gguf"
    assert llamacpp.convert(llamacpp.source_dir(), src, TARGET, ref).returncode == 0
    assert llamacpp.fields(ref)["eagle3.norm_before_residual"] is False
    _, codes = lint(ref)
    assert "--flag norm_before_residual=true|false" in codes["gguf-norm-before-residual-false"]["hint"]
    out = tmp_path / "out"
    assert_clean_failure(
        run_inprocess("convert", src, out, "--to", "gguf", "--target", TARGET),
        out,
        contains="norm_before_residual is absent",
    )
    r = run_inprocess("convert", src, out, "--to", "gguf", "--target", TARGET, "--flag", "norm_before_residual=true")
    assert r.code == 0, r.err
    assert llamacpp.fields(out / "drafter.gguf")["eagle3.norm_before_residual"] is True
