"""Hub pull and push through the official `huggingface_hub` client.

The endpoint and token come from the client's own settings (HF_ENDPOINT, HF_TOKEN, the token file).
Xet is switched off for uploads (HF_HUB_DISABLE_XET) unless the user set it: plain LFS works against
every Hub-compatible server (hub-api.md §2). Tokens are never printed: messages are scrubbed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

from .errors import HubError, UsageError  # noqa: E402
from .tensors import sha256_file  # noqa: E402

RETRIES = 2  # on top of the client's own backoff (5 retries for connection errors and 5xx)


@dataclass
class Pulled:
    repo: str
    revision: str | None
    commit: str | None
    path: Path
    verified: dict[str, str]  # file -> sha256 checked
    registry_id: str | None = None


def _scrub(text: str) -> str:
    from huggingface_hub import get_token

    token = get_token()
    return text.replace(token, "***") if token else text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return _scrub(text[0] if text else type(exc).__name__)


def hub_call(fn, what: str):
    """Runs one client call, retrying network failures, and maps errors to one-line messages."""
    from huggingface_hub.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the client logs each retry; we report the outcome once
    from huggingface_hub.errors import (EntryNotFoundError, GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError,
                                        OfflineModeIsEnabled, RepositoryNotFoundError, RevisionNotFoundError)

    for attempt in range(RETRIES):
        try:
            return fn()
        except GatedRepoError:
            raise HubError(f"{what}: the repository is gated; accept its terms on the Hub first") from None
        except RepositoryNotFoundError:
            raise HubError(f"{what}: repository not found (or private, and the token cannot see it)") from None
        except RevisionNotFoundError:
            raise HubError(f"{what}: revision not found") from None
        except (LocalEntryNotFoundError, OfflineModeIsEnabled):
            raise HubError(f"{what}: not in the local cache, and offline mode (HF_HUB_OFFLINE) forbids downloading it") from None
        except EntryNotFoundError as exc:
            raise HubError(f"{what}: file not found ({_first_line(exc)})") from None
        except HfHubHTTPError as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            if status == 401:
                raise HubError(f"{what}: authentication failed (401): the token is missing, wrong or expired") from None
            if status == 403:
                raise HubError(f"{what}: forbidden (403): the token may not write to this repository") from None
            if status is not None and status < 500 and status != 429:
                raise HubError(f"{what}: the Hub answered {status}: {_first_line(exc)}") from None
            error = exc
        except (OSError, ConnectionError) as exc:
            error = exc
        except Exception as exc:  # httpx transport errors are not OSError
            if "Connect" not in type(exc).__name__ and "Timeout" not in type(exc).__name__:
                raise
            error = exc
        if attempt < RETRIES - 1:
            time.sleep(0.5 * 2 ** attempt)
    raise HubError(f"{what}: the Hub could not be reached, retries exhausted ({_first_line(error)})")


def _safe_name(name: str) -> bool:
    p = PurePosixPath(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts and "\\" not in name


def resolve_target(id_or_repo: str, revision: str | None, registry_dir: Path | None = None):
    """A registry id becomes its repo and pinned revision (and the registry's file hashes)."""
    from . import registry

    if "/" not in id_or_repo:
        entry = registry.get(id_or_repo, registry_dir)
        if not entry.drafter.repo:
            raise UsageError(f"registry entry {id_or_repo} is not published on the Hub")
        return entry.drafter.repo, revision or entry.drafter.revision, dict(entry.files), entry.id
    return id_or_repo, revision, {}, None


def pull(id_or_repo: str, revision: str | None = None, local_dir: Path | None = None,
         registry_dir: Path | None = None) -> Pulled:
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub import constants

    repo, revision, expected, entry_id = resolve_target(id_or_repo, revision, registry_dir)
    what = f"{repo}@{revision or 'main'}"
    if not constants.HF_HUB_OFFLINE:
        names = hub_call(lambda: HfApi().list_repo_files(repo, revision=revision), what)
        bad = [n for n in names if not _safe_name(n)]
        if bad:
            raise HubError(f"{what}: refusing remote file name {bad[0]!r}: it escapes the download directory")
    path = Path(hub_call(lambda: snapshot_download(repo, revision=revision, local_dir=local_dir), what))
    verified = verify_files(path, expected, what)
    commit = path.name if local_dir is None and len(path.name) == 40 else None
    return Pulled(repo, revision, commit, path, verified, entry_id)


def verify_files(path: Path, expected: dict[str, str], what: str) -> dict[str, str]:
    """Checks the registry's hashes, else the manifest in conversion.json, when present."""
    manifest = dict(expected)
    record = path / "conversion.json"
    if not manifest and record.is_file():
        try:
            manifest = json.loads(record.read_text()).get("output", {})
        except (json.JSONDecodeError, AttributeError):
            raise HubError(f"{what}: conversion.json is not valid JSON") from None
    checked = {}
    for name, digest in manifest.items():
        f = path / name
        if not f.is_file():
            raise HubError(f"{what}: {name} is listed with a sha256 but was not downloaded")
        actual = sha256_file(f)
        if actual != digest:
            raise HubError(f"{what}: sha256 mismatch for {name}: expected {digest[:12]}…, got {actual[:12]}…")
        checked[name] = actual
    return checked


@dataclass
class Pushed:
    repo: str
    revision: str
    commit: str | None
    created_commit: bool
    pull_request: str | None
    files: list[str]


def push(folder: Path, repo: str, revision: str = "main", private: bool = False, create_pr: bool = False,
         report: Path | None = None, target: str | None = None) -> Pushed:
    from huggingface_hub import CommitOperationAdd, HfApi

    from .card import model_card

    if not folder.is_dir():
        raise UsageError(f"{folder}: not a directory")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not any(f.name == "config.json" for f in files):
        raise UsageError(f"{folder}: no config.json; push a converted drafter folder")
    card = model_card(folder, report=report, target=target, repo=repo)
    api = HfApi()
    what = f"{repo}@{revision}"
    hub_call(lambda: api.create_repo(repo, private=private, exist_ok=True), what)
    if revision != "main" and not create_pr:
        hub_call(lambda: api.create_branch(repo, branch=revision, exist_ok=True), what)
    before = _head(api, repo, revision)
    ops = [CommitOperationAdd(path_in_repo=f.relative_to(folder).as_posix(), path_or_fileobj=str(f))
           for f in files if f.name != "README.md"]
    ops.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode()))
    info = hub_call(lambda: api.create_commit(repo, ops, commit_message="Upload drafter with eaglezoo",
                                              revision=revision, create_pr=create_pr), what)
    after = _head(api, repo, revision)
    commit = getattr(info, "oid", None) or after
    return Pushed(repo, revision, commit, created_commit=create_pr or after != before,
                  pull_request=getattr(info, "pr_url", None), files=[o.path_in_repo for o in ops])


def _head(api, repo: str, revision: str) -> str | None:
    from huggingface_hub.errors import RevisionNotFoundError

    try:
        return api.repo_info(repo, revision=revision).sha
    except RevisionNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - an empty repo has no head yet
        return None


def tag(repo: str, tag_name: str, revision: str = "main") -> None:
    from huggingface_hub import HfApi

    hub_call(lambda: HfApi().create_tag(repo, tag=tag_name, revision=revision), f"{repo}@{revision}")
