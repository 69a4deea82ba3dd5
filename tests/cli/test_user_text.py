"""Text from users (prompt buckets, registry notes and sources) is shown as text, never interpreted: matplotlib
never reads a bucket as mathtext, no page carries a raw bidi control, and the rule for a bucket's name is one
rule at both ends (what verify writes, its readers read). A report with more buckets than a plot can draw
plots the ones with the most drafts, says so, and lists them all."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLE, EXAMPLE_IDS, ROOT, assert_clean_failure, run_inprocess

SAVED = ROOT / "registry" / "reports" / "tiny-example-eagle31.k3.t0.native.json"  # as verify wrote it
MATHTEXT = ["$$", "$\\frac{1}{2}$", "a$b"]  # what matplotlib would parse as mathtext (or refuse to)
UNUSUAL = "👩\u200d💻\u00a0team"  # a ZWJ sequence and a no-break space: text, though not str.isprintable()
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def prompts_file(path: Path, buckets: list[str]) -> Path:
    rows = [json.loads(line) for line in (EXAMPLE / "prompts.jsonl").read_text().splitlines()][: len(buckets)]
    path.write_text("".join(json.dumps({**row, "bucket": b}) + "\n" for row, b in zip(rows, buckets, strict=True)))
    return path


def renamed(names: list[str], source: Path = SAVED) -> dict:
    """The registry's saved report with its buckets renamed (still what verify writes: the strict reader reads it)."""
    data = json.loads(source.read_text())
    drift = data["drift"]
    old = list(drift["mean_acceptance_length_by_bucket"])
    assert len(old) <= len(names)
    new = dict(zip(old, names, strict=False))
    for key, table in drift.items():
        if key.endswith("_by_bucket"):
            drift[key] = {new[b]: v for b, v in table.items()}
    for row in data["per_prompt"]:
        row["bucket"] = new[row["bucket"]]
    return data


