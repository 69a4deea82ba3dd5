"""`registry update` against the local Hub server (tests/support/fakehub.py) holding the registry as a dataset:
a good snapshot is fetched, pinned at its commit and read from then on; a snapshot with a malformed entry, or a
Hub that cannot be reached, is one line and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, assert_clean_failure, hubcli, run_cli, tree_digest
from support.net import free_port

LEFT_OUT = "yuhuili-eagle3-vicuna1.3-13b"  # absent from the snapshot: a listing without it read the snapshot


def repository_registry(leave_out: str = LEFT_OUT) -> dict[str, bytes]:
    files = {f"registry/{p.name}": p.read_bytes() for p in (ROOT / "registry").glob("*.yaml") if p.stem != leave_out}
    files |= {f"registry/reports/{p.name}": p.read_bytes() for p in (ROOT / "registry" / "reports").glob("*.json")}
    return files


@pytest.fixture
def dataset(hub, request) -> str:
    """A dataset of this test's own, seeded with the repository's registry less one entry."""
    name = f"tester/zoo-{request.node.name.removeprefix('test_')[:60]}"
    hub[0].commit(f"datasets/{name}", repository_registry())
    return name


def commit(hub, dataset: str, files: dict[str, bytes]) -> str:
    return hub[0].commit(f"datasets/{dataset}", files)


def update(hub, dataset: str, cache: Path, *args):
    return hubcli(hub, "registry", "update", "--repo", dataset, *args, EAGLEZOO_CACHE=str(cache))


def listed_ids(hub, cache: Path) -> set[str]:
    r = hubcli(hub, "registry", "list", "--json", EAGLEZOO_CACHE=str(cache))
    assert r.code == 0, r.err
    return {e["id"] for e in r.json()}


def test_a_good_snapshot_is_fetched_pinned_and_read_from_then_on(hub, dataset, tmp_path):
    cache = tmp_path / "cache"
    seeded = hub[0].repos[f"datasets/{dataset}"].branches["main"]
    assert LEFT_OUT in listed_ids(hub, cache)  # no snapshot yet: the checkout's registry
    r = update(hub, dataset, cache, "--json")
    assert r.code == 0, r.err
    got = r.json()
    assert got["commit"] == seeded and got["revision"] == "main" and got["repo"] == dataset
    recorded = json.loads((cache / "registry-snapshot" / "snapshot.json").read_text())
    assert recorded["commit"] == seeded
    assert LEFT_OUT not in listed_ids(hub, cache)
    version = hubcli(hub, "--version", EAGLEZOO_CACHE=str(cache)).out
    assert f"updated from the Hub dataset {dataset} at revision {seeded[:12]}" in version, version
    report = hubcli(hub, "registry", "check", "tiny-example-eagle3", "--json", EAGLEZOO_CACHE=str(cache))
    assert report.code == 0, report.out  # its saved report came with it; examples/ is repository-only there


def test_the_revision_asked_for_is_the_commit_read(hub, dataset, tmp_path):
    cache = tmp_path / "cache"
    first = hub[0].repos[f"datasets/{dataset}"].branches["main"]
    later = commit(hub, dataset, repository_registry(leave_out=""))  # the left-out entry back
    assert update(hub, dataset, cache, "--revision", first).code == 0
    assert LEFT_OUT not in listed_ids(hub, cache)
    r = update(hub, dataset, cache, "--json")
    assert r.code == 0 and r.json()["commit"] == later, r.err
    assert LEFT_OUT in listed_ids(hub, cache)


def test_a_snapshot_with_a_malformed_entry_changes_nothing(hub, dataset, tmp_path):
    cache = tmp_path / "cache"
    assert update(hub, dataset, cache).code == 0
    before = tree_digest(cache)
    commit(hub, dataset, {"registry/tiny-example-eagle3.yaml": b"id: tiny-example-eagle3\ndrafter: [unclosed\n"})
    r = update(hub, dataset, cache)
    assert_clean_failure(r, contains="tiny-example-eagle3")
    assert "unchanged" in r.err
    assert tree_digest(cache) == before
    assert LEFT_OUT not in listed_ids(hub, cache)  # still the snapshot read before


def test_an_entry_that_fails_registry_check_changes_nothing(hub, dataset, tmp_path):
    cache = tmp_path / "cache"
    text = (ROOT / "registry" / "tiny-example-eagle3.yaml").read_text()
    inconsistent = text.replace('eagle_version: "3"', 'eagle_version: "3.1"')
    assert inconsistent != text
    commit(hub, dataset, {"registry/tiny-example-eagle3.yaml": inconsistent.encode()})
    assert_clean_failure(update(hub, dataset, cache), contains="fails registry check")
    assert not (cache / "registry-snapshot").exists()


def test_an_unreachable_hub_is_one_line_and_changes_nothing(tmp_path):
    cache = tmp_path / "cache"
    env = {"HF_ENDPOINT": f"http://127.0.0.1:{free_port()}", "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf"),
           "EAGLEZOO_HUB_DEADLINE": "3", "EAGLEZOO_CACHE": str(cache)}
    r = run_cli("registry", "update", "--repo", "tester/zoo", env=env, timeout=120)
    assert_clean_failure(r, contains="could not be reached")
    assert not (cache / "registry-snapshot").exists()
