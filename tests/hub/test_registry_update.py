"""`registry update` against the local Hub server (tests/support/fakehub.py) holding the registry as a dataset:
a good snapshot is fetched, pinned at its commit and read from then on; a snapshot with a malformed entry, or a
Hub that cannot be reached, is one line and changes nothing."""

from __future__ import annotations

import hashlib
import json
import re
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
    test = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name.removeprefix("test_"))
    name = f"tester/zoo-{test[:50]}-{hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]}"  # one per test
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
    env = {
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "HF_HUB_OFFLINE": "0",
        "HF_HOME": str(tmp_path / "hf"),
        "EAGLEZOO_HUB_DEADLINE": "3",
        "EAGLEZOO_CACHE": str(cache),
    }
    r = run_cli("registry", "update", "--repo", "tester/zoo", env=env, timeout=120)
    assert_clean_failure(r, contains="could not be reached")
    assert not (cache / "registry-snapshot").exists()


# --------------------------------------------------------------------------------------------
# a snapshot is trusted no further than `registry check` and `registry record` trust a registry (issue 45)

TINY = "tiny-example-eagle3"  # verified by its kept report (registry/reports/tiny-example-eagle3.k3.t0.native.json)
PUBLISHED = "angelslim-qwen3-8b-eagle3"  # unverified, no floors, a Hub drafter and target
TINY_REPORT = f"registry/reports/{TINY}.k3.t0.native.json"


def entry_text(entry_id: str) -> str:
    return (ROOT / "registry" / f"{entry_id}.yaml").read_text()


def updated(hub, dataset: str, cache: Path) -> str:
    """A good snapshot read first; the digest of the copy, which a refused update leaves exactly as it was."""
    assert update(hub, dataset, cache).code == 0
    return tree_digest(cache)


def assert_refused_and_unchanged(r, cache: Path, before: str, contains: str) -> None:
    assert_clean_failure(r, contains=contains)
    assert "internal error" not in r.err
    assert tree_digest(cache) == before


def test_an_entry_verified_by_a_report_of_another_drafter_and_target_is_refused(hub, dataset, tmp_path):
    """What `registry record` refuses: the tiny example's report, renamed to name the published entry."""
    cache = tmp_path / "cache"
    before = updated(hub, dataset, cache)
    commit(hub, dataset, forged_verified())
    r = update(hub, dataset, cache)
    assert_refused_and_unchanged(r, cache, before, f"entry {PUBLISHED}: fails registry check")
    assert "the report measured drafter" in r.err


FABRICATED_ROW = """- k: 5
  temperature: 0.0
  engine: native
  engine_version: null
  hardware: cpu float32
  acceptance_per_position: [0.9, 0.9, 0.9, 0.9, 0.9]
  mean_acceptance_length: 5.5
  num_drafts: 5000
  passed: null
  date: 2026-11-23
  eaglezoo_version: 0.1.0
  report: examples/tiny/k5.json
  conditions: {k: 5, k_spelling: unknown, drafting: chain, temperature: 0.0, top_p: unknown, dataset: unknown,
    dataset_size: unknown, max_new_tokens: unknown, engine: native, engine_version: unknown, thinking: unknown,
    prompt_format: unknown, source: examples/tiny/k5.json}
"""
FIGURES = {  # TINY's text changed: old -> new, and the start of the line that refuses it
    "mean_acceptance_length": (
        "mean_acceptance_length: 2.2333010648596323",
        "mean_acceptance_length: 3.9",
        f"measured.0: mean_acceptance_length not what its report {TINY_REPORT} measured",
    ),
    "num_drafts": ("num_drafts: 1033", "num_drafts: 99999", "measured.0: num_drafts not what its report"),
    "acceptance_per_position": (
        "[0.5992255566311714, 0.37850919651500486, 0.25556631171345595]",
        "[0.9, 0.8, 0.7]",
        "measured.0: acceptance_per_position not what its report",
    ),
    "a-row-whose-report-is-not-there": (
        "evidence:\n",
        FABRICATED_ROW + "evidence:\n",
        "measured.1.report examples/tiny/k5.json does not exist",
    ),
}


