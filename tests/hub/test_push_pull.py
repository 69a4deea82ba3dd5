"""Hub pull/push through the real huggingface_hub client against a local Hub-compatible server
(tests/support/fakehub.py on 127.0.0.1, its "CDN" on localhost). The CLI runs in the test's process (`conftest.hubcli`:
the client's settings read again for each run)."""

from __future__ import annotations

import json
import socket
import threading

import pytest
import yaml
from conftest import ROOT, hubcli, run_cli, with_evidence
from support.factory import make_drafter, make_spec
from support.publish import publish_folder


@pytest.fixture(scope="module")
def big_drafter(tmp_path_factory):
    """A converted drafter whose model.safetensors is over 10 MB (the LFS path)."""
    work = tmp_path_factory.mktemp("big")
    spec = make_spec(hidden=512, target_hidden=512, vocab=16384, draft_vocab=8192, fc_norm=True, norm_output=True)
    spec.layer_config["intermediate_size"] = 1024
    src = make_drafter(work / "src", "specforge", spec=spec)
    r = run_cli("convert", src, work / "out", "--flag", "norm_output=true")
    assert r.code == 0, r.err
    assert (work / "out" / "model.safetensors").stat().st_size > 10 * 1024 * 1024
    return work / "out"


def floor(per_position, k=3, temperature=0.0):
    return {"k": k, "temperature": temperature, "per_position": per_position, "source": "tests"}


def commits(hub, repo, branch="main"):
    r = hub[0].repos[repo]
    n, sha = 0, r.branches[branch]
    while sha:
        n, sha = n + 1, r.commits[sha]["parent"]
    return n


def test_push_lfs_card_tag_and_no_op_repush(hub, big_drafter, tmp_path):
    report = ROOT / "registry" / "reports" / "tiny-example-eagle31.k3.t0.native.json"  # as verify wrote it
    r = hubcli(
        hub,
        "push",
        big_drafter,
        "tester/big-eagle31",
        "--target",
        "org/target-model",
        "--report",
        report,
        "--tag",
        "v1.0",
        "--json",
    )
    assert r.code == 0, r.err
    pushed = r.json()
    assert pushed["created_commit"] and {"config.json", "model.safetensors", "conversion.json", "README.md"} <= {
        f["path"] for f in pushed["files"]
    }
    assert any(path.endswith(".git/info/lfs/objects/batch") for _, path in hub[0].requests)
    assert any(m == "PUT" and p.startswith("/upload/") for m, p in hub[0].requests)
    repo = hub[0].repos["tester/big-eagle31"]
    assert repo.tags["v1.0"] == pushed["commit"]
    card = hub[0].blobs[repo.files(pushed["commit"])["README.md"]["oid"]].decode()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["base_model"] == "org/target-model" and "eagle3.1" in meta["tags"]
    assert "boundary [1, 2, 3]" in card and "layer-output [0, 1, 2]" in card
    assert "vllm serve org/target-model" in card and "sglang.launch_server" in card
    assert "| 1 | 0.596 |" in card and "Mean acceptance length 2.247" in card
    assert "Converted by eaglezoo" in card and "specforge" in card
    assert "![acceptance by draft position](acceptance.svg)" in card  # the figure, pushed beside the card
    figure = hub[0].blobs[repo.files(pushed["commit"])["acceptance.svg"]["oid"]].decode()
    assert figure.startswith("<svg") and figure.count("<path") > 5
    before = commits(hub, "tester/big-eagle31")
    again = hubcli(
        hub, "push", big_drafter, "tester/big-eagle31", "--target", "org/target-model", "--report", report, "--json"
    )
    assert again.code == 0 and again.json()["created_commit"] is False
    assert commits(hub, "tester/big-eagle31") == before


