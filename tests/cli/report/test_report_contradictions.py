"""`eaglezoo report` (summary and --html) on a saved report whose figures contradict each other: every kind's model
states its cross-field checks, so such a report is refused in one line naming the field (exit 2), never re-printed
as if true, and never an internal error (an empty interval on a doctor page was an IndexError)."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean_failure, run_inprocess
from support.saved_reports import valid, write


def compare(edit):
    data = valid("compare")
    edit(data["rows"][0], data)
    return data


COMPARE = {  # the row: a 2.4286, b 2.5185, ratio 1.0370, interval [1.0, 1.1]
    "ratio outside its interval": (lambda row, d: row.update(interval=[1.05, 1.1]), "outside its interval"),
    "low above high": (lambda row, d: row.update(interval=[1.1, 1.0]), "low first"),
    "ratio not b / a": (lambda row, d: row.update(ratio=1.09), "expected b / a"),
    "length past K+1": (lambda row, d: row.update(b=9.0, ratio=9.0 / row["a"], interval=[1.0, 4.0]), "K+1"),
    "peers not the pooled length": (lambda row, d: d["peers"]["a"].update(vllm=2.9), "peers.a.vllm"),
}


def tune(edit):
    data = valid("tune")
    for cell in data["grid"]:
        x = cell["output_tokens_per_s"]
        cell.update(repeats=[x * 0.9, x, x * 1.1], interval=[x * 0.9, x * 1.1], spread_pct=20.0)
    edit(data)
    return data


TUNE = {
    "median not its repeats'": (lambda d: d["grid"][2].update(repeats=[1.0, 2.0, 3.0], interval=[1.0, 3.0]), "grid[2]"),
    "interval away from its median": (lambda d: d["grid"][2].update(interval=[1.0, 2.0]), "grid[2]"),
    "spread not its repeats'": (lambda d: d["grid"][0].update(spread_pct=3.0), "spread_pct"),
    "decision not its cell": (lambda d: d["decision"][0].update(output_tokens_per_s=999.0), "decision"),
    "grid not whole": (lambda d: d["grid"].pop(), "whole grid"),
}


def doctor(edit):
    data = valid("doctor")
    edit(data)
    return data


DOCTOR = {
    "empty interval": (lambda d: d["measured"][1].update(interval=[]), "measured[1]"),
    "length outside its interval": (lambda d: d["measured"][1].update(interval=[2.3, 2.5]), "outside its interval"),
    "a rate above 1": (lambda d: d["measured"][1]["per_position"].__setitem__(0, 1.5), "measured[1].per_position[0]"),
    "more rates than K": (lambda d: d["measured"][1]["per_position"].append(0.1), "at most one per draft position"),
    "per-prompt figures of other prompts": (lambda d: d["measured"][1]["per_prompt"].pop(), "per_prompt"),
    "a negative K": (lambda d: d["server"].update(k=-1), "server.k"),
}

CASES = (
    [("compare", compare(e), says, name) for name, (e, says) in COMPARE.items()]
    + [("tune", tune(e), says, name) for name, (e, says) in TUNE.items()]
    + [("doctor", doctor(e), says, name) for name, (e, says) in DOCTOR.items()]
)


@pytest.mark.parametrize("kind,data,says", [c[:3] for c in CASES], ids=[f"{c[0]}: {c[3]}" for c in CASES])
def test_a_report_contradicting_itself_is_refused_in_one_line(kind, data, says, tmp_path):
    saved = write(tmp_path / "r.json", data)
    assert_clean_failure(run_inprocess("report", saved), contains=says)
    page = tmp_path / "r.html"
    assert_clean_failure(run_inprocess("report", saved, "--html", page), page, contains=says)


@pytest.mark.parametrize("kind", ["compare", "tune", "doctor"])
def test_the_same_reports_unedited_are_printed_and_paged(kind, tmp_path):
    data = {"compare": compare, "tune": tune, "doctor": doctor}[kind](lambda *a: None)
    saved = write(tmp_path / "r.json", data)
    assert run_inprocess("report", saved).code == 0
    r = run_inprocess("report", saved, "--html", tmp_path / "r.html")
    assert r.code == 0 and (tmp_path / "r.html").exists(), r.err


def test_sglangs_count_may_pass_k_plus_1_by_its_prefill_token(tmp_path):
    """compare.peers: one request of one fully accepted step at K=3 is 5 tokens in 1 step as SGLang counts."""
    from eaglezoo.compare import peers

    assert peers([[3]])["sglang"] == 5.0
    data = compare(lambda row, d: d["peers"]["b"].update(sglang=5.0))
    assert run_inprocess("report", write(tmp_path / "r.json", data)).code == 0
    data = compare(lambda row, d: d["peers"]["b"].update(sglang=5.5))
    assert_clean_failure(run_inprocess("report", write(tmp_path / "r.json", data)), contains="peers.b")


@pytest.mark.parametrize("kind", [[], {}, 3, True], ids=["list", "object", "number", "bool"])
def test_a_kind_that_is_not_a_name_is_refused_in_one_line(kind, tmp_path):
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps({"kind": kind}))
    r = run_inprocess("report", saved)
    assert r.code == 2 and "the report's kind is" in r.err and "internal error" not in r.err, r.err
