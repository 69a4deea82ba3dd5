"""A saved verify report is read back by one strict reader (verify/saved.read_report) in every command that reads
one: `registry record`, `report --html` and `push --report`. What verify never writes is refused in one line naming
the field, before anything is written; the page escapes what it shows; a dry-run push checks the names the real push
checks. Every report here is a shipped one (registry/reports/), edited: no verify runs."""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLE, ROOT, assert_clean_failure, run_inprocess, tree_digest

SHIPPED = json.loads((ROOT / "registry" / "reports" / "tiny-example-eagle31.k3.t0.native.json").read_text())
KEPT = "tiny-example-eagle31.k3.t0.native.json"
LEAKS = ("Error:", "Error(", "Traceback", "Warning", "internal error", "KeyError", "TypeError", "ValueError")


def edited(**changes) -> dict:
    data = copy.deepcopy(SHIPPED)
    for key, value in changes.items():
        if value is DELETE:
            del data[key]
        else:
            data[key] = value
    return data


DELETE = object()


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))  # NaN and inf as JSON's NaN / Infinity, which Python's reader accepts
    return path


def assert_no_leak(err: str) -> None:
    assert not any(word in err for word in LEAKS), err


# --------------------------------------------------------------------------------------------
# registry record


@pytest.fixture
def reg(tmp_path) -> Path:
    """The example's entry, unverified, in a registry of its own, with a report already kept under reports/."""
    reg = tmp_path / "registry"
    (reg / "reports").mkdir(parents=True)
    data = yaml.safe_load((ROOT / "registry" / "tiny-example-eagle31.yaml").read_text())
    data.update(status={"state": "unverified"}, measured=[])
    (reg / "tiny-example-eagle31.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (reg / "reports" / KEPT).write_text(json.dumps(SHIPPED))
    return reg


def for_entry(reg: Path, **changes) -> dict:
    """The shipped report pointed at this registry's copy of the entry's drafter."""
    return edited(drafter=str(reg.parent / EXAMPLE.relative_to(ROOT) / "eagle31-safeai"), **changes)


def record(reg: Path, report: Path, *args):
    return run_inprocess("registry", "record", report, "--registry", reg, *args)


def test_record_accepts_the_shipped_report(reg, tmp_path):
    r = record(reg, write(tmp_path / "r.json", for_entry(reg)), "--json")
    assert r.code == 0, r.err
    assert r.json()["state"] == "verified" and r.json()["measured"]["report"] == f"registry/reports/{KEPT}"


@pytest.mark.parametrize("name", ["x/../../../../PWNED", "..", "", "a\nb", "vllm/../x", "NATIVE"])
def test_record_refuses_an_engine_name_verify_never_writes(reg, tmp_path, name):
    report = write(tmp_path / "r.json", for_entry(reg, engine={"name": name}))
    before = tree_digest(tmp_path)
    assert_clean_failure(record(reg, report), contains="engine.name")
    assert tree_digest(tmp_path) == before  # nothing written, inside the registry or outside it
    assert not (tmp_path.parent / "PWNED.json").exists()


K3 = [0.5, 0.3, 0.2]
MALFORMED_FOR_RECORD = {
    "no rates": ({"acceptance_per_position": []}, "acceptance_per_position"),
    "rates above 1": (
        {"acceptance_per_position": [5, 5, 5], "mean_acceptance_length": 4.0},
        "acceptance_per_position[0]",
    ),
    "64 rates for K=3": ({"acceptance_per_position": [0.1] * 64}, "num_spec_tokens (3)"),
    "negative drafts": ({"num_drafts": -1}, "num_drafts"),
    "no drafts": (
        {"num_drafts": 0, "num_accepted": 0, "mean_acceptance_length": 1.0, "acceptance_per_position": [0.0, 0.0, 0.0]},
        "drafted nothing",
    ),
    "AL below 1": ({"mean_acceptance_length": -5}, "mean_acceptance_length"),
    "AL infinite": ({"mean_acceptance_length": math.inf}, "mean_acceptance_length"),
    "AL NaN": ({"mean_acceptance_length": math.nan}, "mean_acceptance_length"),
    "rate NaN": ({"acceptance_per_position": [math.nan, 0.3, 0.2]}, "acceptance_per_position[0]"),
    "AL not 1 + sum of rates": ({"acceptance_per_position": K3}, "1 + the sum of acceptance_per_position"),
    "created not a date": ({"created": "not a date"}, "created"),
    "created in the future": ({"created": "9999-12-31T00:00:00+00:00"}, "in the future"),
    "created a date only": ({"created": "2026-01-01"}, "created"),
    "temperature a word": ({"sampling": {"temperature": "hot", "seed": None}}, "sampling.temperature"),
    "temperature negative": ({"sampling": {"temperature": -1, "seed": None}}, "sampling.temperature"),
    "device with a newline": ({"device": "cpu\nverified: true"}, "device"),
    "dtype with a control character": ({"dtype": "float32\x1b[31m"}, "dtype"),
    "K as a string": ({"num_spec_tokens": "3"}, "num_spec_tokens"),
    "drafts a float": ({"num_drafts": 1028.0}, "num_drafts"),
    "histogram of K counts": ({"histogram": [1, 2, 3]}, "histogram"),
    "histogram negative": ({"histogram": [415, 218, -121, 274]}, "histogram"),
}


@pytest.mark.parametrize("case", MALFORMED_FOR_RECORD, ids=list(MALFORMED_FOR_RECORD))
def test_record_refuses_a_malformed_report_and_writes_nothing(reg, tmp_path, case):
    """Refused before anything is written: the kept report under reports/ and the YAML stay as they were."""
    changes, field = MALFORMED_FOR_RECORD[case]
    report = write(tmp_path / "r.json", for_entry(reg, **changes))
    before = tree_digest(reg)
    r = record(reg, report)
    assert_clean_failure(r, contains=field)
    assert "(hint: " in r.err
    assert_no_leak(r.err)
    assert tree_digest(reg) == before


def test_shipped_reports_hold_al_equal_to_one_plus_the_rates():
    """The identity the reader enforces holds on every shipped report, native and vLLM."""
    for path in sorted((ROOT / "registry" / "reports").glob("*.json")):
        r = json.loads(path.read_text())
        assert abs(r["mean_acceptance_length"] - 1 - sum(r["acceptance_per_position"])) < 1e-9, path.name
        assert abs(r["mean_acceptance_length"] - 1 - r["num_accepted"] / r["num_drafts"]) < 1e-9, path.name


# --------------------------------------------------------------------------------------------
# report --html


def render(tmp_path: Path, data: dict):
    page = tmp_path / "page.html"
    return run_inprocess("report", write(tmp_path / "saved.json", data), "--html", page), page


MALFORMED_FOR_PAGE = {
    **{
        f"{key} null": ({key: None}, key)
        for key in ("created", "drafter", "target", "device", "dtype", "engine", "eaglezoo_version", "drift")
    },
    **{f"{key} an object": ({key: {"a": 1}}, key) for key in ("created", "drafter", "target", "eaglezoo_version")},
    "drift a string": ({"drift": "x"}, "drift"),
    "engine a string": ({"engine": "native"}, "engine"),
    "created missing": ({"created": DELETE}, "created"),
    "max_new_tokens markup": ({"max_new_tokens": "<script>alert(1)</script>"}, "max_new_tokens"),
    "num_drafts markup": ({"num_drafts": "<script>alert(1)</script>"}, "num_drafts"),
    "bucket rates of another K": (
        {"drift": {**SHIPPED["drift"], "acceptance_per_position_by_bucket": {"x": [0.5]}}},
        "acceptance_per_position_by_bucket",
    ),
    "rms a string": ({"drift": {**SHIPPED["drift"], "feedback_rms_per_depth": "high"}}, "feedback_rms_per_depth"),
    "histogram of lists": ({"histogram": [[1], [2], [3], [4]]}, "histogram"),
    "speedup without levels": ({"speedup": {"levels": "fast"}}, "speedup"),
    "by-K rows of text": ({"acceptance_by_k": {"basis": "exact", "rows": ["a"]}}, "acceptance_by_k"),
    "lint finding of another severity": ({"lint": [{"severity": "fatal", "code": "x", "message": "m"}]}, "lint"),
}


@pytest.mark.parametrize("case", MALFORMED_FOR_PAGE, ids=list(MALFORMED_FOR_PAGE))
def test_report_page_refuses_a_malformed_verify_report(tmp_path, case):
    changes, field = MALFORMED_FOR_PAGE[case]
    r, page = render(tmp_path, edited(**changes))
    assert_clean_failure(r, page, contains=field)
    assert_no_leak(r.err)


def test_a_million_positions_are_refused_at_once(tmp_path):
    start = time.monotonic()
    r, page = render(tmp_path, edited(acceptance_per_position=[0.5] * 1_000_000))
    assert_clean_failure(r, page, contains="acceptance_per_position holds 1000000 values")
    assert time.monotonic() - start < 20


def test_a_control_character_in_a_bucket_name_is_refused_without_plot_warnings(tmp_path):
    drift = copy.deepcopy(SHIPPED["drift"])
    drift["acceptance_per_position_by_bucket"]["bad\x1bname"] = [0.5, 0.3, 0.2]
    r, page = render(tmp_path, edited(drift=drift))
    assert_clean_failure(r, page, contains="bucket")
    assert_no_leak(r.err)


def test_the_page_escapes_what_it_shows(tmp_path):
    script = "<script>alert(1)</script>"
    r, page = render(tmp_path, edited(drafter=f"/models/{script}", target=f"t{script}", device=script))
    assert r.code == 0, r.err
    assert r.err.strip() == ""  # no plotting library's warning either
    html = page.read_text()
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_page_escapes_values_the_reader_never_lets_through():
    """Defence in depth: the page itself escapes every value it interpolates, numbers included."""
    from eaglezoo.pages import verify_page
    from eaglezoo.reports import from_data

    script = "<script>alert(1)</script>"
    report = from_data(edited(), "verify", "the shipped report")
    html = verify_page(
        report.model_copy(update={"max_new_tokens": script, "num_prompts": script, "num_drafts": script})
    )
    assert "<script" not in html and html.count("&lt;script&gt;") >= 3


def test_an_edited_tune_report_says_which_key_without_internal_text(tmp_path):
    r, page = render(tmp_path, {"grid": [], "decision": [{"concurrency": 1}]})
    assert_clean_failure(r, page, contains="the report lacks what its page needs")
    assert_no_leak(r.err)


# --------------------------------------------------------------------------------------------
# push --report, and what a dry run checks


DRAFTER = EXAMPLE / "eagle31-safeai"


def test_push_reads_its_report_strictly(tmp_path):
    report = write(tmp_path / "r.json", edited(mean_acceptance_length=math.nan))
    r = run_inprocess("push", DRAFTER, "tester/x", "--dry-run", "--report", report)
    assert_clean_failure(r, contains="mean_acceptance_length")
    report = write(tmp_path / "r.json", edited(engine={"name": "native", "version": "1\n2"}))
    assert_clean_failure(
        run_inprocess("push", DRAFTER, "tester/x", "--dry-run", "--report", report), contains="engine.version"
    )


def test_push_dry_run_with_the_shipped_report(tmp_path):
    r = run_inprocess(
        "push",
        DRAFTER,
        "tester/x",
        "--dry-run",
        "--json",
        "--tag",
        "v1.0",
        "--revision",
        "dev/x",
        "--report",
        write(tmp_path / "r.json", SHIPPED),
    )
    assert r.code == 0, r.err
    assert {"README.md", "acceptance.svg"} <= {f["path"] for f in r.json()["files"]}


@pytest.mark.parametrize(
    "args, field",
    [
        (["not a repo"], "repo id"),
        ([""], "repo id"),
        (["a/b/c"], "repo id"),
        (["../.."], "repo id"),
        (["tester/x", "--tag", "a b~^:"], "--tag"),
        (["tester/x", "--tag", "v1.lock"], "--tag"),
        (["tester/x", "--revision", "..bad"], "--revision"),
        (["tester/x", "--revision", "a//b"], "--revision"),
        (["tester/x", "--revision", "-main"], "--revision"),
        (["tester/x", "--tag", "a\x1b"], "--tag"),
    ],
    ids=[
        "spaces",
        "empty",
        "three-parts",
        "dots",
        "tag-chars",
        "tag-lock",
        "rev-dots",
        "rev-slashes",
        "rev-dash",
        "tag-control",
    ],
)
def test_push_dry_run_refuses_what_the_real_push_refuses(args, field):
    r = run_inprocess("push", DRAFTER, *args, "--dry-run")
    assert_clean_failure(r, contains=field)
    assert_no_leak(r.err)
