"""`eaglezoo registry update`: a newer registry from a Hub dataset repo, pinned at the 40-hex commit its revision
resolves to, checked by the same checks as `registry check` (record's rule for measured rows and status
included), then swapped in whole.

The dataset keeps the repository's layout (`registry/*.yaml`, `registry/reports/*.json`). The Hub's listing of
the commit is bounded (limits.py: files, bytes per file and in all) before anything is fetched; exactly the
files it names are downloaded, at that commit, into a temporary folder beside the cached copy
(`shipped.snapshot_home()`), each must have its listed size and blob id, and the folder is loaded and checked
there; only then is it renamed into place: a bad, partial, oversized or unreachable snapshot leaves the copy
read before exactly as it was."""

from __future__ import annotations

import datetime as dt
import fnmatch
import hashlib
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import BadInput, HubError
from ..fsutil import atomic_write_text, replace_dir, staging
from ..hub.client import hub_call
from ..hub.pull import _safe_name
from ..limits import MAX_REGISTRY_BYTES, MAX_REGISTRY_FILE_BYTES, MAX_REGISTRY_FILES
from . import shipped
from .check import check_all
from .load import load_copy
from .shipped import Copy, Snapshot

DEFAULT_REPO = "eaglezoo/registry"  # the dataset the registry workflow publishes main's registry to
REPO_ENV = "EAGLEZOO_REGISTRY_REPO"
PATTERNS = ["registry/*.yaml", "registry/reports/*.json"]  # the layout the dataset keeps (registry.yml uploads it)
COMMIT = re.compile(r"^[0-9a-f]{40}$")
UNCHANGED = "the registry read before is unchanged; report it to the dataset's maintainers"


def default_repo() -> str:
    return os.environ.get(REPO_ENV) or DEFAULT_REPO


@dataclass(frozen=True)
class Listed:
    """One file of the snapshot as the commit lists it: what its bytes must be."""

    name: str
    size: int
    blob_id: str  # git's blob sha1 of the bytes (of the LFS pointer, for an LFS file)
    lfs_sha256: str | None


@dataclass(frozen=True)
class Listing:
    """The commit a revision resolved to, and the registry files it lists, within the bounds (limits.py)."""

    commit: str
    files: tuple[Listed, ...]


def update(repo: str | None = None, revision: str | None = None) -> Snapshot:
    """Fetches `repo` (a dataset) at `revision` (default main), checks it, and makes it the copy eaglezoo reads."""
    from huggingface_hub import HfApi

    repo, revision = repo or default_repo(), revision or "main"
    what = f"registry dataset {repo}@{revision}"
    info = hub_call(lambda: HfApi().dataset_info(repo, revision=revision, files_metadata=True), what)
    listing = listed(info, revision, what)
    where = f"{repo}@{listing.commit[:12]}"
    home = shipped.snapshot_home()
    with staging(home) as tmp:
        hub_call(lambda: _download(repo, listing, tmp), where, max_bytes=MAX_REGISTRY_BYTES)
        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # the client's download bookkeeping
        _refuse_changed(tmp, listing, where)
        _check(tmp, where)
        snapshot = Snapshot(repo, revision, listing.commit, dt.datetime.now(dt.UTC))
        atomic_write_text(tmp / shipped.SNAPSHOT_FILE, shipped.snapshot_json(snapshot))
        replace_dir(tmp, home, force=True)
    return snapshot


def listed(info, revision: str, what: str) -> Listing:
    """The Hub's answer as a Listing: a 40-hex commit (the one asked for, when a commit was asked for), safe
    names, and the registry files within the bounds, each with its size and blob id. Else one error."""
    commit = info.sha
    if not isinstance(commit, str) or not COMMIT.match(commit) or (COMMIT.match(revision) and commit != revision):
        raise HubError(
            f"{what}: the Hub answered commit {commit!r}, not the 40-hex commit sha the revision resolves to: refused",
            hint="name a branch, tag or commit that exists (--revision)",
        )
    siblings = info.siblings or []
    _refuse_unsafe([s.rfilename for s in siblings], what)
    wanted = [s for s in siblings if any(_in_layout(s.rfilename, p) for p in PATTERNS)]
    if not any(_is_entry(s.rfilename) for s in wanted):
        raise BadInput(
            f"{what}: holds no registry/*.yaml entry (commit {commit})",
            hint="name the dataset that eaglezoo's registry is published to (--repo)",
        )
    if len(wanted) > MAX_REGISTRY_FILES:
        raise BadInput(
            f"{what}: lists {len(wanted)} registry files, more than {MAX_REGISTRY_FILES}: refused", hint=UNCHANGED
        )
    files = tuple(_listed(s, what) for s in wanted)
    total = sum(f.size for f in files)
    if total > MAX_REGISTRY_BYTES:
        raise BadInput(
            f"{what}: its registry files hold {total} bytes, more than {MAX_REGISTRY_BYTES}: refused", hint=UNCHANGED
        )
    return Listing(commit, files)


