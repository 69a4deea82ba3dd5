"""One meaning per fixture name: no test module redefines a fixture that a conftest.py above it defines (a local
`cli` that ran the CLI in process, where tests/conftest.py's `cli` runs it in a subprocess, read as the other)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

TESTS = ROOT / "tests"


def fixtures(path: Path) -> set[str]:
    """The names of the fixtures a module defines at its top level (a `name=` given to the decorator counts)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if "fixture" in ast.unparse(deco.func if isinstance(deco, ast.Call) else deco):
                named = [k.value.value for k in getattr(deco, "keywords", []) if k.arg == "name"]
                names.add(named[0] if named else node.name)
    return names


def test_no_module_redefines_a_conftest_fixture():
    shadowed = []
    for path in sorted(TESTS.rglob("test_*.py")):
        above = {
            name
            for conf in (p / "conftest.py" for p in path.parents if TESTS in (p, *p.parents))
            if conf.is_file()
            for name in fixtures(conf)
        }
        shadowed += [f"{path.relative_to(ROOT)}: {name}" for name in sorted(fixtures(path) & above)]
    assert shadowed == []


def test_the_scan_finds_conftests_fixtures():
    assert {"cli", "hub"} <= fixtures(TESTS / "conftest.py")