def test_pull_by_branch_tag_and_sha_with_hash_checks(hub, big_drafter, tmp_path):
    assert hubcli(hub, "push", big_drafter, "tester/pull-me", "--tag", "v1").code == 0
    assert hubcli(hub, "push", big_drafter, "tester/pull-me", "--revision", "dev").code == 0
    sha = hub[0].repos["tester/pull-me"].branches["main"]
    for rev in ("main", "v1", sha, "dev"):
        r = hubcli(hub, "pull", "tester/pull-me", "--revision", rev, "--json")
        assert r.code == 0, r.err
        got = r.json()
        assert set(got["sha256_verified"]) == {"config.json", "model.safetensors"}
        assert got["commit"] == hub[0].repos["tester/pull-me"].resolve(rev)
    local = tmp_path / "copy"
    r = hubcli(hub, "pull", "tester/pull-me", "--local-dir", local, "--json")
    assert r.code == 0 and (local / "model.safetensors").is_file()


def test_offline_pull_from_cache_gives_the_same_path(hub, big_drafter):
    assert hubcli(hub, "push", big_drafter, "tester/offline").code == 0
    online = hubcli(hub, "pull", "tester/offline", "--json")
    assert online.code == 0, online.err
    offline = hubcli(hub, "pull", "tester/offline", "--json", HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9")
    assert offline.code == 0, offline.err
    assert offline.json()["path"] == online.json()["path"]
    missing = hubcli(hub, "pull", "tester/never-pulled", HF_HUB_OFFLINE="1")
    assert missing.code == 2 and "offline" in missing.err


def test_create_pr(hub, big_drafter):
    assert hubcli(hub, "push", big_drafter, "tester/pr-repo").code == 0
    head = hub[0].repos["tester/pr-repo"].branches["main"]
    other = big_drafter.parent / "changed"
    import shutil

    shutil.copytree(big_drafter, other, dirs_exist_ok=True)
    (other / "notes.txt").write_text("tuned")
    r = hubcli(hub, "push", other, "tester/pr-repo", "--create-pr", "--json")
    assert r.code == 0, r.err
    assert r.json()["pull_request"] and hub[0].repos["tester/pr-repo"].branches["main"] == head


def one_line_error(r, text):
    assert r.code == 2, (r.code, r.out, r.err)
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], r.err


def test_hub_errors_are_clear(hub, big_drafter):
    assert hubcli(hub, "push", big_drafter, "tester/errors").code == 0
    one_line_error(hubcli(hub, "pull", "tester/no-such-repo"), "repository not found")
    one_line_error(hubcli(hub, "pull", "tester/errors", "--revision", "nope"), "revision not found")
    one_line_error(hubcli(hub, "lint", "tester/errors", "--target", "tester/errors-target"), "repository not found")
    hub[0].repos.setdefault("tester/no-config", type(hub[0].repos["tester/errors"])(False))
    one_line_error(hubcli(hub, "lint", "tester/errors", "--target", "tester/no-config"), "not found")
    secret = "hf_this_is_a_secret_token"
    r = hubcli(hub, "pull", "tester/errors", HF_TOKEN=secret)
    one_line_error(r, "401")
    assert secret not in r.err + r.out
    r = hubcli(hub, "push", big_drafter, "tester/errors", HF_TOKEN=secret)
    one_line_error(r, "401")
    assert secret not in r.err + r.out


def test_network_down_retries_then_fails(hub):
    """Every connection drops before an answer: the client tries again (each try a connection counted here) before
    the one line. (A port nothing listens on, where tries cannot be counted: tests/hub/test_registry_update.py.)"""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        accepted = []

        def drop_each():
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:  # the socket closed: the test is over
                    return
                accepted.append(conn)
                conn.close()

        threading.Thread(target=drop_each, daemon=True).start()
        r = hubcli(hub, "pull", "tester/anything", HF_ENDPOINT=f"http://127.0.0.1:{server.getsockname()[1]}")
    one_line_error(r, "could not be reached")
    assert len(accepted) > 1, "no retry"


