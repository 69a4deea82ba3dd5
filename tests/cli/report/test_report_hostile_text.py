"""`eaglezoo report` on a saved report whose text was written by someone else: whatever string any field (or any
map's key) holds, terminal escapes (clear screen, set title), C1 controls, bidi overrides and rich markup never
reach the terminal raw and never end in an internal error. Each string of a valid report of every kind is made
hostile in turn; the report is then printed (exit 0) or refused in one line (exit 2)."""

from __future__ import annotations

import copy

import pytest
from conftest import run_inprocess
from support.saved_reports import valid, write

ESCAPES = "x\x1b[2J\x1b]0;pwned\x07\x9b2J\u202eevil\x1b[31m"  # clear screen, set title, C1 CSI, bidi, red
MARKUP = "[/bold]x[bold red]"
UNSEEN = ("\x1b", "\x07", "\x9b", "\u202e")


def strings(data, path=()):
    """The path of every string in `data` (a list's first item only) and of every map key, ('key', name) for keys."""
    if isinstance(data, str):
        yield path
    elif isinstance(data, list) and data:
        yield from strings(data[0], (*path, 0))
    elif isinstance(data, dict):
        for name, value in data.items():
            yield (*path, ("key", name))
            yield from strings(value, (*path, name))


def hostile_at(data, path, hostile: str):
    data = copy.deepcopy(data)
    *parent, last = path
    holder = data
    for step in parent:
        holder = holder[step]
    if isinstance(last, tuple):
        holder[hostile] = holder.pop(last[1])
    else:
        holder[last] = hostile
    return data


def assert_safe(r, where) -> None:
    assert r.code in (0, 2), (where, r.code, r.err)
    assert "internal error" not in r.err and "Traceback" not in r.err, (where, r.err)
    if r.code == 2:
        assert len(r.err.strip().splitlines()) == 1, (where, r.err)
    for c in UNSEEN:
        assert c not in r.out and c not in r.err, (where, repr(c), r.out[-300:], r.err)


@pytest.mark.parametrize("hostile", [ESCAPES, MARKUP], ids=["escapes", "markup"])
@pytest.mark.parametrize("kind", ["verify", "tune", "compare", "doctor"])
def test_no_string_of_a_saved_report_reaches_the_terminal_raw(kind, hostile, tmp_path):
    data = valid(kind)
    paths = list(strings(data))
    assert len(paths) > 5
    for path in paths:
        if path == ("kind",):
            continue
        r = run_inprocess("report", write(tmp_path / "r.json", hostile_at(data, path, hostile)))
        assert_safe(r, path)


def test_a_doctor_cause_with_terminal_escapes_and_markup_is_refused_in_one_line(tmp_path):
    """The issue's cases: a cause that clears the screen and sets the title; a cause holding `[/bold]`."""
    for cause in ("k-table-zero\x1b[2J\x1b]0;x\x07", "[/bold]"):
        data = valid("doctor")
        data["findings"][0]["cause"] = cause
        r = run_inprocess("report", write(tmp_path / "r.json", data))
        assert_safe(r, cause)
        assert r.code == 2 and "findings[0].cause" in r.err, r.err


def test_the_valid_reports_print(tmp_path):
    for kind in ("verify", "tune", "compare", "doctor"):
        r = run_inprocess("report", write(tmp_path / "r.json", valid(kind)))
        assert r.code == 0, (kind, r.err)
