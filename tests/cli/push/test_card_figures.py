"""The model card sets the pushed run beside the registry's figures of its target by the registry's own rule
(registry/listing.py `beside_run`, the rule `registry list` and `show` apply): the figures taken under the run's
conditions side by side, the others apart with what keeps each from being compared."""

from __future__ import annotations

import json
from types import SimpleNamespace

from conftest import EXAMPLE, run_inprocess
from support.saved_reports import valid

from eaglezoo.registry import load as registry
from eaglezoo.registry.conditions import Figure
from eaglezoo.registry.listing import beside_run


def card(tmp_path, report: dict) -> str:
    saved = tmp_path / "verify.json"
    saved.write_text(json.dumps(report))
    r = run_inprocess("push", EXAMPLE / "eagle31-safeai", "me/tiny-eagle31", "--report", saved, "--dry-run")
    assert r.code == 0, r.err
    return r.out


def test_a_run_of_a_registry_entry_stands_beside_its_targets_figures_with_what_differs(tmp_path):
    report = valid("verify")
    assert report["registry_id"] == "tiny-example-eagle31"
    shown = card(tmp_path, report)
    section = shown.split("### Beside the published figures", 1)[1]
    side_by_side = section.split("Taken under the same conditions, side by side:", 1)[1].split("\n\n")[1]
    rows = [line.split(" | ")[0] for line in side_by_side.splitlines() if line.startswith("| ")][1:]
    # the example target's four drafters were measured on the same prompts, K, T and engine as this run
    assert rows[0] == "| this run (measured)" and "2.24708 (K=3, T=0, examples/tiny/prompts.jsonl x36" in side_by_side
    assert {f"| tiny-example-{n} (reported)" for n in ("eagle3", "eagle31", "dflash", "peagle")} <= set(rows), rows


def test_a_run_under_other_conditions_stands_apart_with_what_differs(tmp_path):
    report = {**valid("verify"), "max_new_tokens": 32}
    section = card(tmp_path, report).split("### Beside the published figures", 1)[1]
    assert "No figure of this target in the registry was taken under this run's conditions" in section
    rows = [line for line in section.splitlines() if line.startswith("| tiny-example-")]
    assert rows and all("max_new_tokens: 32 vs 64" in row for row in rows), rows


def test_a_run_of_a_folder_has_no_entry_to_stand_beside(tmp_path):
    report = {**valid("verify"), "registry_id": None}
    assert "### Beside the published figures" not in card(tmp_path, report)


def test_figures_under_the_same_conditions_sit_side_by_side_and_the_others_apart():
    entry = registry.layered().entries["tiny-example-eagle3"]
    published = next(f for f in entry.figures() if f.metric == "acceptance_length" and f.origin == "reported")
    at_k4 = published.conditions.model_copy(update={"k": 4})
    rivals = [SimpleNamespace(figures=lambda: [published])]
    same = beside_run(
        Figure("mine", published.metric, published.definition, 2.5, published.conditions, "measured"), rivals
    )
    assert [f.entry for f in same.comparable] == ["tiny-example-eagle3 (reported)"] and same.apart == ()
    other = beside_run(Figure("mine", published.metric, published.definition, 2.5, at_k4, "measured"), rivals)
    assert other.comparable == () and [f.differs for f in other.apart] == [("k: 4 vs 3",)]