def test_transient_server_errors_are_retried(hub, big_drafter):
    assert hubcli(hub, "push", big_drafter, "tester/flaky").code == 0
    hub[0].fail_next = 2
    before = len(hub[0].requests)
    r = hubcli(hub, "pull", "tester/flaky")
    assert r.code == 0, r.err
    assert hub[0].fail_next == 0
    first, second, third = hub[0].requests[before : before + 3]
    assert first == second == third, "the request answered 503 is sent again until it succeeds"


def test_remote_names_escaping_the_directory_are_refused(hub, big_drafter, tmp_path):
    assert hubcli(hub, "push", big_drafter, "tester/evil").code == 0
    hub[0].extra_siblings["tester/evil"] = ["../../escape.txt"]
    one_line_error(hubcli(hub, "pull", "tester/evil", "--local-dir", tmp_path / "d"), "escapes")
    assert not (tmp_path / "escape.txt").exists()


def test_registry_ids_pin_revisions_and_check_hashes(hub, big_drafter, tmp_path):
    assert hubcli(hub, "push", big_drafter, "tester/registered").code == 0
    sha = hub[0].repos["tester/registered"].branches["main"]
    import shutil

    moved = shutil.copytree(big_drafter, tmp_path / "moved")
    (moved / "notes.txt").write_text("a later commit")
    assert hubcli(hub, "push", moved, "tester/registered").code == 0  # main moves on
    reg = tmp_path / "registry"
    reg.mkdir()
    record = json.loads((big_drafter / "conversion.json").read_text())
    entry = {
        "id": "tiny-registered",
        "drafter": {"repo": "tester/registered", "revision": sha},
        "target": {"repo": "org/target-model"},
        "publisher": "tests",
        "dialect": "eagle31",
        "eagle_version": "3.1",
        "flags": {"fc_norm": True, "norm_output": True},
        "draft_vocab_size": 8192,
        "target_vocab_size": 16384,
        "aux_layers": {"ids": [1, 2, 3], "convention": "boundary"},
        "files": {"model.safetensors": record["output"]["model.safetensors"]},
        "sources": ["tests"],
        "null_reasons": {"hardware": "a test", "acceptance_floors": "a test"},
    }
    (reg / "tiny-registered.yaml").write_text(yaml.safe_dump(with_evidence(entry)))
    r = hubcli(hub, "pull", "tiny-registered", "--json", EAGLEZOO_REGISTRY=str(reg))
    assert r.code == 0, r.err
    assert r.json()["commit"] == sha and set(r.json()["sha256_verified"]) == {"model.safetensors"}
    publish_target_config(hub, "org/target-model", {"num_hidden_layers": 4, "hidden_size": 512, "vocab_size": 16384})
    online = hubcli(hub, "registry", "check", "--online", "--json", EAGLEZOO_REGISTRY=str(reg))
    assert online.code == 0, online.out + online.err
    entry["files"]["model.safetensors"] = "0" * 64
    entry["draft_vocab_size"] = 4096
    (reg / "tiny-registered.yaml").write_text(yaml.safe_dump(with_evidence(entry)))
    one_line_error(hubcli(hub, "pull", "tiny-registered", EAGLEZOO_REGISTRY=str(reg)), "sha256 mismatch")
    online = hubcli(hub, "registry", "check", "--online", "--json", EAGLEZOO_REGISTRY=str(reg))
    assert online.code == 1
    assert any("draft_vocab_size=4096" in p for p in online.json()["entries"]["tiny-registered"]["problems"])


def publish_target_config(hub, repo: str, cfg: dict) -> None:
    import os
    import subprocess
    import sys

    code = (
        "import json, sys; from huggingface_hub import HfApi; api = HfApi(); "
        "api.create_repo(sys.argv[1], exist_ok=True); "
        "api.upload_file(path_or_fileobj=sys.argv[2].encode(), path_in_repo='config.json', repo_id=sys.argv[1])"
    )
    subprocess.run(
        [sys.executable, "-c", code, repo, json.dumps(cfg)],
        check=True,
        env={**os.environ, **hub[1]},
        capture_output=True,
    )


