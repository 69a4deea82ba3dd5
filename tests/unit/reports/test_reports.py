"""The typed reports (eaglezoo/reports.py): every kind read by its model, reports written before `kind` existed
still read, the schema printed and documented from the code, and a report's figures checked against each other
when it is built as when it is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, run_inprocess

from eaglezoo.report_versions import upgraded
from eaglezoo.reports import kind_of, read_saved, schema, schema_markdown
from eaglezoo.verify.report import VerifyReport

SAVED = Path(__file__).resolve().parents[2] / "support" / "reports"
BEFORE_KIND = {
    "verify": SAVED / "verify-before-kind.json",
    "tune": SAVED / "tune-before-kind.json",
    "compare": SAVED / "compare-before-kind.json",
}


@pytest.mark.parametrize("kind", BEFORE_KIND)
def test_a_report_written_before_kind_existed_still_reads_as_its_kind(kind):
    data = json.loads(BEFORE_KIND[kind].read_text())
    assert "kind" not in data
    report = read_saved(BEFORE_KIND[kind])
    assert report.kind == kind == kind_of(data)
    again = type(report).model_validate(report.model_dump(mode="json"), strict=True)  # what it writes, it reads
    assert again == report


@pytest.mark.parametrize("kind", ["verify", "tune", "compare", "all"])
def test_report_schema_prints_each_kinds_json_schema(kind):
    r = run_inprocess("report", "--schema", kind)
    assert r.code == 0, r.err
    assert json.loads(r.out) == json.loads(json.dumps(schema(kind)))
    if kind != "all":
        assert json.loads(r.out)["properties"]["kind"]["const"] == kind


def test_docs_report_md_is_generated_from_the_models():
    """python -m scripts.docs.write_report_docs writes it; a model changed without the page fails here."""
    assert (ROOT / "docs" / "report.md").read_text(encoding="utf-8") == schema_markdown()


def test_a_report_whose_figures_disagree_cannot_be_built():
    data = upgraded(json.loads(BEFORE_KIND["verify"].read_text()), "verify", "the report")  # as a reader sees it
    VerifyReport.model_validate(data)
    for edit in (
        {"mean_acceptance_length": data["mean_acceptance_length"] + 0.5},  # not 1 + the sum of rates
        {"histogram": data["histogram"][:-1]},  # not K + 1 counts
        {"num_accepted": 10**9},
    ):  # more than K per draft
        with pytest.raises(ValueError):
            VerifyReport.model_validate({**data, **edit})


def test_an_unknown_kind_or_key_is_named(tmp_path):
    verify = json.loads(BEFORE_KIND["verify"].read_text())
    for data, says in (({**verify, "kind": "doctor?"}, "kind"), ({**verify, "verified": True}, "verified")):
        path = tmp_path / "report.json"
        path.write_text(json.dumps(data))
        r = run_inprocess("report", path)
        assert r.code == 2 and says in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_figures_an_engine_sends_that_no_report_may_hold_are_one_line():
    """A server's name with a control character, or a count that contradicts the rates: never an internal error."""
    from eaglezoo.errors import EngineError
    from eaglezoo.verify.report.build import built

    data = upgraded(json.loads(BEFORE_KIND["verify"].read_text()), "verify", "the report")  # as a reader sees it
    for edit, says in (
        ({"engine": {"name": "endpoint", "model": "evil\x1b[2J"}}, "engine.model"),
        ({"num_accepted": data["num_accepted"] + 7}, "1 + num_accepted / num_drafts"),
    ):
        with pytest.raises(EngineError) as caught:
            built(VerifyReport, **{**data, **edit})
        assert says in caught.value.message and "\n" not in caught.value.message