def svgs(html: str) -> str:
    return "".join(re.findall(r"<svg\b.*?</svg>", html, re.DOTALL))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One tiny verify run with buckets matplotlib would read as mathtext, and one of unusual but printable text."""
    work = tmp_path_factory.mktemp("user-text")
    prompts = prompts_file(work / "prompts.jsonl", [MATHTEXT[0], MATHTEXT[1], UNUSUAL])
    report, page = work / "report.json", work / "report.html"
    r = run_inprocess(
        "verify",
        EXAMPLE / "eagle31-safeai",
        "--target",
        EXAMPLE / "target",
        *EXAMPLE_IDS,
        "--prompts",
        prompts,
        "--max-new-tokens",
        "8",
        "--report",
        report,
        "--html",
        page,
    )
    return r, report, page


# --------------------------------------------------------------------------------------------
# 1. a bucket is drawn as its text, never as mathtext


def test_verify_html_draws_a_mathtext_bucket_as_its_text(measured):
    r, _, page = measured
    assert r.code == 0, r.err
    assert "internal error" not in r.err and page.is_file()
    html = page.read_text(encoding="utf-8")
    for name in (MATHTEXT[0], MATHTEXT[1], UNUSUAL):
        assert name in svgs(html), name  # the plot's legend, literally
        assert f"<td>{name}</td>" in html, name  # and the page's table of buckets


def test_report_html_of_a_saved_report_with_mathtext_buckets(tmp_path):
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(renamed(MATHTEXT)))
    r = run_inprocess("report", saved, "--html", tmp_path / "page.html")
    assert r.code == 0, r.err
    drawn = svgs((tmp_path / "page.html").read_text(encoding="utf-8"))
    assert all(name in drawn for name in MATHTEXT)


def test_registry_site_draws_a_recorded_report_with_mathtext_buckets(tmp_path):
    registry = tmp_path / "zoo" / "registry"
    (registry / "reports").mkdir(parents=True)
    shutil.copy(ROOT / "registry" / "tiny-example-eagle31.yaml", registry)
    (registry / "reports" / SAVED.name).write_text(json.dumps(renamed(MATHTEXT)))
    r = run_inprocess("registry", "site", tmp_path / "site", "--registry", registry)
    assert r.code == 0, r.err
    drawn = svgs((tmp_path / "site" / "entries" / "tiny-example-eagle31.html").read_text(encoding="utf-8"))
    assert all(name in drawn for name in MATHTEXT)


def test_push_dry_run_with_a_report_of_mathtext_buckets(tmp_path, measured):
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(renamed(MATHTEXT)))
    for report in (saved, measured[1]):  # edited from the registry's, and as this verify wrote it
        r = run_inprocess(
            "push", EXAMPLE / "eagle31-safeai", "tester/x", "--target", "org/target", "--report", report, "--dry-run"
        )
        assert r.code == 0, r.err


# --------------------------------------------------------------------------------------------
# 2 and 3. one rule for a bucket's name, at both ends


REFUSED = {
    "bell": "a\u0007b",
    "escape": "\u001b[31m",
    "newline": "a\nb",
    "delete": "a\u007fb",
    "c1": "a\u0085b",
    "line-separator": "a\u2028b",
    "blank": "  ",
    "empty": "",
    **{f"U+{ord(c):04X}": f"x{c}y" for c in BIDI},
}
ACCEPTED = {
    "mathtext": "$$",
    "dollar": "a$b",
    "zwj-nbsp": UNUSUAL,
    "ideographic-space": "日本\u3000語",
    "soft-hyphen": "co\u00adop",
    "colon": "temperature:1",
}


@pytest.mark.parametrize("name", ["bell", "escape", "U+202E", "U+2066", "blank"])
def test_the_prompt_reader_refuses_a_bucket_with_a_control_character(tmp_path, name):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "fine"}\n' + json.dumps({"prompt": "q", "bucket": REFUSED[name]}) + "\n")
    target = tmp_path / "target"
    target.mkdir()
    shutil.copy(EXAMPLE / "target" / "config.json", target)  # the prompts are read before any tokenizer
    r = run_inprocess("verify", EXAMPLE / "eagle31-safeai", "--target", target, *EXAMPLE_IDS, "--prompts", prompts)
    assert_clean_failure(r, contains=f"{prompts}: line 2: 'bucket'")
    assert "hint:" in r.err


def test_the_prompt_reader_and_the_saved_reader_share_one_rule(tmp_path):
    from eaglezoo.errors import BadInput
    from eaglezoo.verify.saved import report_from
    from eaglezoo.verify.workload import load_prompts

    def prompt_reader(name):
        path = tmp_path / "p.jsonl"
        path.write_text(json.dumps({"prompt": "q", "bucket": name}) + "\n", encoding="utf-8")
        try:
            return load_prompts(path)[0].bucket == name
        except BadInput:
            return False

    def saved_reader(name):
        try:
            report_from(renamed([name, f"{name} two", f"{name} three"]), "report")
            return True
        except BadInput:
            return False

    for label, name in {**REFUSED, **ACCEPTED}.items():
        assert prompt_reader(name) == saved_reader(name) == (label in ACCEPTED), label


# --------------------------------------------------------------------------------------------
# 3. no raw bidi control on any page of the site


def test_the_site_neutralises_bidi_controls_in_notes_sources_and_links(tmp_path):
    registry = tmp_path / "zoo" / "registry"
    (registry / "reports").mkdir(parents=True)
    shutil.copy(SAVED, registry / "reports")
    entry = yaml.safe_load((ROOT / "registry" / "tiny-example-eagle31.yaml").read_text())
    entry["notes"] = [f"looks fine{c}txt.exe" for c in BIDI]
    entry["sources"] = ["https://example.org/\u202eexe.txt", "examples/tiny/\u2067README\u2069.md"]
    entry["publisher"] = "eaglezoo \u202eoruls"
    entry["evidence"]["licence"] = {"level": "model-card", "source": "https://example.org/\u202ecard"}
    entry["null_reasons"]["hardware"] = "runs on \u2067CPU\u2069 only"
    (registry / "tiny-example-eagle31.yaml").write_text(yaml.safe_dump(entry, allow_unicode=True), encoding="utf-8")
    r = run_inprocess("registry", "site", tmp_path / "site", "--registry", registry)
    assert r.code == 0, r.err
    pages = sorted((tmp_path / "site").rglob("*.html"))
    assert len(pages) == 2
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert not set(BIDI) & set(html), page.name
    shown = (tmp_path / "site" / "entries" / "tiny-example-eagle31.html").read_text(encoding="utf-8")
    assert "looks fine\\u202etxt.exe" in shown and "https://example.org/\\u202eexe.txt" in shown


# --------------------------------------------------------------------------------------------
# 4. many buckets: the plot draws the ones with the most drafts and says so; the table lists all


def test_a_report_with_many_buckets_plots_the_largest_and_lists_all(tmp_path):
    from eaglezoo.plots import MAX_BUCKETS

    data = json.loads(SAVED.read_text())
    many = MAX_BUCKETS + 22
    names = [f"bucket-{i:03d}" for i in range(many)]
    drift = data["drift"]
    for key in ("acceptance_per_position_by_bucket", "mean_acceptance_length_by_bucket"):
        first = next(iter(drift[key].values()))
        drift[key] = {b: first for b in names}
    row = data["per_prompt"][0]
    # bucket i has i + 1 verify steps: the last MAX_BUCKETS have the most drafts
    data["per_prompt"] = [{**row, "index": i, "bucket": b, "accepted": [1] * (i + 1)} for i, b in enumerate(names)]
    data["num_prompts"] = many
    saved = tmp_path / "many.json"
    saved.write_text(json.dumps(data))
    page = tmp_path / "many.html"
    r = run_inprocess("report", saved, "--html", page)
    assert r.code == 0, r.err
    html = page.read_text(encoding="utf-8")
    assert f"{many} buckets; the plot shows the {MAX_BUCKETS} with the most drafts, the table lists all" in html
    drawn = svgs(html)
    assert [b for b in names if b in drawn] == names[-MAX_BUCKETS:]
    assert all(f"<td>{b}</td>" in html for b in names)
