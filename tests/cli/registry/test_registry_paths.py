"""Registry paths and ids (issue 13, publishing safely): every path an entry names stays inside its repository, ids
may hold dots, an entry file in another folder is checked with that folder's repository as root, verify takes
another registry, and a malformed entry does not hide the others."""

from __future__ import annotations

import shutil

import pytest
import yaml
from conftest import ROOT, assert_clean_failure, run_inprocess, tree_digest


def write_registry(tmp_path, entry_id, **changes):
    reg = tmp_path / "repo" / "registry"
    reg.mkdir(parents=True, exist_ok=True)
    entry = yaml.safe_load((ROOT / "registry" / "tiny-example-eagle31.yaml").read_text())
    entry.update(id=entry_id, **changes)
    (reg / f"{entry_id}.yaml").write_text(yaml.safe_dump(entry, sort_keys=False))
    return reg


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {
                "status": {
                    "state": "verified",
                    "date": "2026-11-22",
                    "eaglezoo_version": "0.1.0",
                    "report": "../../../../etc/passwd",
                }
            },
            "status.report '../../../../etc/passwd' leaves",
        ),
        ({"drafter": {"path": "../../../../etc"}}, "drafter.path '../../../../etc' leaves"),
        ({"prompts": "/etc/passwd"}, "prompts '/etc/passwd' must be a relative path"),
    ],
)
def test_registry_paths_stay_inside_the_repository(tmp_path, changes, message):
    reg = write_registry(tmp_path, "escapes.v1", **changes)
    r = run_inprocess("registry", "check", "--registry", reg, "--json")
    assert r.code == 1 and message in " ".join(r.json()["entries"]["escapes.v1"]["problems"])
    if "drafter" in changes:
        assert_clean_failure(run_inprocess("verify", "escapes.v1", "--registry", reg), None, contains="leaves")


def test_registry_ids_with_dots_and_entry_files(tmp_path):
    dotted = "redhatai-qwen3-8b-speculator.eagle3"
    r = run_inprocess("registry", "check", dotted, "--json")
    assert r.code == 0 and list(r.json()["entries"]) == [dotted]
    assert run_inprocess("registry", "show", dotted, "--json").json()["id"] == dotted
    assert run_inprocess("registry", "show", ROOT / "registry" / f"{dotted}.yaml", "--json").json()["id"] == dotted
    # a file in another folder is checked in that folder, with that folder's repository as root
    reg = write_registry(tmp_path, "elsewhere.v2", drafter={"path": "drafters/d"})
    r = run_inprocess("registry", "check", reg / "elsewhere.v2.yaml", "--json")
    assert r.code == 1 and "drafter.path drafters/d does not exist" in r.json()["entries"]["elsewhere.v2"]["problems"]
    (tmp_path / "repo" / "drafters" / "d").mkdir(parents=True)
    assert (
        "drafter.path drafters/d does not exist"
        not in run_inprocess("registry", "check", reg / "elsewhere.v2.yaml", "--json").json()["entries"][
            "elsewhere.v2"
        ]["problems"]
    )


def test_verify_takes_another_registry(tmp_path):
    """--registry (and EAGLEZOO_REGISTRY) on verify: paths in the entry are relative to that repository."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "tiny", repo / "examples" / "tiny")
    write_registry(tmp_path, "mine")
    before = tree_digest(repo / "examples")
    r = run_inprocess("verify", "mine", "--registry", repo / "registry", "--max-prompts", "2", "--json")
    assert r.code == 0, r.err
    assert r.json()["drafter"].startswith(str(repo)) and r.json()["thresholds"]["min_acceptance"] == [0.5, 0.3, 0.2]
    env = run_inprocess(
        "verify", "mine", "--max-prompts", "1", "--json", env={"EAGLEZOO_REGISTRY": str(repo / "registry")}
    )
    assert env.code == 0, env.err
    assert tree_digest(repo / "examples") == before


def test_a_malformed_entry_does_not_hide_the_others(tmp_path):
    reg = write_registry(tmp_path, "good", status={"state": "unverified"}, measured=[])
    for folder in ("eagle31-safeai", "target"):
        (tmp_path / "repo" / "examples" / "tiny" / folder).mkdir(parents=True)
        (tmp_path / "repo" / "examples" / "tiny" / folder / "config.json").write_text("{}")  # repo-file evidence
    (tmp_path / "repo" / "examples" / "tiny" / "README.md").write_text("the example")
    (tmp_path / "repo" / "examples" / "tiny" / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    (reg / "broken.yaml").write_text("id: broken\ndrafter: [unclosed\n")
    (reg / "latin1.yaml").write_bytes("id: caf\xe9\n".encode("latin-1"))
    r = run_inprocess("registry", "list", "--registry", reg, "--json")
    shipped = {p.stem for p in (ROOT / "registry").glob("*.yaml")}  # the user's registry lies over the shipped one
    assert r.code == 0 and [e["id"] for e in r.json() if e["id"] not in shipped] == ["good"]
    assert "broken.yaml" in r.err and "latin1.yaml" in r.err
    assert run_inprocess("registry", "show", "good", "--registry", reg).code == 0
    assert_clean_failure(run_inprocess("registry", "show", "broken", "--registry", reg), None, contains="broken.yaml:")
    checked = run_inprocess("registry", "check", "--registry", reg, "--json")
    assert checked.code == 1 and checked.json()["failed"] == 2 and not checked.json()["entries"]["good"]["problems"]
