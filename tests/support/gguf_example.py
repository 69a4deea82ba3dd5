"""A folder converted to GGUF by `eaglezoo convert … --to gguf` for the GGUF tests, its source proved untouched."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_inprocess, tree_digest


def converted(out: Path, source: Path, *args) -> tuple[Path, dict]:
    """(the output folder, convert's --json record)."""
    before = tree_digest(source)
    r = run_inprocess("convert", source, out, "--to", "gguf", *args, "--json")
    assert r.code == 0, r.err
    assert tree_digest(source) == before
    return out, json.loads(r.out)
