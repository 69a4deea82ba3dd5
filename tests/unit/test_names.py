"""Every name set is defined once (eaglezoo/names.py) and the code that lists, reads or validates those names uses
that definition: the dialect readers are exactly the dialects the registry accepts, and each model field that names
an engine or a dialect is the one Literal."""

from __future__ import annotations

import ast
from typing import get_args

from conftest import ROOT

from eaglezoo import names
from eaglezoo.checkpoint import formats
from eaglezoo.engine_versions import Engine
from eaglezoo.registry.conditions import Conditions
from eaglezoo.registry.schema import Entry, Floor
from eaglezoo.requirements import Requirements
from eaglezoo.verify.report.models import Engine as ReportEngine
from eaglezoo.verify.report.models import VerifyReport


def test_every_dialect_has_its_reader_and_no_other():
    assert set(formats.DIALECTS) == set(names.DIALECTS)
    families = {d for ds in names.DIALECTS_OF_FAMILY.values() for d in ds}
    assert set(names.EAGLE3_DIALECTS).isdisjoint(families)
    assert set(names.EAGLE3_DIALECTS) | families == set(names.DIALECTS)


def test_models_name_engines_and_dialects_by_the_one_definition():
    assert Entry.model_fields["dialect"].annotation == names.Dialect | None
    assert Floor.model_fields["engine"].annotation == names.VerifyEngine | None
    assert ReportEngine.model_fields["name"].annotation == names.VerifyEngine
    assert Engine == names.ServerEngine
    assert set(names.RUN_ENGINES) < set(names.VERIFY_ENGINES) and set(names.SERVER_ENGINES) < set(names.SERVE_ENGINES)
    assert get_args(names.CompareEngine) == names.COMPARE_ENGINES
    assert Conditions.model_fields["thinking"].annotation == names.Thinking
    assert VerifyReport.model_fields["thinking"].annotation == names.Thinking | None
    assert Requirements.model_fields["thinking"].annotation == names.ThinkingMode | None


def test_no_set_is_spelled_out_again():
    """No tuple, list or Literal in the package but names.py lists a whole set of names again (a subset with a meaning
    of its own, such as the dialects whose configs hold aux ids where vLLM reads them, is its own fact)."""
    whole = [set(x) for x in (names.VERIFY_ENGINES, names.RUN_ENGINES, names.SERVE_ENGINES, names.SERVER_ENGINES)]
    whole += [set(names.DIALECTS), set(names.EAGLE3_DIALECTS), *map(set, names.DIALECTS_OF_FAMILY.values())]
    whole += [set(names.COMPARE_ENGINES), set(get_args(names.ThinkingMode)), {"on", "off", "unknown"}]
    found = []
    for path in sorted((ROOT / "eaglezoo").rglob("*.py")):
        if path.name == "names.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else []
            words = {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if len(words) == len(elts) >= 2 and words in whole:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == KNOWN, found


# Where a set is still spelled out for one call: none (doctor's plan names names.COMPARE_ENGINES).
KNOWN: list[str] = []