@pytest.mark.parametrize("case", FIGURES)
def test_measured_figures_that_are_not_those_of_their_report_are_refused(hub, dataset, tmp_path, case):
    old, new, problem = FIGURES[case]
    cache = tmp_path / "cache"
    before = updated(hub, dataset, cache)
    text = entry_text(TINY)
    assert text.count(old) == 1
    commit(hub, dataset, {f"registry/{TINY}.yaml": text.replace(old, new).encode()})
    r = update(hub, dataset, cache)
    assert_refused_and_unchanged(r, cache, before, f"entry {TINY}: fails registry check: {problem}")


ESCAPING = "../../../../etc"


def test_a_drafter_path_that_leaves_the_registry_is_refused(hub, dataset, tmp_path):
    cache = tmp_path / "cache"
    before = updated(hub, dataset, cache)
    text = entry_text(TINY).replace("path: examples/tiny/eagle3-safeai", f"path: {ESCAPING}", 1)
    commit(hub, dataset, {f"registry/{TINY}.yaml": text.encode()})
    r = update(hub, dataset, cache)
    assert_refused_and_unchanged(r, cache, before, f"drafter.path '{ESCAPING}' leaves the snapshot: refused")


def forged_verified() -> dict[str, bytes]:
    """The published entry marked verified by the tiny example's report, renamed to name it (what record refuses)."""
    report = json.loads((ROOT / TINY_REPORT).read_text()) | {"registry_id": PUBLISHED}
    kept = f"registry/reports/{PUBLISHED}.k3.t0.native.json"
    row = entry_text(TINY).split("measured:\n", 1)[1].split("evidence:\n", 1)[0].replace(TINY_REPORT, kept)
    forged = entry_text(PUBLISHED).replace(
        "status:\n  state: unverified\n",
        f"status:\n  state: verified\n  date: 2026-11-23\n  eaglezoo_version: 0.1.0\n  report: {kept}\n",
    )
    return {f"registry/{PUBLISHED}.yaml": (forged + f"measured:\n{row}").encode(), kept: json.dumps(report).encode()}


CHECKED_COPIES = {
    "a-path-that-leaves-it": (
        TINY,
        {
            f"registry/{TINY}.yaml": entry_text(TINY)
            .replace("path: examples/tiny/eagle3-safeai", f"path: {ESCAPING}", 1)
            .encode()
        },
        f"drafter.path '{ESCAPING}' leaves",
    ),
    "a-figure-its-report-did-not-measure": (
        TINY,
        {f"registry/{TINY}.yaml": entry_text(TINY).replace("num_drafts: 1033", "num_drafts: 1034").encode()},
        "measured.0: num_drafts not what its report",
    ),
    "verified-by-another-pairs-report": (PUBLISHED, forged_verified(), "measured.0: the report measured drafter"),
    "a-row-twice": (
        TINY,
        {
            f"registry/{TINY}.yaml": entry_text(TINY)
            .replace(
                "evidence:\n", entry_text(TINY).split("measured:\n", 1)[1].split("evidence:\n", 1)[0] + "evidence:\n"
            )
            .encode()
        },
        "measured: two rows for the same K",
    ),
}


@pytest.mark.parametrize("case", CHECKED_COPIES)
def test_registry_check_of_the_updated_copy_fails_what_update_refuses(tmp_path, case):
    """A copy in the cache (as yesterday's eaglezoo left an update): `registry check` reads it and says why."""
    entry_id, changed, problem = CHECKED_COPIES[case]
    cache = tmp_path / "cache"
    home = cache / "registry-snapshot"
    for name, data in (repository_registry() | changed).items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_bytes(data)
    (home / "snapshot.json").write_text(
        json.dumps(
            {"repo": "tester/zoo", "revision": "main", "commit": "a" * 40, "fetched": "2026-11-28T00:00:00+00:00"}
        )
    )
    r = run_cli("registry", "check", entry_id, "--json", env={"EAGLEZOO_CACHE": str(cache)})
    assert r.code == 1, (r.out, r.err)
    problems = r.json()["entries"][entry_id]["problems"]
    assert any(p.startswith(problem) for p in problems), problems


