"""The served target against the named one, from their files: the same, fine-tuned (weights moved), quantized, or
another model."""

from __future__ import annotations

import shutil

from conftest import EXAMPLE
from support import faults

from eaglezoo.doctor.fit import classify, fingerprint


def test_fit_from_the_files(tmp_path):
    named = fingerprint(EXAMPLE / "target")
    copy = shutil.copytree(EXAMPLE / "target", tmp_path / "copy")
    assert classify(fingerprint(copy), named) == ("fits", [])
    assert classify(fingerprint(faults.fine_tuned(EXAMPLE / "target", tmp_path / "ft")), named) == (
        "fine-tuned",
        ["weights"],
    )
    faults.edit_config(copy, lambda c: c.update(quantization_config={"quant_method": "fp8"}))
    assert classify(fingerprint(copy), named)[0] == "quantized"
    faults.edit_config(copy, lambda c: c.update(num_hidden_layers=c["num_hidden_layers"] + 1))
    assert classify(fingerprint(copy), named) == ("different", ["config", "quantization"])


def test_the_template_is_part_of_the_fit(tmp_path):
    copy = shutil.copytree(EXAMPLE / "target", tmp_path / "copy")
    (copy / "chat_template.jinja").write_text("{{ messages }}")
    fit, parts = classify(fingerprint(copy), fingerprint(EXAMPLE / "target"))
    assert parts == ["template"] and fit == "different"
