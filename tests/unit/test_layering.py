"""The layering docs/architecture.md draws, checked on the source: every import (at module level, inside a function,
under TYPE_CHECKING) parsed with `ast`, and each must run downhill. The known exceptions are listed and must equal
what is observed, so the list can only shrink: a new upward import fails, and so does a fixed one still listed.
Importing the CLI loads no torch (checked in a fresh interpreter)."""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "eaglezoo"

# The floors of docs/architecture.md ("The house" and its rules), lowest first: a room imports only rooms on a lower
# floor or its own. `reproduce.py` and the package root (its __version__) import only the ground floor, so they are
# on it; `__main__` runs the CLI.
FLOORS: list[set[str]] = [
    {"__init__", "errors", "settings", "fsutil", "limits", "names", "reproduce", "engine_versions", "requirements"},
    {"checkpoint"},
    {"serving", "convert", "convert_requirements", "report_versions"},
    {"hub"},
    {"lint"},
    {"verify"},
    {"tune", "doctor", "compare", "watch"},
    {"reports"},
    {"plots", "pages"},
    {"registry"},
    {"cli"},
    {"__main__"},
]
FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}

# Imports that run back up a floor today, as (importing file, imported module). Fix one, then delete it here.
KNOWN_UPWARD: set[tuple[str, str]] = set()  # none left: the model card takes its plot drawn (pages.card_acceptance)
# The verify engines: they take a Workload (verify/workload.py), never verify/run.py, even through another module
ENGINES = ["native", "vllm_engine", "vllm_process", "vllm_worker", "endpoint"]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The eaglezoo module an imported name lives in (`eaglezoo.verify.run.prepare` -> `eaglezoo.verify.run`)."""
    while name not in modules() and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


@cache
def imports(module: str) -> tuple[tuple[str, int], ...]:
    """Every eaglezoo module `module` imports, anywhere in its file, with the line."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        out += [(_resolve(n), node.lineno) for n in names if n.split(".")[0] == "eaglezoo"]
    return tuple(sorted(set(out)))


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _where(module: str) -> str:
    return modules()[module].relative_to(ROOT).as_posix()


def test_every_module_is_on_a_floor():
    assert {room(m) for m in modules()} <= set(FLOOR), "a new room: place it in FLOORS as docs/architecture.md draws"


def test_imports_run_downhill_except_the_known_ones():
    upward = {(_where(m), dep) for m in modules() for dep, _ in imports(m) if FLOOR[room(dep)] > FLOOR[room(m)]}
    assert upward == KNOWN_UPWARD


def test_the_rooms_make_no_circle():
    edges = {(room(m), room(dep)) for m in modules() for dep, _ in imports(m) if room(dep) != room(m)}
    reach = {r: {b for a, b in edges if a == r} for r in FLOOR}
    for _ in FLOOR:  # the transitive closure, by repeated widening
        reach = {r: seen | {c for b in seen for c in reach[b]} for r, seen in reach.items()}
    assert [r for r in FLOOR if r in reach[r]] == []


def test_nothing_below_the_cli_imports_the_registry_or_the_resolver():
    below = [m for m in modules() if room(m) not in ("cli", "registry", "__main__")]
    hits = [
        (_where(m), line, dep)
        for m in below
        for dep, line in imports(m)
        if room(dep) == "registry" or dep.startswith("eaglezoo.cli")
    ]
    hits += [
        (_where(m), line, dep)
        for m in modules()
        if room(m) == "registry"
        for dep, line in imports(m)
        if dep.startswith("eaglezoo.cli")
    ]
    assert hits == []


def _reached(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        for dep, _ in imports(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_the_engines_take_a_workload_never_verify_run():
    for engine in ENGINES:
        module = f"eaglezoo.verify.{engine}"
        assert "eaglezoo.verify.run" not in _reached(module), engine
    measuring = [e for e in ENGINES if e != "vllm_worker"]  # the worker runs as a script: stdlib and vLLM only
    assert all("eaglezoo.verify.workload" in dict(imports(f"eaglezoo.verify.{e}")) for e in measuring)
    assert imports("eaglezoo.verify.vllm_worker") == ()


def test_the_scan_sees_imports_inside_functions():
    """cli/verify.py imports verify.run inside a function: the scan must see it, or every check above is blind."""
    assert "eaglezoo.verify.run" in dict(imports("eaglezoo.cli.verify"))
    assert "eaglezoo.pages" in dict(imports("eaglezoo.cli.outputs"))


def test_importing_the_cli_loads_no_torch():
    code = (
        "import sys, eaglezoo.cli, eaglezoo.cli.app; "
        "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
