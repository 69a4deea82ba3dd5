"""Which copy of the registry eaglezoo reads when the user names none, and what that copy is.

Three copies can exist, and the first present wins:

* **updated**: a snapshot `eaglezoo registry update` fetched from the Hub dataset, pinned at a commit, in
  eaglezoo's cache (`$EAGLEZOO_CACHE/registry-snapshot`; `snapshot.json` says from where, at which commit, when);
* **shipped**: the copy inside the installed package (`eaglezoo/zoo/registry`, put there by the build from the
  repository's `registry/`; read through `importlib.resources`);
* **checkout**: the repository's own `registry/`, when eaglezoo runs from a checkout (an editable install).

Each copy keeps the repository's layout below its root (`registry/*.yaml`, `registry/reports/`), so the paths
in entries (`registry/reports/…`) resolve the same way in every copy. The shipped copy also carries the embedded
example, `examples/tiny` (setup.py), so the README's Quick start runs from a wheel; other paths into the repository
(`examples/smollm2`; every `examples/` path of an updated copy) are repository-only there (`Copy.repository` is
False)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import BadInput
from ..fsutil import parse_json
from ..settings import cache_dir

SNAPSHOT_FILE = "snapshot.json"


@dataclass(frozen=True)
class Snapshot:
    """Where an updated copy came from: the dataset repo, the revision asked for, the commit it resolved to."""

    repo: str
    revision: str
    commit: str
    fetched: dt.datetime

    def to_json(self) -> dict:
        return {
            "repo": self.repo,
            "revision": self.revision,
            "commit": self.commit,
            "fetched": self.fetched.isoformat(timespec="seconds"),
        }


@dataclass(frozen=True)
class Copy:
    """One copy of the registry: its folder of entries, which copy it is, and whether its root is a whole
    repository (every path an entry names can exist there)."""

    kind: str  # "updated", "shipped" or "checkout"
    directory: Path
    snapshot: Snapshot | None = None

    @property
    def repository(self) -> bool:
        return self.kind == "checkout"

    def describe(self) -> str:
        if self.snapshot is not None:
            s = self.snapshot
            return (
                f"updated from the Hub dataset {s.repo} at revision {s.commit[:12]} "
                f"({s.revision}) on {s.fetched.date().isoformat()}"
            )
        if self.kind == "shipped":
            return "shipped with this package"
        return f"the repository's {self.directory}"


def snapshot_home() -> Path:
    """The updated copy's folder: replaced whole by each `registry update`."""
    return cache_dir() / "registry-snapshot"


def packaged_dir() -> Path | None:
    """The copy inside the installed package, when the build put one there (a wheel always has it)."""
    zoo = resources.files("eaglezoo") / "zoo" / "registry"
    return Path(str(zoo)) if isinstance(zoo, Path) and zoo.is_dir() else None


def checkout_dir() -> Path | None:
    """The repository's registry/, when this package is imported from a checkout of the repository."""
    root = Path(__file__).resolve().parents[2]
    registry = root / "registry"
    return registry if registry.is_dir() and (root / "pyproject.toml").is_file() else None


def read_snapshot(home: Path) -> Snapshot:
    what = f"{home / SNAPSHOT_FILE}"
    try:
        data = parse_json((home / SNAPSHOT_FILE).read_text(encoding="utf-8"), what)
        return Snapshot(
            repo=str(data["repo"]),
            revision=str(data["revision"]),
            commit=str(data["commit"]),
            fetched=dt.datetime.fromisoformat(data["fetched"]),
        )
    except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError):
        raise BadInput(
            f"{what}: not the record `eaglezoo registry update` writes",
            hint="run eaglezoo registry update again, or remove that folder to read the shipped copy",
        ) from None


def updated_copy() -> Copy | None:
    home = snapshot_home()
    if not (home / "registry").is_dir():
        return None
    return Copy("updated", home / "registry", read_snapshot(home))


def base_copy() -> Copy | None:
    """The copy read when the user names no registry of their own: updated, else shipped, else the checkout's."""
    updated = updated_copy()
    if updated is not None:
        return updated
    packaged = packaged_dir()
    if packaged is not None:
        return Copy("shipped", packaged)
    checkout = checkout_dir()
    return Copy("checkout", checkout) if checkout is not None else None


def snapshot_json(snapshot: Snapshot) -> str:
    return json.dumps(snapshot.to_json(), indent=2) + "\n"
