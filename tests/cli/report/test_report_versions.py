"""Every report says its `schema_version`; a saved one is upgraded to this version's layout by one function per
kind (eaglezoo/report_versions.py), whatever version it was written in (absent: 0), and one written by a newer
eaglezoo is refused in one line."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, assert_clean_failure, run_inprocess
from markupsafe import escape

from eaglezoo.report_versions import SCHEMA_VERSION, UPGRADES, upgraded
from eaglezoo.reports import kind_of
from eaglezoo.serving import shown_path
from tests.support import saved_reports

KINDS = ("verify", "tune", "compare", "doctor")
OLD = sorted((ROOT / "tests" / "support" / "reports").glob("*.json"))
KEPT = sorted((ROOT / "registry" / "reports").glob("*.json"))  # the registry's, some written before versions


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.name)
def test_reports_written_before_versions_read_as_this_version_writes_them(path):
    assert "schema_version" not in json.loads(path.read_text())  # written before reports said it: version 0
    r = run_inprocess("report", str(path), "--json")
    assert r.code == 0, r.err
    assert r.json()["schema_version"] == SCHEMA_VERSION and r.json()["kind"] in KINDS


@pytest.mark.parametrize("path", KEPT, ids=lambda p: p.name)
def test_the_registrys_kept_reports_read_as_this_version_writes_them(path):
    r = run_inprocess("report", str(path), "--json")
    assert r.code == 0, r.err
    assert r.json()["schema_version"] == SCHEMA_VERSION and r.json()["kind"] == "verify"


@pytest.mark.parametrize("kind", KINDS)
def test_a_report_of_this_version_reads_and_says_it(tmp_path, kind):
    this = upgraded(saved_reports.valid(kind), kind, "the report")  # as this version writes it
    saved = saved_reports.write(tmp_path / "r.json", {**this, "schema_version": SCHEMA_VERSION})
    r = run_inprocess("report", str(saved), "--json")
    assert r.code == 0 and r.json()["schema_version"] == SCHEMA_VERSION, r.err


@pytest.mark.parametrize("kind", KINDS)
def test_a_report_from_a_newer_eaglezoo_is_one_line(tmp_path, kind):
    saved = saved_reports.write(
        tmp_path / "r.json", {**saved_reports.valid(kind), "schema_version": SCHEMA_VERSION + 1}
    )
    assert_clean_failure(run_inprocess("report", str(saved)), contains="written by a newer eaglezoo")


@pytest.mark.parametrize("version", ["1", -1, True, 1.5, None])
def test_a_schema_version_that_is_no_version_is_one_line(tmp_path, version):
    saved = saved_reports.write(tmp_path / "r.json", {**saved_reports.valid("verify"), "schema_version": version})
    assert_clean_failure(run_inprocess("report", str(saved)), contains="schema_version")


def test_a_newer_verify_report_is_refused_where_the_registry_reads_it(tmp_path):
    """registry record reads a verify report with verify's own reader (verify/saved.py): the same upgrade."""
    saved = saved_reports.write(tmp_path / "r.json", {**saved_reports.valid("verify"), "schema_version": 99})
    assert_clean_failure(run_inprocess("registry", "record", str(saved)), contains="written by a newer eaglezoo")


def test_one_step_per_version_per_kind_and_every_kind_has_its_steps():
    assert set(UPGRADES) == set(KINDS)
    assert all(len(steps) == SCHEMA_VERSION for steps in UPGRADES.values())
    for kind in KINDS:
        schema = run_inprocess("report", "--schema", kind).json()
        assert schema["properties"]["schema_version"]["default"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    "path",
    [p for p in OLD if kind_of(json.loads(p.read_text())) in ("verify", "compare")],
    ids=lambda p: p.name,
)
def test_a_report_written_before_gate_and_serve_says_what_its_page_shows(path, tmp_path):
    """The verdict and the serving path of a verify or compare report written before it kept them are filled in by
    the one upgrade (report_versions.py), so `report --json` says what the page and the summary show: the page's
    headline verdict is the JSON's `gate.verdict`, and its "Serve it" command is the JSON's `serve`."""
    data = json.loads(path.read_text())
    if "rows" not in data and "gate" in data and "serve" in data:
        pytest.skip("written with its gate and serving path")
    page = tmp_path / "page.html"
    r, shown = run_inprocess("report", str(path), "--json"), run_inprocess("report", str(path), "--html", page)
    assert r.code == 0 and shown.code == 0, r.err + shown.err
    html = page.read_text()
    assert r.json()["serve"] and str(escape(shown_path(r.json()["serve"]))) in html
    if r.json()["kind"] == "verify":
        verdict = r.json()["gate"]["verdict"]
        assert f"<b>{verdict}</b>: mean acceptance length" in html and f"Verdict: {verdict}" in html


def test_a_tune_report_written_before_its_recommended_command_says_the_one_its_page_serves(tmp_path):
    """A tune report written before it kept `recommended_command`: the upgrade fills in its table's `vllm serve`
    command, the one its page's "Serve it" shows."""
    path = ROOT / "tests" / "support" / "reports" / "tune-before-kind.json"
    assert "recommended_command" not in json.loads(path.read_text())
    page = tmp_path / "page.html"
    r, shown = run_inprocess("report", str(path), "--json"), run_inprocess("report", str(path), "--html", page)
    assert r.code == 0 and shown.code == 0, r.err + shown.err
    command = r.json()["recommended_command"]
    assert command and command.startswith("vllm serve ") and "--speculative-config" in command
    assert str(escape(shown_path([command]))) in page.read_text()
