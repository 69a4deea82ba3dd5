"""`eaglezoo report` on a saved report too large for any run to have written: a million rows, or a file past the
size bound (limits.MAX_REPORT_BYTES), is refused at once in one line naming what is too large, never read for
a minute. A prompt file past limits.MAX_PROMPTS is refused before anything runs, so no report can hold more."""

from __future__ import annotations

import json
import time

import pytest
from conftest import assert_clean_failure, run_cli, run_inprocess
from support.saved_reports import valid

from eaglezoo.limits import MAX_PROMPTS, MAX_REPORT_BYTES

MILLION = 1_000_000


def rows_of(kind: str) -> tuple[str, str]:
    """A report's row list and the report's JSON with a million copies of its first row (each a valid row on its
    own), written as text: the row once, repeated."""
    data = valid(kind)
    name = {"verify": "per_prompt", "compare": "rows", "tune": "grid", "doctor": "measured"}[kind]
    row = json.dumps(data[name][0], separators=(",", ":"))
    head = json.dumps({**data, name: []}, separators=(",", ":"))
    field = f'"{name}":[]'
    assert head.count(field) == 1, head
    return name, head.replace(field, f'"{name}":[' + ",".join([row] * MILLION) + "]")


@pytest.mark.parametrize("kind", ["verify", "compare", "tune", "doctor"])
def test_a_report_with_a_million_rows_is_refused_at_once(kind, tmp_path):
    name, text = rows_of(kind)
    saved = tmp_path / "big.json"
    saved.write_text(text)
    size = saved.stat().st_size
    started = time.monotonic()
    r = run_cli("report", saved, timeout=120)
    took = time.monotonic() - started
    # where a million of its rows fit the size bound, the row bound refuses them; else the size bound does
    assert_clean_failure(r, contains=f"{name} holds 1,000,000 rows" if size <= MAX_REPORT_BYTES else f"{size:,} bytes")
    assert took < 20, took


def test_a_report_past_the_size_bound_is_refused_before_it_is_read(tmp_path):
    saved = tmp_path / "huge.json"
    with saved.open("wb") as f:  # sparse: the size is there, the bytes need not be written
        f.write(b"{")
        f.truncate(MAX_REPORT_BYTES + 1)
    started = time.monotonic()
    r = run_inprocess("report", saved, "--html", tmp_path / "x.html")
    assert_clean_failure(r, tmp_path / "x.html", contains=f"holds {MAX_REPORT_BYTES + 1:,} bytes")
    assert time.monotonic() - started < 5


def test_a_prompt_file_past_the_bound_is_refused_before_anything_runs(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hi"}\n' * (MAX_PROMPTS + 1))
    from eaglezoo.errors import BadInput
    from eaglezoo.verify.workload import load_prompts

    with pytest.raises(BadInput, match=f"more than {MAX_PROMPTS:,} prompts"):
        load_prompts(prompts)
