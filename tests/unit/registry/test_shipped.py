"""Which registry copy is read (updated snapshot, shipped, checkout) and the user's folder laid over it."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import ROOT

from eaglezoo.errors import BadInput
from eaglezoo.registry import load as registry
from eaglezoo.registry import shipped
from eaglezoo.registry.check import check_all

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLEZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EAGLEZOO_REGISTRY", raising=False)
    return tmp_path / "cache"


def snapshot(cache, leave_out: str = "") -> None:
    home = cache / "registry-snapshot"
    shutil.copytree(ROOT / "registry", home / "registry", ignore=shutil.ignore_patterns(f"{leave_out}.yaml"))
    (home / "snapshot.json").write_text(
        json.dumps({"repo": "org/zoo", "revision": "v2", "commit": COMMIT, "fetched": "2026-11-20T10:00:00+00:00"})
    )


def test_a_checkout_reads_its_own_registry():
    copy = shipped.base_copy()
    assert copy.kind == "checkout" and copy.directory == ROOT / "registry" and copy.repository
    assert registry.load().directory == ROOT / "registry"


def test_an_updated_snapshot_is_read_instead_and_says_where_it_came_from(own_cache):
    snapshot(own_cache, leave_out="yuhuili-eagle3-vicuna1.3-13b")
    copy = shipped.base_copy()
    assert copy.kind == "updated" and not copy.repository
    assert copy.describe() == "updated from the Hub dataset org/zoo at revision 0123456789ab (v2) on 2026-11-20"
    reg = registry.load()
    assert "yuhuili-eagle3-vicuna1.3-13b" not in reg.entries and not reg.repository


def test_entries_naming_repository_folders_check_clean_in_a_copy_without_them(own_cache):
    snapshot(own_cache)
    results = check_all(registry.load(), ["tiny-example-eagle3", "smollm2-135m-instruct-eagle31"])
    assert results == {"tiny-example-eagle3": [], "smollm2-135m-instruct-eagle31": []}


def test_a_saved_report_missing_from_a_copy_is_still_a_problem(own_cache):
    snapshot(own_cache)
    (own_cache / "registry-snapshot" / "registry" / "reports" / "tiny-example-eagle3.k3.t0.native.json").unlink()
    assert check_all(registry.load(), ["tiny-example-eagle3"])["tiny-example-eagle3"]


def test_a_damaged_snapshot_record_is_one_line(own_cache):
    snapshot(own_cache)
    (own_cache / "registry-snapshot" / "snapshot.json").write_text("{")
    with pytest.raises(BadInput, match="not the record `eaglezoo registry update` writes"):
        shipped.base_copy()


def test_the_users_registry_lies_over_the_shipped_one(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    text = (ROOT / "registry" / "tiny-example-eagle3.yaml").read_text()
    (mine / "tiny-example-eagle3.yaml").write_text(text.replace("publisher:", "publisher: me #", 1))
    layered = registry.layered(mine)
    assert layered.overridden == ("tiny-example-eagle3",) and layered.mine == mine
    assert set(layered.entries) == {p.stem for p in (ROOT / "registry").glob("*.yaml")}
    entry, reg = registry.lookup("tiny-example-eagle3", mine)
    assert reg.directory == mine and entry.publisher.startswith("me") and registry.replaces_base(entry.id, reg)
    other, below = registry.lookup("yuhuili-eagle3-vicuna1.3-13b", mine)  # not in mine: the shipped entry
    assert below.directory == ROOT / "registry" and not registry.replaces_base(other.id, below)


def test_the_shipped_folder_named_as_the_users_is_no_overlay():
    assert registry.layered(ROOT / "registry").overridden == ()