def huge(size: int) -> bytes:
    return b"{" + b" " * (size - 2) + b"}"  # JSON, so that only its size is wrong


@pytest.mark.parametrize(
    "files,contains",
    [
        (
            {"registry/reports/huge.json": huge(8 * 2**20 + 1)},
            f"registry/reports/huge.json holds {8 * 2**20 + 1} bytes",
        ),
        ({f"registry/reports/big{i}.json": huge(8 * 2**20) for i in range(8)}, "more than 67108864: refused"),
        ({f"registry/reports/r{i}.json": b"{}" for i in range(10_000)}, "more than 10000: refused"),
    ],
    ids=["a-file-over-the-bound", "files-over-the-total", "too-many-files"],
)
def test_a_snapshot_over_the_bounds_is_refused_before_it_is_read(hub, dataset, tmp_path, files, contains):
    cache = tmp_path / "cache"
    before = updated(hub, dataset, cache)
    commit(hub, dataset, files)
    hub[0].requests.clear()
    r = update(hub, dataset, cache)
    assert_refused_and_unchanged(r, cache, before, contains)
    assert not any("/resolve/" in path for _, path in hub[0].requests)  # refused from the listing: nothing fetched


def test_a_hub_that_sends_more_than_the_bound_is_cut_off(hub, dataset, tmp_path):
    """The listing says 2 bytes; the file served is past the whole snapshot's bound: the download stops there."""
    cache = tmp_path / "cache"
    before = updated(hub, dataset, cache)
    commit(hub, dataset, {"registry/reports/small.json": b"{}"})
    blob = hub[0].repos[f"datasets/{dataset}"].commits[hub[0].repos[f"datasets/{dataset}"].branches["main"]]
    hub[0].blobs[blob["files"]["registry/reports/small.json"]["oid"]] = huge(64 * 2**20 + 2**20)
    r = update(hub, dataset, cache)
    assert_refused_and_unchanged(r, cache, before, "the Hub sent more than 67108864 bytes")


@pytest.mark.parametrize("claimed", ["main", None, "abc"], ids=["a-branch", "none", "not-a-sha"])
def test_a_commit_that_is_not_a_sha_is_refused_never_recorded(hub, dataset, tmp_path, claimed):
    cache = tmp_path / "cache"
    before = updated(hub, dataset, cache)
    hub[0].info_sha[f"datasets/{dataset}"] = claimed
    r = update(hub, dataset, cache)
    assert_refused_and_unchanged(r, cache, before, f"the Hub answered commit {claimed!r}, not the 40-hex commit sha")
    assert json.loads((cache / "registry-snapshot" / "snapshot.json").read_text())["commit"] != claimed


def test_a_file_that_changes_while_it_is_read_is_refused(hub, dataset, tmp_path):
    """The bytes served are not those the commit lists (their size and blob id): another file than the commit's."""
    cache = tmp_path / "cache"
    before = updated(hub, dataset, cache)
    repo = hub[0].repos[f"datasets/{dataset}"]
    oid = repo.commits[repo.branches["main"]]["files"][f"registry/{TINY}.yaml"]["oid"]
    hub[0].blobs[oid] = (entry_text(TINY) + "# another text, the same entry\n").encode()
    r = update(hub, dataset, cache)
    assert_refused_and_unchanged(r, cache, before, f"registry/{TINY}.yaml is not the file commit")
    assert "changed while it was read" in r.err


def test_a_listing_that_changes_while_it_is_read_is_not_read_again(hub, dataset, tmp_path):
    """The Hub's tree for the commit lists a name its first answer did not (one that leaves the folder): the
    update downloads what the first listing named, checked by size and blob id, and nothing else."""
    cache = tmp_path / "cache"
    hub[0].tree_extra[f"datasets/{dataset}"] = ["registry/../../escaped.yaml"]
    r = update(hub, dataset, cache, "--json")
    assert r.code == 0, r.err
    assert r.json()["commit"] == hub[0].repos[f"datasets/{dataset}"].branches["main"]
    assert not (tmp_path / "escaped.yaml").exists() and not list(tmp_path.rglob("escaped.yaml"))
