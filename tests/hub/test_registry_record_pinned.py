"""The zoo's CI commands against forged reports. `registry record` records a report only into the entry whose
drafter, target and pinned revisions it measured (a genuine report of a Hub entry, pulled from the local Hub server,
is edited into each forgery). (`registry plan`, and record of a folder entry: tests/cli/registry/.)"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLE, ROOT, assert_clean_failure, hubcli, tree_digest

ENTRY = "ci-hub-eagle31"  # the example's EAGLE 3.1 drafter, published on the local Hub, pinned to its commit
TARGETED = "ci-hub-target"  # the same drafter, its target a Hub repo pinned to TARGET_SHA
TARGET_REPO, TARGET_SHA = "tester/ci-target", "c" * 40
OTHER_SHA = "b" * 40


def write_entries(root: Path, drafter_sha: str) -> Path:
    """A registry at root/registry holding ENTRY and TARGETED (unverified), the example (its target, prompts and
    the files its evidence cites) under root/examples/tiny as the entries name them."""
    shutil.copytree(EXAMPLE, root / "examples" / "tiny")
    reg = root / "registry"
    reg.mkdir()
    data = yaml.safe_load((ROOT / "registry" / "tiny-example-eagle31.yaml").read_text())
    data.update(
        id=ENTRY,
        drafter={"repo": "tester/ci-eagle31", "revision": drafter_sha},
        status={"state": "unverified"},
        measured=[],
    )
    (reg / f"{ENTRY}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    data.update(id=TARGETED, target={"repo": TARGET_REPO, "revision": TARGET_SHA})
    (reg / f"{TARGETED}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return reg


@pytest.fixture(scope="module")
def genuine(hub, tmp_path_factory) -> tuple[dict, str]:
    """What `eaglezoo verify ENTRY --report` writes for the pinned Hub drafter (its folder in the Hub cache, its
    commit), and that commit."""
    from support.publish import publish_folder

    sha = publish_folder(hub, "tester/ci-eagle31", EXAMPLE / "eagle31-safeai")
    root = tmp_path_factory.mktemp("verified")
    reg = write_entries(root, sha)
    report = root / "report.json"
    r = hubcli(hub, "verify", ENTRY, "--registry", reg, "--report", report)  # as the floors were measured
    assert r.code == 0, r.out + r.err
    data = json.loads(report.read_text())
    assert data["drafter_revision"] == sha and data["registry_id"] == ENTRY, data
    return data, sha


@pytest.fixture
def reg(genuine, tmp_path) -> Path:
    """The entries in a checkout of their own (another root than the one verify ran in, as CI's record job)."""
    return write_entries(tmp_path / "checkout", genuine[1])


def record(hub, reg: Path, tmp_path: Path, data: dict, *args):
    report = tmp_path / "report.json"
    report.write_text(json.dumps(data))
    return hubcli(hub, "registry", "record", report, "--registry", reg, *args)


def kept_and_yaml(reg: Path) -> dict[str, bytes]:
    return {p.relative_to(reg).as_posix(): p.read_bytes() for p in sorted(reg.rglob("*")) if p.is_file()}


def other_snapshot(data: dict, repo: str | None = None, sha: str | None = None) -> str:
    """The genuine report's drafter folder (HF cache .../models--OWNER--NAME/snapshots/SHA), of another repo or
    commit."""
    folder = Path(data["drafter"])
    assert folder.parent.name == "snapshots" and folder.parent.parent.name == "models--tester--ci-eagle31", folder
    name = f"models--{repo.replace('/', '--')}" if repo else folder.parent.parent.name
    return str(folder.parent.parent.parent / name / "snapshots" / (sha or folder.name))


# each forgery: (what changes in the genuine report, what the one error line names)
FORGED = {
    "the issue's report: another drafter and target, no revision": (
        lambda d, sha: {"drafter": "evil/other-drafter", "drafter_revision": None, "target": "evil/other-target"},
        "the report measured drafter evil/other-drafter; ci-hub-eagle31's drafter is tester/ci-eagle31",
    ),
    "another drafter repo, at the pinned revision": (
        lambda d, sha: {"drafter": "evil/other-drafter"},
        "the report measured drafter evil/other-drafter",
    ),
    "another drafter's Hub folder": (
        lambda d, sha: {"drafter": other_snapshot(d, "evil/other-drafter")},
        "models--evil--other-drafter",
    ),
    "the drafter revision missing": (
        lambda d, sha: {"drafter_revision": None},
        (
            "the report measured drafter tester/ci-eagle31 at no stated revision; ci-hub-eagle31 pins drafter "
            "tester/ci-eagle31@SHA"
        ),
    ),
    "another drafter revision": (
        lambda d, sha: {"drafter": other_snapshot(d, sha=OTHER_SHA), "drafter_revision": OTHER_SHA},
        (
            f"the report measured drafter tester/ci-eagle31@{OTHER_SHA}; ci-hub-eagle31 pins drafter "
            "tester/ci-eagle31@SHA"
        ),
    ),
    "a drafter revision its folder does not hold": (
        lambda d, sha: {"drafter_revision": OTHER_SHA},
        f"states drafter_revision {OTHER_SHA}",
    ),
    "another target repo": (
        lambda d, sha: {"target": "evil/other-target"},
        "the report measured target evil/other-target; ci-hub-eagle31's target is examples/tiny/target",
    ),
    "another target folder": (
        lambda d, sha: {"target": str(Path(d["target"]).parent / "other-target")},
        "the report measured target",
    ),
    "another target revision": (
        lambda d, sha: {"registry_id": TARGETED, "target": TARGET_REPO, "target_revision": OTHER_SHA},
        f"ci-hub-target pins target {TARGET_REPO}@{TARGET_SHA}",
    ),
    "the target revision missing": (
        lambda d, sha: {"registry_id": TARGETED, "target": TARGET_REPO},
        (
            f"the report measured target {TARGET_REPO} at no stated revision; ci-hub-target pins target "
            f"{TARGET_REPO}@{TARGET_SHA}"
        ),
    ),
}


@pytest.mark.parametrize("case", FORGED, ids=list(FORGED))
def test_record_refuses_a_report_of_another_drafter_target_or_revision(hub, genuine, reg, tmp_path, case):
    """One line naming what differs, exit 2, and nothing written: not on an unverified entry, nor over a recorded
    one (its YAML and kept report stay byte for byte)."""
    data, sha = genuine
    change, message = FORGED[case]
    forged = {**copy.deepcopy(data), **change(data, sha)}
    message = message.replace("@SHA", f"@{sha}")
    before = tree_digest(reg.parent)
    assert_clean_failure(record(hub, reg, tmp_path, forged), contains=message)
    assert tree_digest(reg.parent) == before and not (reg / "reports").exists()
    assert record(hub, reg, tmp_path, data).code == 0  # the genuine report: recorded, verified
    recorded = kept_and_yaml(reg)
    assert_clean_failure(record(hub, reg, tmp_path, forged), contains=message)
    assert kept_and_yaml(reg) == recorded


def test_record_records_the_genuine_report_of_a_pinned_hub_drafter(hub, genuine, reg, tmp_path):
    """verify's own report (the drafter's Hub cache folder at the pinned commit, the target folder of another
    checkout) records; `registry check` then passes."""
    data, sha = genuine
    r = record(hub, reg, tmp_path, data, "--json")
    assert r.code == 0 and r.json()["state"] == "verified", r.out + r.err
    entry = yaml.safe_load((reg / f"{ENTRY}.yaml").read_text())
    assert entry["status"]["state"] == "verified" and entry["drafter"]["revision"] == sha
    assert (reg.parent / entry["status"]["report"]).is_file()
    (reg / f"{TARGETED}.yaml").unlink()  # the same drafter repo twice is a problem of its own
    r = hubcli(hub, "registry", "check", "--registry", reg, ENTRY)
    assert r.code == 0, r.out


def test_record_records_a_report_at_the_pinned_target_revision(hub, genuine, reg, tmp_path):
    data, _ = genuine
    r = record(
        hub,
        reg,
        tmp_path,
        {**data, "registry_id": TARGETED, "target": TARGET_REPO, "target_revision": TARGET_SHA},
        "--json",
    )
    assert r.code == 0 and r.json()["state"] == "verified", r.out + r.err
