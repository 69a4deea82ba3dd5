"""Publishing safely (issue 13): push uploads exactly the drafter, downloads never trust, every path
read from a file stays inside its root. The CLI runs in the test's process against the local Hub server
(`conftest.hubcli`). (Paths in registry entries: tests/cli/registry/test_registry_paths.py.)"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from conftest import assert_clean_failure, hubcli, run_cli
from support.factory import make_drafter

DRAFTER_FILES = {"config.json", "model.safetensors", "conversion.json", "README.md"}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    work = tmp_path_factory.mktemp("safety")
    src = make_drafter(work / "src", "speculators")
    r = run_cli("convert", src, work / "drafter", "--flag", "norm_before_residual=false")
    assert r.code == 0, r.err
    return work / "drafter"


def fresh_copy(converted, tmp_path, name="d"):
    d = tmp_path / name
    shutil.copytree(converted, d)
    return d


def uploaded(hub, repo):
    r = hub[0].repos[repo]
    return set(r.files(r.branches["main"]))


def test_push_uploads_exactly_the_drafter(hub, converted, tmp_path):
    d = fresh_copy(converted, tmp_path)
    (tmp_path / "secret.txt").write_text("outside")
    (d / ".private").mkdir()
    (d / ".private" / "key.txt").write_text("hidden")
    (d / ".env").write_text("TOKEN=x")
    (d / ".cache" / "huggingface").mkdir(parents=True)
    (d / ".cache" / "huggingface" / "meta").write_text("pull metadata")
    (d / "sub").mkdir()
    (d / "sub" / "notes.txt").write_text("kept")
    os.symlink("sub/notes.txt", d / "alias.txt")  # a symlink that stays inside: uploaded, resolved
    r = hubcli(hub, "push", d, "tester/exact", "--json")
    assert r.code == 0, r.err
    assert uploaded(hub, "tester/exact") == DRAFTER_FILES | {"sub/notes.txt", "alias.txt"}
    assert {f["path"] for f in r.json()["files"]} == uploaded(hub, "tester/exact")
    assert r.err == ""  # no progress bars when stderr is not a terminal


@pytest.mark.parametrize(
    "make_link",
    [
        lambda d, outside: os.symlink(outside, d / "notes.txt"),
        lambda d, outside: os.symlink("../secret.txt", d / "relative.txt"),
        lambda d, outside: os.symlink(outside.parent, d / "linkdir"),
    ],
)
def test_push_refuses_symlinks_that_leave_the_folder_and_uploads_nothing(hub, converted, tmp_path, make_link):
    d = fresh_copy(converted, tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("do not publish")
    make_link(d, secret)
    before = len(hub[0].requests)
    assert_clean_failure(hubcli(hub, "push", d, "tester/leak"), None, contains="symlink")
    assert "tester/leak" not in hub[0].repos and len(hub[0].requests) == before


def test_push_refuses_a_fifo(hub, converted, tmp_path):
    d = fresh_copy(converted, tmp_path)
    os.mkfifo(d / "pipe")
    assert_clean_failure(hubcli(hub, "push", d, "tester/fifo"), None, contains="not a regular file")
    assert hubcli(hub, "push", d, "tester/fifo", "--exclude", "pipe").code == 0


def test_include_exclude_and_dry_run(hub, converted, tmp_path):
    d = fresh_copy(converted, tmp_path)
    (d / "notes.txt").write_text("n")
    (d / ".extra").mkdir()
    (d / ".extra" / "generation_config.json").write_text("{}")
    before = len(hub[0].requests)
    r = hubcli(
        hub,
        "push",
        d,
        "tester/dry",
        "--dry-run",
        "--exclude",
        "notes.txt",
        "--include",
        "*.json",
        "--include",
        "*.safetensors",
        "--include",
        ".extra/*",
        "--json",
    )
    assert r.code == 0, r.err
    files = {f["path"]: f["size"] for f in r.json()["files"]}
    assert set(files) == DRAFTER_FILES | {".extra/generation_config.json"}
    assert files["model.safetensors"] == (d / "model.safetensors").stat().st_size
    assert r.json()["dry_run"] and r.json()["bytes"] == sum(files.values())
    assert len(hub[0].requests) == before and "tester/dry" not in hub[0].repos  # contacted nothing
    text = hubcli(hub, "push", d, "tester/dry", "--dry-run")
    assert "model.safetensors" in text.out and "would be uploaded" in text.out


def test_dry_run_previews_the_model_card_a_push_publishes(hub, converted, tmp_path):
    d = fresh_copy(converted, tmp_path)
    before = len(hub[0].requests)
    preview = hubcli(hub, "push", d, "tester/card", "--target", "org/target", "--dry-run", "--json")
    assert preview.code == 0, preview.err
    assert len(hub[0].requests) == before and "tester/card" not in hub[0].repos  # contacted nothing
    card = preview.json()["card"]
    text = hubcli(hub, "push", d, "tester/card", "--target", "org/target", "--dry-run")
    assert text.code == 0 and "model card it would publish (README.md)" in text.out and card in text.out
    assert hubcli(hub, "push", d, "tester/card", "--target", "org/target").code == 0
    repo = hub[0].repos["tester/card"]
    readme = repo.files(repo.branches["main"])["README.md"]
    assert hub[0].blobs[readme["lfs"] or readme["oid"]].decode() == card  # the preview is what was published


def test_pulled_local_dir_pushes_without_its_cache(hub, converted, tmp_path):
    assert hubcli(hub, "push", converted, "tester/roundtrip").code == 0
    local = tmp_path / "pulled"
    pulled = hubcli(hub, "pull", "tester/roundtrip", "--local-dir", local)
    assert pulled.code == 0 and pulled.err == ""  # no progress bars when stderr is not a terminal
    assert (local / ".cache").is_dir()
    r = hubcli(hub, "push", local, "tester/roundtrip-copy", "--json")
    assert r.code == 0, r.err
    assert uploaded(hub, "tester/roundtrip-copy") == DRAFTER_FILES


def test_conversion_record_has_no_local_paths(hub, converted, tmp_path):
    text = (converted / "conversion.json").read_text()
    assert str(converted.parent) not in text and "/tmp" not in text
    record = json.loads(text)
    assert set(record["source"]) == {"dialect", "files"}
    assert hubcli(hub, "push", converted, "tester/from-hub").code == 0
    sha = hub[0].repos["tester/from-hub"].branches["main"]
    out = tmp_path / "reconverted"
    r = hubcli(hub, "convert", "tester/from-hub", out)
    assert r.code == 0, r.err
    source = json.loads((out / "conversion.json").read_text())["source"]
    assert source["hub"] == f"tester/from-hub@{sha}"
    assert "/" not in "".join(source["files"]) and str(tmp_path) not in (out / "conversion.json").read_text()


def test_push_refuses_an_old_record_with_an_absolute_path(hub, converted, tmp_path):
    d = fresh_copy(converted, tmp_path)
    record = json.loads((d / "conversion.json").read_text())
    record["source"]["path"] = "/home/alice/secret-project/drafter"
    (d / "conversion.json").write_text(json.dumps(record))
    assert_clean_failure(hubcli(hub, "push", d, "tester/abs"), None, contains="absolute local path")


def test_push_report_must_be_a_verify_report(hub, converted, tmp_path):
    assert_clean_failure(
        hubcli(hub, "push", converted, "tester/rep", "--report", tmp_path / "none.json"), None, contains="no such file"
    )
    bad = tmp_path / "list.json"
    bad.write_text("[1, 2]")
    assert_clean_failure(
        hubcli(hub, "push", converted, "tester/rep", "--report", bad), None, contains="not a JSON object"
    )
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"device": "cpu"}))
    assert_clean_failure(hubcli(hub, "push", converted, "tester/rep", "--report", partial), None, contains="dtype")
    assert "tester/rep" not in hub[0].repos


def test_existing_tag_is_refused_before_pushing(hub, converted, tmp_path):
    assert hubcli(hub, "push", converted, "tester/tagged", "--tag", "v1").code == 0
    head = hub[0].repos["tester/tagged"].branches["main"]
    d = fresh_copy(converted, tmp_path)
    (d / "notes.txt").write_text("changed")
    r = hubcli(hub, "push", d, "tester/tagged", "--tag", "v1")
    assert_clean_failure(r, None, contains="tag 'v1' already exists")
    assert hub[0].repos["tester/tagged"].branches["main"] == head  # nothing was pushed


# ------------------------------------------------------------------------------------------------
# pull


def push_with_record(hub, converted, tmp_path, repo, edit):
    d = fresh_copy(converted, tmp_path, repo.split("/")[1])
    record = json.loads((d / "conversion.json").read_text())
    edit(d, record)
    (d / "conversion.json").write_text(json.dumps(record))
    assert hubcli(hub, "push", d, repo).code == 0


def test_pull_refuses_manifest_names_outside_the_download(hub, converted, tmp_path):
    push_with_record(
        hub,
        converted,
        tmp_path,
        "tester/escape",
        lambda d, rec: rec["output"].update({"../../../../etc/hostname": "0" * 64}),
    )
    r = hubcli(hub, "pull", "tester/escape", "--local-dir", tmp_path / "dl")
    assert_clean_failure(r, None, contains="leaves")
    assert not (tmp_path / "dl").exists()
    import hashlib

    hostname = Path("/etc/hostname")
    digest = hashlib.sha256(hostname.read_bytes()).hexdigest() if hostname.exists() else None
    assert digest is None or digest[:8] not in r.err


def test_pull_that_fails_verification_leaves_nothing(hub, converted, tmp_path):
    def tamper(d, record):
        weights = bytearray((d / "model.safetensors").read_bytes())
        weights[-1] ^= 0xFF
        (d / "model.safetensors").write_bytes(bytes(weights))

    push_with_record(hub, converted, tmp_path, "tester/tampered", tamper)
    local = tmp_path / "downloads" / "drafter"
    r = hubcli(hub, "pull", "tester/tampered", "--local-dir", local)
    assert_clean_failure(r, None, contains="sha256 mismatch for model.safetensors")
    expected = json.loads((converted / "conversion.json").read_text())["output"]["model.safetensors"]
    assert expected in r.err  # the full hash, and which file
    assert not local.exists() and not (tmp_path / "downloads").exists()  # not even the parent pull made
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "mine.txt").write_text("keep")
    assert hubcli(hub, "pull", "tester/tampered", "--local-dir", existing).code == 2
    assert os.listdir(existing) == ["mine.txt"]


def test_pull_from_a_server_that_never_answers_times_out(hub, tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []
    threading.Thread(target=lambda: [accepted.append(listener.accept()) for _ in range(16)], daemon=True).start()
    start = time.time()
    r = hubcli(
        hub,
        "pull",
        "tester/anything",
        HF_ENDPOINT=f"http://127.0.0.1:{listener.getsockname()[1]}",
        EAGLEZOO_HUB_TIMEOUT="1",
    )
    assert_clean_failure(r, None, contains="could not be reached")
    assert time.time() - start < 120
    listener.close()
