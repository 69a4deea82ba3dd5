"""doctor's causes on SGLang are in the finding-code catalogue at the severity they are reported with (a confirmed
finding an error, one to check a warning), and doctor on vLLM names the known-issue row its server's /version falls in
(eaglezoo/engine_versions.py)."""

from __future__ import annotations

import ast

from conftest import ROOT

from eaglezoo.checkpoint.codes import CODES
from eaglezoo.checkpoint.spec import AuxLayers, DrafterSpec
from eaglezoo.doctor.run import version_notes
from eaglezoo.engine_versions import KNOWN_ISSUES


def findings_made() -> list[tuple[str, object]]:
    """(cause, confirmed) of every Finding doctor/sglang.py makes: confirmed a bool, or the expression's text."""
    tree = ast.parse((ROOT / "eaglezoo/doctor/sglang.py").read_text(encoding="utf-8"))
    made = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
            kw = {k.arg: k.value for k in node.keywords}
            confirmed = kw["confirmed"]
            made.append(
                (kw["cause"].value, confirmed.value if isinstance(confirmed, ast.Constant) else ast.unparse(confirmed))
            )
    return made


def test_every_sglang_cause_is_catalogued_at_its_severity():
    made = findings_made()
    assert {cause for cause, _ in made} == {c.code for c in CODES.values() if c.group == "doctor-sglang"}
    for cause, confirmed in made:
        assert cause in CODES, cause
        if isinstance(confirmed, bool):
            assert CODES[cause].severity == ("error" if confirmed else "warning"), cause


SPEC = DrafterSpec(
    arch="llama",
    architectures=["LlamaForCausalLMEagle3"],
    num_layers=1,
    hidden_size=128,
    target_hidden_size=128,
    vocab_size=1024,
    draft_vocab_size=512,
    num_aux=3,
    aux=AuxLayers(ids=(2, 3, 4), convention="boundary"),
)


def test_a_vllm_release_in_a_row_is_named_with_its_source():
    notes = version_notes("0.32.0+cpu", SPEC, "eagle31", sampled=True)
    assert len(notes) == 1 and "vllm-cpu-sampled-temperature" in notes[0] and "cpu_triton_utils.py" in notes[0]
    assert version_notes("0.32.0+cpu", SPEC, "eagle31", sampled=False) == []  # greedy rows: not touched
    fc_norm = SPEC.model_copy(update={"fc_norm": True})
    assert any("pull/42764" in n for n in version_notes("0.21.0", fc_norm, "eagle31", sampled=False))
    assert version_notes("0.33.0", fc_norm, "eagle31", sampled=True) == []


def test_a_vllm_version_that_does_not_parse_is_said():
    (note,) = version_notes("main-abcdef", SPEC, None, sampled=False)
    assert "does not parse as a release" in note
    assert version_notes(None, SPEC, None, sampled=False) == []


def test_docs_doctor_lists_every_sglang_cause_and_every_engine_row():
    text = (ROOT / "docs/doctor.md").read_text(encoding="utf-8")
    missing = [c.code for c in CODES.values() if c.group == "doctor-sglang" and f"### `{c.code}`" not in text]
    assert missing == []
    assert [row.key for row in KNOWN_ISSUES if f"| `{row.key}` |" not in text] == []
    assert "SGLang rules checked against its source (0.5.23), not a running server" in text
