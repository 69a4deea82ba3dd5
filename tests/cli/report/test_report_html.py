"""`eaglezoo report FILE --html PAGE` on saved files that are not what verify, tune or compare write: one line,
never an internal error, no page. (The pages themselves, in a browser: tests/pages/.)"""

from __future__ import annotations

from conftest import assert_clean_failure, run_inprocess


def test_a_report_that_is_none_of_the_three(tmp_path):
    saved = tmp_path / "other.json"
    saved.write_text('{"hello": 1}')
    assert_clean_failure(
        run_inprocess("report", saved, "--html", tmp_path / "x.html"),
        tmp_path / "x.html",
        contains="none of verify's, tune's or compare's",
    )


def test_an_edited_report_is_one_line_never_an_internal_error(tmp_path):
    saved = tmp_path / "edited.json"
    saved.write_text('{"acceptance_per_position": [0.5], "histogram": [1, 1]}')  # verify's keys, the rest cut away
    r = run_inprocess("report", saved, "--html", tmp_path / "x.html")
    assert_clean_failure(r, tmp_path / "x.html", contains="the report lacks what its page needs")