def test_remote_lint_downloads_under_one_percent(hub, big_drafter):
    assert hubcli(hub, "push", big_drafter, "tester/remote-lint").code == 0
    r = hubcli(hub, "lint", "tester/remote-lint", "--json")
    assert r.code == 0, r.err
    report = r.json()
    assert report["dialect"] == "eagle31" and report["weights_bytes"] > 10 * 1024 * 1024
    assert report["bytes_read"] < 0.01 * report["weights_bytes"]
    assert "values-skipped" in {f["code"] for f in report["findings"]}


def test_convert_and_verify_accept_hub_ids(hub, big_drafter, tmp_path):
    assert hubcli(hub, "push", big_drafter, "tester/convert-me").code == 0
    r = hubcli(hub, "convert", "tester/convert-me", tmp_path / "out", "--to", "speculators", "--json")
    assert r.code == 0, r.err
    assert (tmp_path / "out" / "config.json").is_file()


def test_gpu_workflow_command_verifies_a_registry_entry(hub, tmp_path):
    """`eaglezoo verify ID --report` (the gpu-verify workflow's step) on a published example pair."""
    from conftest import EXAMPLE, EXAMPLE_IDS

    converted = tmp_path / "eagle31"
    r = run_cli("convert", EXAMPLE / "eagle31-safeai", converted, "--target", EXAMPLE / "target", *EXAMPLE_IDS)
    assert r.code == 0, r.err
    assert hubcli(hub, "push", converted, "tester/tiny-eagle31").code == 0
    target_sha = publish_folder(hub, "tester/tiny-target", EXAMPLE / "target")
    drafter_sha = hub[0].repos["tester/tiny-eagle31"].branches["main"]
    reg = tmp_path / "registry"
    reg.mkdir()
    entry = {
        "id": "tiny-example",
        "drafter": {"repo": "tester/tiny-eagle31", "revision": drafter_sha},
        "target": {"repo": "tester/tiny-target", "revision": target_sha},
        "publisher": "tests",
        "dialect": "eagle31",
        "eagle_version": "3.1",
        "flags": {"fc_norm": True, "norm_output": True},
        "acceptance_floors": [floor([0.2, 0.05, 0.0])],
        "sources": ["tests"],
        "null_reasons": {"hardware": "a CPU test"},
    }
    (reg / "tiny-example.yaml").write_text(yaml.safe_dump(with_evidence(entry)))
    report = tmp_path / "reports" / "tiny-example.json"
    report.parent.mkdir()
    r = hubcli(
        hub,
        "verify",
        "tiny-example",
        "--device",
        "cpu",
        "--report",
        report,
        "--max-new-tokens",
        "8",
        EAGLEZOO_REGISTRY=str(reg),
    )  # every prompt of the set the floors hold for: they gate
    assert r.code == 0, r.out + r.err
    data = json.loads(report.read_text())
    assert data["thresholds"]["min_acceptance"] == [0.2, 0.05, 0.0] and data["num_drafts"] > 0
    assert data["registry_id"] == "tiny-example" and data["drafter_revision"] == drafter_sha
    entry["acceptance_floors"] = [floor([0.99, 0.99, 0.99])]
    (reg / "tiny-example.yaml").write_text(yaml.safe_dump(with_evidence(entry)))
    r = hubcli(
        hub,
        "verify",
        "tiny-example",
        "--device",
        "cpu",
        "--report",
        report,
        "--max-new-tokens",
        "8",
        EAGLEZOO_REGISTRY=str(reg),
    )  # every prompt of the set the floors hold for: they gate
    assert r.code == 1 and "FAIL" in r.out
