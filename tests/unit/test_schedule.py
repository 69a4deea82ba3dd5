"""The suite's own scheduling (tests/support/schedule.py): a module handed out by test keeps together every test
that shares one of its costly module fixtures, so that fixture is still built once; a split module that gains such a
test, or loses a test named, fails here rather than building an engine twice unseen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT
from support.schedule import CHEAP_SHARED, LONGEST_FIRST, SPLIT, rank, unit

TESTS = ROOT / "tests"


def module_path(stem: str) -> Path:
    (path,) = TESTS.rglob(f"{stem}.py")
    return path


def module_fixtures_and_users(path: Path) -> tuple[set[str], dict[str, set[str]]]:
    """The module-scoped fixtures the module defines, and each test function's parameters."""
    fixtures, tests = set(), {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        params = {a.arg for a in node.args.args}
        if node.name.startswith("test_"):
            tests[node.name] = params
        for deco in node.decorator_list:
            text = ast.unparse(deco)
            if "fixture" in text and "module" in text:
                fixtures.add(node.name)
    return fixtures, tests


@pytest.mark.parametrize("stem", sorted(SPLIT))
def test_the_users_of_a_costly_module_fixture_are_one_unit(stem):
    path = module_path(stem)
    fixtures, tests = module_fixtures_and_users(path)
    costly = fixtures - set(CHEAP_SHARED)
    shared = {f for f in costly if sum(f in params for params in tests.values()) > 1}  # one user: nothing to share
    users = {name for name, params in tests.items() if params & shared}
    assert users == set(SPLIT[stem]), f"{path}: list these in schedule.SPLIT[{stem!r}]: {sorted(users)}"
    units = {unit(f"{path.relative_to(ROOT)}::{name}[case]") for name in users}
    assert len(units) <= 1, units


def test_every_module_named_first_exists():
    for stem in LONGEST_FIRST:
        assert list(TESTS.rglob(f"{stem}.py")), stem


def test_a_module_not_split_is_one_unit():
    help_module = "tests/cli/test_help.py"
    assert unit(f"{help_module}::test_a[x]") == unit(f"{help_module}::test_b") == help_module
    assert unit("tests/engine/test_doctor.py::test_a_stripped_3_1_flag") != unit(
        "tests/engine/test_doctor.py::test_a_fine_tuned_target"
    )


def test_the_slow_tiers_go_first_and_the_named_first_in_each():
    engine_unnamed, engine_named = TESTS / "engine/test_not_named.py", TESTS / "engine/test_doctor.py"
    fast_named, fast_unnamed = TESTS / "cli/test_output_contract.py", TESTS / "unit/hub/test_not_named.py"
    assert rank(engine_named) < rank(engine_unnamed) < rank(fast_named) < rank(fast_unnamed)
