"""Floors compare like with like: a registry entry's floors gate a run on the whole prompt set they were measured
on (PASS/FAIL, exit 1 on FAIL) and are compared, with the difference, on any other or a part of it (exit 0, said);
`--min-al` adds a gate and hides none; the text, the JSON and the page say which, with every skipped prompt."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from conftest import EXAMPLE, ROOT, run_inprocess

from eaglezoo.verify.workload import prompts_sha256, suite_path

ENTRY = "tiny-example-eagle31"
FAST = ["--max-new-tokens", "16", "--device", "cpu", "--dtype", "float32"]


def registry_with(tmp_path, **floor) -> str:
    """A copy of the example's registry entry (and its files) whose whole-run floor is edited as given."""
    shutil.copytree(EXAMPLE, tmp_path / "examples" / "tiny")
    reg = tmp_path / "registry"
    reg.mkdir()
    data = yaml.safe_load((ROOT / "registry" / f"{ENTRY}.yaml").read_text())
    data["acceptance_floors"][0].update(floor)
    (reg / f"{ENTRY}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return str(reg)


@pytest.fixture(scope="module")
def high_floors(tmp_path_factory):
    """Floors no run of the example meets, measured (as the entry says by default) on its own prompt set."""
    return registry_with(tmp_path_factory.mktemp("high"), per_position=[0.99, 0.99, 0.99])


def test_a_part_of_the_set_is_compared_with_the_floors_not_gated(high_floors, tmp_path):
    page = tmp_path / "page.html"
    r = run_inprocess("verify", ENTRY, "--registry", high_floors, "--max-prompts", "4", *FAST, "--json", "--html", page)
    assert r.code == 0, r.err
    data = r.json()
    gate = data["gate"]
    assert gate["verdict"] == "compared, not gated" and gate["entry_floors"] == "compared"
    assert data["failures"] == [] and any("took 4 of the 36 rows" in w for w in gate["why_compared"])
    first = gate["checks"][0]
    assert (first["what"], first["floor"], first["gated"], first["met"]) == (
        "acceptance at position 1",
        0.99,
        False,
        False,
    )
    assert first["difference"] == pytest.approx(data["acceptance_per_position"][0] - 0.99)
    assert data["prompt_set"]["taken"] == 4 and data["prompt_set"]["rows"] == 36
    html = page.read_text()
    assert "Verdict: compared, not gated" in html and "took 4 of the 36 rows" in html and "(compared)" in html
    text = run_inprocess("verify", ENTRY, "--registry", high_floors, "--max-prompts", "4", *FAST)
    assert text.code == 0 and "compared, not gated" in text.out and "FAIL" not in text.out


def test_the_whole_set_gates_and_min_al_hides_no_floor(high_floors):
    r = run_inprocess("verify", ENTRY, "--registry", high_floors, *FAST, "--min-al", "1", "--json")
    assert r.code == 1, r.err
    data = r.json()
    assert data["gate"]["verdict"] == "FAIL" and data["gate"]["entry_floors"] == "gated"
    assert {c["source"] for c in data["gate"]["checks"]} == {"command line", "registry"}
    assert all(c["gated"] for c in data["gate"]["checks"])
    assert any(f.startswith("acceptance at position 1 is") for f in data["failures"])  # the entry's, kept
    assert not any(f.startswith("mean acceptance length") for f in data["failures"])  # --min-al 1 is met
    text = run_inprocess("verify", ENTRY, "--registry", high_floors, *FAST, "--min-al", "1")
    assert text.code == 1 and "FAIL acceptance at position 1" in text.out


def test_a_floor_on_another_engine_or_a_changed_set_is_compared(tmp_path):
    reg = registry_with(tmp_path / "engine", per_position=[0.99, 0.99, 0.99], engine="vllm")
    r = run_inprocess("verify", ENTRY, "--registry", reg, *FAST, "--json")
    assert r.code == 0, r.err
    assert r.json()["gate"]["why_compared"] == ["the floors were measured on the vllm engine, this run on native"]
    reg = registry_with(tmp_path / "changed", per_position=[0.99, 0.99, 0.99], prompts_sha256="0" * 64)
    why = run_inprocess("verify", ENTRY, "--registry", reg, *FAST, "--json").json()["gate"]["why_compared"]
    assert len(why) == 1 and "has changed since the floors were measured on it" in why[0]


def test_a_floor_that_names_its_set_gates_a_run_on_it(tmp_path):
    """A floor recorded on a suite, with the suite's hash: a whole run of the suite gates (here, passes)."""
    reg = registry_with(
        tmp_path,
        per_position=[0.01, 0.0, 0.0],
        prompts="suite:robustness",
        prompts_sha256=prompts_sha256(suite_path("robustness")),
    )
    r = run_inprocess("verify", ENTRY, "--registry", reg, "--suite", "robustness", *FAST, "--json")
    assert r.code == 0, r.err
    assert r.json()["gate"]["verdict"] == "PASS" and r.json()["gate"]["entry_floors"] == "gated"


def test_the_users_robustness_run_says_what_it_skipped_and_why_it_is_not_gated():
    """The embedded example on 12 rows of the robustness suite: compared with the entry's floors, exit 0, every
    skipped prompt listed with its reason, the per-condition table, the prompt set by name."""
    r = run_inprocess("verify", ENTRY, "--suite", "robustness", "--max-prompts", "12", *FAST)
    assert r.code == 0, r.err
    assert "prompts: suite:robustness, 12 of 108 rows (--max-prompts), round robin" in " ".join(r.out.split())
    assert "compared, not gated" in r.out and "per condition" in r.out
    skipped = [line for line in r.out.splitlines() if line.startswith("skipped 1 prompt(s) of ")]
    assert len(skipped) == 7 and "thinking:on: the target's chat template has no thinking switch" in r.out
    said = " ".join(r.out.split())
    assert all(f"(row {row})" in said for row in (1, 2, 6, 7, 8, 9, 11)), said


def test_a_rerun_of_a_native_verify_gives_the_same_counts():
    args = ["verify", ENTRY, "--max-prompts", "6", *FAST, "--json"]
    first, second = (run_inprocess(*args) for _ in range(2))
    assert first.code == second.code == 0, first.err + second.err
    a, b = first.json(), second.json()
    for key in ("acceptance_per_position", "num_drafts", "num_accepted", "histogram", "mean_acceptance_length"):
        assert a[key] == b[key], key
    assert [(p["index"], p["accepted"]) for p in a["per_prompt"]] == [
        (p["index"], p["accepted"]) for p in b["per_prompt"]
    ]
    assert a["reproduction"]["prompts_sha256"] == b["reproduction"]["prompts_sha256"]


def test_the_report_carries_its_reproduction_with_secrets_redacted(tmp_path):
    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmN"  # an HF token's shape, in a file name the command names
    prompts = tmp_path / f"{token}.jsonl"
    prompts.write_text((EXAMPLE / "prompts.jsonl").read_text())
    report = tmp_path / "r.json"
    r = run_inprocess("verify", ENTRY, "--prompts", prompts, "--max-prompts", "2", *FAST, "--report", report)
    assert r.code == 0, r.err
    rep = json.loads(report.read_text())["reproduction"]
    assert rep["command"][:3] == ["eaglezoo", "verify", ENTRY] and "--max-prompts" in rep["command"]
    assert token not in json.dumps(rep)
    assert rep["prompts_sha256"] == prompts_sha256(prompts) and rep["machine"]["cpu"] and rep["torch"]
    shown = run_inprocess("report", report)
    rerun = next(line for line in shown.out.splitlines() if line.startswith("rerun: eaglezoo verify"))
    assert token not in rerun and "machine:" in shown.out
