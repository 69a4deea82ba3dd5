"""Inputs through the Hub: a sharded drafter in the Hub cache's snapshot layout (every file a symlink to its blob)
converts and lints, and a remote lint against a server that never answers times out in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import assert_clean_failure, hubcli
from support.factory import make_drafter, make_spec


@pytest.fixture(scope="module")
def cached_sharded(hub, tmp_path_factory) -> tuple[str, Path]:
    """A sharded speculators drafter on the local Hub, pulled into the Hub cache (symlinked snapshot)."""
    work = tmp_path_factory.mktemp("sharded")
    src = make_drafter(work / "src", "speculators", spec=make_spec(), file="sharded")
    hub[0].commit("tester/sharded", {p.name: p.read_bytes() for p in sorted(src.iterdir())})
    r = hubcli(hub, "pull", "tester/sharded", "--json")
    assert r.code == 0, r.err
    return "tester/sharded", Path(r.json()["path"])


def test_sharded_drafter_in_the_hub_cache_converts_and_lints(hub, cached_sharded, tmp_path):
    repo, snapshot = cached_sharded
    shards = sorted(snapshot.glob("model-*.safetensors"))
    assert len(shards) == 2 and all(s.is_symlink() and "blobs" in os.readlink(s) for s in shards)
    lint = hubcli(hub, "lint", snapshot, "--json")
    assert lint.code in (0, 1) and lint.json()["dialect"] == "speculators", lint.err
    assert not [f for f in lint.json()["findings"] if f["code"] in ("unreadable", "shard-missing")]
    for source, out in ((snapshot, tmp_path / "from-snapshot"), (repo, tmp_path / "from-repo")):
        converted = hubcli(hub, "convert", source, out)
        assert converted.code == 0, converted.err
        assert (out / "model.safetensors").is_file()
    assert (tmp_path / "from-snapshot" / "model.safetensors").read_bytes() == (
        tmp_path / "from-repo" / "model.safetensors"
    ).read_bytes()


def test_remote_lint_against_a_server_that_never_answers_times_out(hub):
    import socket
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    threading.Thread(target=lambda: [listener.accept() for _ in range(16)], daemon=True).start()
    start = time.time()
    r = hubcli(
        hub,
        "lint",
        "tester/anything",
        HF_ENDPOINT=f"http://127.0.0.1:{listener.getsockname()[1]}",
        EAGLEZOO_HUB_TIMEOUT="1",
    )
    assert_clean_failure(r, contains="could not be reached")
    assert time.time() - start < 120
    listener.close()
