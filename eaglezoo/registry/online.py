"""One registry entry against the Hub: its pinned revisions and sha256s, and the published config
against the entry's facts (`registry check --online`)."""

from __future__ import annotations

from ..checkpoint.formats.base import ReadOptions
from ..errors import EaglezooError, HubError, HubSilent
from ..hub.state import Snapshot, snapshot
from ..lint import remote_lint
from .schema import Entry


def check_online(entry: Entry) -> dict:
    """The entry's pins and hashes, a remote lint of its drafter, and its facts against the published config."""
    pins = pin_problems(entry)
    result = _published_config_problems(entry)
    result["problems"] = pins + result["problems"]
    return result


def _published_config_problems(entry: Entry) -> dict:
    problems: list[str] = []
    if not entry.drafter.repo:
        return {"problems": [], "skipped": "not published on the Hub"}
    try:
        opts = entry.read_options(ReadOptions())  # the same reading as `lint ID`, `verify ID`
        report = remote_lint(entry.drafter.repo, entry.target.repo, entry.drafter.revision, entry.dialect, opts)
    except HubSilent:  # the next entry would wait as long: the command stops
        raise
    except EaglezooError as exc:
        return {"problems": [f"online: {exc.message}"]}
    problems += [f"lint {f.code}: {f.message}" for f in report.errors]
    spec = report.spec
    if spec is not None:
        facts = {
            "draft_vocab_size": spec.draft_vocab_size,
            "target_vocab_size": spec.vocab_size,
            "hidden_size": spec.hidden_size,
            "family": spec.family,
            **({"eagle_version": spec.eagle_version} if spec.family in ("eagle3", "peagle") else {}),
            **(spec.family_fields.stated() if spec.family_fields else {}),
        }
        for key, actual in facts.items():
            stated = getattr(entry, key, None)
            if stated is not None and stated != actual:
                problems.append(f"registry says {key}={stated}, the published config says {actual}")
    return {
        "problems": problems,
        "bytes_read": report.bytes_read,
        "weights_bytes": report.weights_bytes,
        "findings": [f.model_dump() for f in report.findings],
    }


def pin_problems(entry: Entry) -> list[str]:
    """`registry check --online`: the pinned revisions still exist, and the drafter's files there still
    have the registry's sha256."""
    problems = []
    for role, repo in (("drafter", entry.drafter), ("target", entry.target)):
        if not repo.repo or not (repo.revision or (role == "drafter" and entry.files)):
            continue
        try:
            snap = snapshot(repo.repo, repo.revision)
        except HubError as exc:
            problems.append(f"{role}: {exc.message}")
            continue
        if role == "drafter":
            problems += _hash_problems(entry.files, snap)
    return problems


def _hash_problems(pinned: dict[str, str], snap: Snapshot) -> list[str]:
    problems = []
    for name, digest in sorted(pinned.items()):
        if name not in snap.files:
            problems.append(f"files.{name}: not in {snap.at} (deleted or renamed)")
        elif (actual := snap.sha256(name)) != digest:
            problems.append(f"files.{name}: sha256 on the Hub is {actual}, the registry pins {digest}")
    return problems
