"""`eaglezoo registry update`: a newer registry from a Hub dataset repo, pinned at the commit its revision
resolves to, checked as strictly as `registry check` checks the repository's, then swapped in whole.

The dataset keeps the repository's layout (`registry/*.yaml`, `registry/reports/*.json`). The snapshot is
downloaded into a temporary folder beside the cached copy (`shipped.snapshot_home()`), loaded and checked
there, and only then renamed into place: a bad, partial or unreachable snapshot leaves the copy read before
exactly as it was."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path, PurePosixPath

from ..errors import BadInput, HubError
from ..fsutil import atomic_write_text, replace_dir, staging
from ..hub.client import hub_call
from . import shipped
from .shipped import Snapshot

DEFAULT_REPO = "eaglezoo/registry"  # the dataset the registry workflow publishes main's registry to
REPO_ENV = "EAGLEZOO_REGISTRY_REPO"
PATTERNS = ["registry/*.yaml", "registry/reports/*.json"]


def default_repo() -> str:
    return os.environ.get(REPO_ENV) or DEFAULT_REPO


def update(repo: str | None = None, revision: str | None = None) -> Snapshot:
    """Fetches `repo` (a dataset) at `revision` (default main), checks it, and makes it the copy eaglezoo reads."""
    from huggingface_hub import HfApi, snapshot_download

    repo, revision = repo or default_repo(), revision or "main"
    what = f"registry dataset {repo}@{revision}"
    info = hub_call(lambda: HfApi().dataset_info(repo, revision=revision), what)
    commit = info.sha
    names = [s.rfilename for s in info.siblings or []]
    _refuse_unsafe(names, what)
    if not any(_is_entry(n) for n in names):
        raise BadInput(f"{what}: holds no registry/*.yaml entry (commit {commit})",
                       hint="name the dataset that eaglezoo's registry is published to (--repo)")
    home = shipped.snapshot_home()
    with staging(home) as tmp:
        hub_call(lambda: snapshot_download(repo, repo_type="dataset", revision=commit, local_dir=tmp,
                                           allow_patterns=PATTERNS), f"{repo}@{commit[:12]}")
        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # the client's download bookkeeping
        _refuse_incomplete(tmp, names, f"{repo}@{commit[:12]}")
        _check(tmp, f"{repo}@{commit[:12]}")
        snapshot = Snapshot(repo, revision, commit, dt.datetime.now(dt.UTC))
        atomic_write_text(tmp / shipped.SNAPSHOT_FILE, shipped.snapshot_json(snapshot))
        replace_dir(tmp, home, force=True)
    return snapshot


def _is_entry(name: str) -> bool:
    path = PurePosixPath(name)
    return path.parent == PurePosixPath("registry") and path.suffix == ".yaml"


def _refuse_unsafe(names: list[str], what: str) -> None:
    from ..hub.pull import _safe_name

    bad = [n for n in names if not _safe_name(n)]
    if bad:
        raise HubError(f"{what}: refusing remote file name {bad[0]!r}: it escapes the download directory",
                       hint="the dataset holds unsafe file names: do not use it")


def _refuse_incomplete(tmp: Path, names: list[str], what: str) -> None:
    """Every file the commit lists under the patterns arrived (a partial snapshot is no snapshot)."""
    import fnmatch

    wanted = [n for n in names if any(fnmatch.fnmatch(n, p) for p in PATTERNS)]
    missing = [n for n in wanted if not (tmp / n).is_file()]
    if missing:
        raise HubError(f"{what}: the snapshot is incomplete ({missing[0]} did not arrive)",
                       hint="run eaglezoo registry update again; the registry read before is unchanged")


def _check(tmp: Path, what: str) -> None:
    """The snapshot as `registry check` checks a registry: every file loads, every entry is consistent."""
    from .check import check_all
    from .load import load_copy
    from .shipped import Copy

    reg = load_copy(Copy("updated", tmp / "registry"))
    failing = {name: _relative(message, tmp) for name, message in reg.broken.items()}
    failing |= {i: f"fails registry check: {p[0]}" for i, p in check_all(reg).items() if p and i not in failing}
    if failing:
        name, why = next(iter(sorted(failing.items())))
        more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
        raise BadInput(f"{what}: entry {name}: {why}{more}",
                       hint="the registry read before is unchanged; report it to the dataset's maintainers")


def _relative(message: str, tmp: Path) -> str:
    """A loader message names the file by its temporary path; say it as the dataset names it."""
    return message.replace(f"{tmp}{os.sep}", "")