def _listed(sibling, what: str) -> Listed:
    size, blob_id, lfs = sibling.size, sibling.blob_id, sibling.lfs
    if not isinstance(size, int) or size < 0 or not isinstance(blob_id, str):
        raise HubError(
            f"{what}: the Hub lists {sibling.rfilename} without its size and blob id: refused",
            hint="HF_ENDPOINT must name a Hugging Face Hub or a mirror of its API",
        )
    if size > MAX_REGISTRY_FILE_BYTES:
        raise BadInput(
            f"{what}: {sibling.rfilename} holds {size} bytes, more than {MAX_REGISTRY_FILE_BYTES}: refused",
            hint=UNCHANGED,
        )
    return Listed(sibling.rfilename, size, blob_id, getattr(lfs, "sha256", None) if lfs else None)


def _in_layout(name: str, pattern: str) -> bool:
    """`name` is a file right in the pattern's folder, its name of the pattern's form (fnmatch's * alone would
    match across folders)."""
    folder, _, form = pattern.rpartition("/")
    path = PurePosixPath(name)
    return str(path.parent) == folder and fnmatch.fnmatch(path.name, form)


def _is_entry(name: str) -> bool:
    return _in_layout(name, PATTERNS[0])


def _refuse_unsafe(names: list[str], what: str) -> None:

    bad = [n for n in names if not isinstance(n, str) or not _safe_name(n)]
    if bad:
        raise HubError(
            f"{what}: refusing remote file name {bad[0]!r}: it escapes the download directory",
            hint="the dataset holds unsafe file names: do not use it",
        )


def _download(repo: str, listing: Listing, tmp: Path) -> None:
    """The files the listing names, each at its commit: the listing is not read again (a Hub whose listing
    changes while it is read changes nothing here)."""

    from huggingface_hub import hf_hub_download

    def one(f: Listed) -> None:
        hf_hub_download(repo, f.name, repo_type="dataset", revision=listing.commit, local_dir=tmp)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, listing.files))


def _refuse_changed(tmp: Path, listing: Listing, what: str) -> None:
    """Every listed file arrived, with the size and the bytes the commit lists (sizes first: nothing larger
    than its listing is read)."""
    for f in listing.files:
        path = tmp / f.name
        if not path.is_file():
            raise HubError(
                f"{what}: the snapshot is incomplete ({f.name} did not arrive)",
                hint="run eaglezoo registry update again; the registry read before is unchanged",
            )
        if path.stat().st_size != f.size or _digest(path, f) != (f.lfs_sha256 or f.blob_id):
            raise HubError(
                f"{what}: {f.name} is not the file commit {listing.commit[:12]} lists: the snapshot "
                "changed while it was read",
                hint="run eaglezoo registry update again; " + UNCHANGED,
            )


def _digest(path: Path, f: Listed) -> str:
    """sha256 for an LFS file, else git's blob sha1 (what the Hub lists as blobId)."""
    h = hashlib.sha256() if f.lfs_sha256 else hashlib.sha1(b"blob %d\0" % f.size)
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check(tmp: Path, what: str) -> None:
    """The snapshot as `registry check` checks a registry: every file loads, every entry is consistent."""

    reg = load_copy(Copy("updated", tmp / "registry"))
    failing = {name: _relative(message, tmp) for name, message in reg.broken.items()}
    failing |= {
        i: _relative(f"fails registry check: {p[0]}", tmp) for i, p in check_all(reg).items() if p and i not in failing
    }
    if failing:
        name, why = next(iter(sorted(failing.items())))
        more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
        raise BadInput(f"{what}: entry {name}: {why}{more}", hint=UNCHANGED)


def _relative(message: str, tmp: Path) -> str:
    """A message names a file by its temporary path; say it as the dataset names it."""
    return message.replace(f"{tmp}{os.sep}", "").replace(str(tmp), "the snapshot")
