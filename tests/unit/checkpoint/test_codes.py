"""The catalogue of finding codes (eaglezoo/checkpoint/codes.py) holds every code eaglezoo emits, at the severity it
is emitted with: read from the source (every literal code, in each of the idioms that make a finding or a coded
refusal), and from lint run on the examples (the EAGLE-3 one also as a GGUF) and on the real-config corpus.
docs/lint-codes.md is generated from it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import EXAMPLE_AUX, ROOT

from eaglezoo.checkpoint.codes import CODES, markdown
from eaglezoo.checkpoint.formats.base import ReadOptions
from eaglezoo.convert import GGUF_FILE, ConvertRequest, apply, plan
from eaglezoo.lint import lint, lint_config, lint_gguf

PACKAGE = ROOT / "eaglezoo"
# The functions that pass a code on rather than name one: each is fed by literal codes found below
FORWARDERS = {
    ("checkpoint/problems.py", "error"),
    ("checkpoint/formats/gguf_read.py", "_err"),
    ("checkpoint/formats/gguf_read.py", "_warn"),
    ("checkpoint/traps.py", "_find"),
    ("lint.py", "add"),
    ("lint.py", "read_tolerating"),
}
# Helpers that name the severity and take the code first: gguf_read's _err(code, message, hint), _warn(...)
SEVERITY_OF_HELPER = {"_err": "error", "_warn": "warning"}


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _emitted(call: ast.Call) -> tuple[str | None, str | None] | None:
    """(severity, code) of a call that makes a finding or a coded refusal; None for any other call."""
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
    kw = {k.arg: k.value for k in call.keywords}
    if name == "Finding":
        return _literal(kw.get("severity")), _literal(kw.get("code"))
    if name in ("add", "_find") and len(call.args) >= 2:
        return _literal(call.args[0]), _literal(call.args[1])
    if name in SEVERITY_OF_HELPER and call.args:
        return SEVERITY_OF_HELPER[name], _literal(call.args[0])
    if name == "error" and call.args and _literal(call.args[0]):
        return "error", _literal(call.args[0])
    if "code" in kw and _literal(kw["code"]):  # an EaglezooError with a finding code: lint reports it as an error
        return "error", _literal(kw["code"])
    return None


def _calls(node: ast.AST, func: str = "") -> list[tuple[str, ast.Call]]:
    """Every call under `node`, with the name of the innermost function it is made in."""
    out = []
    for child in ast.iter_child_nodes(node):
        inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else func
        if isinstance(child, ast.Call):
            out.append((func, child))
        out += _calls(child, inner)
    return out


def static_emissions() -> tuple[list[tuple[str, str, str]], list[str]]:
    """([(where, severity, code)], [where a finding's code or severity is not a literal, outside the forwarders])."""
    found, opaque = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("doctor/"):  # doctor's findings name causes, not codes (doctor/report.py's Finding)
            continue
        for func, call in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            hit = _emitted(call)
            if hit is None:
                continue
            severity, code = hit
            if severity and code:
                found.append((f"{rel}:{call.lineno}", severity, code))
            elif (rel, func) not in FORWARDERS:
                opaque.append(f"{rel}:{call.lineno}")
    return sorted(set(found)), sorted(set(opaque))


def test_every_code_in_the_source_is_catalogued_at_its_severity():
    found, opaque = static_emissions()
    assert len(found) > 80, "the scan finds the findings eaglezoo makes"  # it cannot pass by finding nothing
    wrong = [
        (where, severity, code, CODES[code].severity if code in CODES else "not catalogued")
        for where, severity, code in found
        if code not in CODES or CODES[code].severity != severity
    ]
    assert wrong == []
    assert opaque == [], "a finding whose code or severity is not a literal: name it where it is made"


def test_the_catalogue_holds_no_code_that_is_never_emitted():
    found, _ = static_emissions()
    doctor = {
        c.code
        for c in CODES.values()
        if c.group in ("doctor-sglang", "doctor-llamacpp", "doctor-probes", "doctor-vllm")
    }  # their own tests
    assert set(CODES) - doctor == {code for _, _, code in found}


def _check(findings, where: str) -> list[tuple[str, str, str]]:
    return [
        (where, f.code, f.severity) for f in findings if f.code not in CODES or CODES[f.code].severity != f.severity
    ]


EXAMPLES = ["tiny/eagle3-safeai", "tiny/eagle31-safeai", "tiny/peagle", "tiny/dflash", "smollm2/eagle31-safeai"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_lint_of_each_example_emits_catalogued_codes(example):
    folder = ROOT / "examples" / example
    report = lint(folder, ROOT / "examples" / "tiny" / "target" if example.startswith("tiny/") else None)
    assert report.findings, "the example gives findings to check"
    assert _check(report.findings, example) == []


def test_lint_of_the_example_as_gguf_emits_catalogued_codes(tmp_path):
    """The example EAGLE-3 drafter converted for llama.cpp, then linted as llama.cpp reads it (lint DRAFT.gguf)."""
    target = ROOT / "examples" / "tiny" / "target"
    options = ReadOptions(aux_layers=tuple(EXAMPLE_AUX), aux_convention="boundary")
    source = ROOT / "examples" / "tiny" / "eagle3-safeai"
    apply(plan(ConvertRequest(source, to="gguf", target=target, options=options)), tmp_path / "gguf")
    report = lint_gguf(tmp_path / "gguf" / GGUF_FILE, target)
    assert {"gguf-family", "gguf-taps", "gguf-tap-final-unfilled"} <= {f.code for f in report.findings}
    assert _check(report.findings, "eagle3-safeai as gguf") == []


def test_lint_of_the_real_config_corpus_emits_catalogued_codes():
    corpus = ROOT / "tests" / "data" / "real-configs"
    wrong, seen = [], set()
    for row in json.loads((corpus / "manifest.json").read_text()):
        report = lint_config(Path(corpus / row["path"]))
        seen |= {f.code for f in report.findings}
        wrong += _check(report.findings, row["path"])
    assert len(seen) > 25 and wrong == []


def test_docs_lint_codes_md_is_generated_from_the_catalogue():
    """python -m scripts.docs.write_lint_codes writes it; a code changed without the page fails here."""
    assert (ROOT / "docs" / "lint-codes.md").read_text(encoding="utf-8") == markdown()
