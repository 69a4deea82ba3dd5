"""Hub pull and push through the official `huggingface_hub` client.

The endpoint and token come from the client's own settings (HF_ENDPOINT, HF_TOKEN, the token file).
`configure()` runs once at CLI start, before anything imports the client: Xet off for uploads
(plain LFS works against every Hub-compatible server, hub-api.md §2) unless the user set it,
progress bars only on a terminal, and a connect/read timeout on every request; each call also has a
deadline (`deadline.py`). Tokens are never printed: messages are scrubbed.

Downloads never trust: a pull verifies sha256s before anything lands in `--local-dir`. Pushes upload
exactly the drafter: regular files inside the folder, no hidden files, no symlink that leaves it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..checkpoint.tensors import sha256_file
from ..errors import HubError, HubSilent, UsageError, network_problem
from ..fsutil import move_into, staging
from ..settings import hub_deadline_s, hub_timeout_s

NEVER_UPLOADED = (".git", ".cache")


def configure(show_progress: bool) -> None:
    """Client settings read at import time by huggingface_hub: call before it is imported."""
    os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", f"{hub_timeout_s():g}")
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", f"{min(hub_timeout_s(), 10):g}")
    hub_deadline_s()  # checked now: a bad value is one line before any work
    if not show_progress:
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"


_bounded = False


def _bound_the_client() -> None:
    """The client's shared HTTP session has no timeout, and many calls pass `timeout=None` explicitly
    (which disables the session's default): hooks give every request our limits and the call's
    deadline, and its `send` stops at the deadline (`deadline.py`)."""
    global _bounded
    if _bounded:
        return
    from huggingface_hub.utils import _http, set_client_factory

    from . import deadline

    def factory():
        client = _http.default_client_factory()
        hooks = client.event_hooks
        client.event_hooks = {**hooks, "request": [*hooks.get("request", []), deadline.limit_request],
                              "response": [*hooks.get("response", []), deadline.watch_response]}
        client.send = deadline.bounded_send(client.send)  # Client.request and Client.stream both call it
        return client

    set_client_factory(factory)
    _bounded = True


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


def _server_says(exc: BaseException) -> str:
    """The server's own message (first line, token scrubbed): what the Hub said, not our internals."""
    text = str(exc).strip().splitlines()
    return _scrub(text[0] if text else type(exc).__name__)


def hub_call(fn, what: str):
    """Runs one client call and maps its errors to one-line messages. The client itself retries
    connection errors, timeouts, 429 and 5xx with backoff; each request is bounded (`settings.hub_timeout_s`),
    and so is the whole call's wait for word from the Hub, retries included (`settings.hub_deadline_s`)."""
    _bound_the_client()
    from huggingface_hub.utils import logging as hf_logging

    from .deadline import DeadlinePassed, start_call, unreadable_answer

    hf_logging.set_verbosity_error()  # the client logs each retry; we report the outcome once
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    start_call()
    try:
        return fn()
    except DeadlinePassed as exc:
        raise HubSilent(f"{what}: {exc}", hint="check HF_ENDPOINT and your network; EAGLEZOO_HUB_DEADLINE sets "
                                               "how long a Hub call waits, retries included") from None
    except GatedRepoError:
        raise HubError(f"{what}: the repository is gated; accept its terms on the Hub first",
                       hint="accept the terms on the repo's Hub page, then retry with HF_TOKEN set") from None
    except RepositoryNotFoundError:
        raise HubError(f"{what}: repository not found (or private, and the token cannot see it)",
                       hint="check the repo id; for a private repo set HF_TOKEN") from None
    except RevisionNotFoundError:
        raise HubError(f"{what}: revision not found",
                       hint="check --revision (a branch, tag or commit of that repo)") from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):
        raise HubError(f"{what}: not in the local cache, and offline mode (HF_HUB_OFFLINE) forbids downloading it",
                       hint="run once without HF_HUB_OFFLINE=1 to download it") from None
    except EntryNotFoundError as exc:
        raise HubError(f"{what}: file not found ({_server_says(exc)})",
                       hint="check the file name and --revision") from None
    except HFValidationError:
        raise UsageError(f"{what}: not a valid Hub repo id or revision", hint="repo ids look like owner/name") from None
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status == 401:
            raise HubError(f"{what}: authentication failed (401): the token is missing, wrong or expired",
                           hint="set HF_TOKEN to a valid token (huggingface-cli login)") from None
        if status == 403:
            raise HubError(f"{what}: forbidden (403): the token may not write to this repository",
                           hint="use a token with write access to that namespace") from None
        if status is not None and status < 500 and status != 429:
            raise HubError(f"{what}: the Hub answered {status}: {_server_says(exc)}",
                           hint="see the Hub's message; check the repo id and --revision") from None
        raise _unreachable(what, f"the Hub answered {status}") from None
    except Exception as exc:  # a full disk or a bug is not "unreachable": errors.describe words those
        problem = network_problem(exc)
        if problem is not None:
            raise _unreachable(what, problem) from None
        answer = unreadable_answer(exc)
        if answer is None:
            raise
        raise HubError(f"{what}: {answer}", hint="HF_ENDPOINT must name a Hugging Face Hub or a mirror of its API; "
                                                 "a proxy or login page answers like this") from exc


def _unreachable(what: str, problem: str) -> HubError | HubSilent:
    # a Hub that does not answer stops the command: each later call would wait as long
    error = HubSilent if problem == "timed out" else HubError
    return error(f"{what}: the Hub could not be reached ({problem})",
                 hint="check HF_ENDPOINT and your network; EAGLEZOO_HUB_TIMEOUT sets the per-request limit")


def _safe_name(name: str) -> bool:
    p = PurePosixPath(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts and "\\" not in name


# --------------------------------------------------------------------------------------------
# pull


METADATA_FILES = ["*.json", "tokenizer*", "*.model", "*.tiktoken", "*.txt", "*.jinja"]  # no weights


def pull(repo: str, revision: str | None = None, local_dir: Path | None = None,
         expected: dict[str, str] | None = None, patterns: list[str] | None = None) -> Pulled:
    from huggingface_hub import HfApi, constants, snapshot_download

    what = f"{repo}@{revision or 'main'}"
    if not constants.HF_HUB_OFFLINE:
        names = hub_call(lambda: HfApi().list_repo_files(repo, revision=revision), what)
        bad = [n for n in names if not _safe_name(n)]
        if bad:
            raise HubError(f"{what}: refusing remote file name {bad[0]!r}: it escapes the download directory",
                           hint="the repo holds unsafe file names: do not pull it")
    if local_dir is None:
        path = Path(hub_call(lambda: snapshot_download(repo, revision=revision, allow_patterns=patterns), what))
        verified = verify_files(path, expected or {}, what)
        commit = path.name if len(path.name) == 40 else None
        return Pulled(repo, revision, commit, path, verified)
    with staging(local_dir) as tmp:  # nothing reaches local_dir before every hash matched
        hub_call(lambda: snapshot_download(repo, revision=revision, local_dir=tmp), what)
        verified = verify_files(tmp, expected or {}, what)
        move_into(tmp, local_dir)
    return Pulled(repo, revision, None, local_dir, verified)


def verify_files(path: Path, expected: dict[str, str], what: str) -> dict[str, str]:
    """Checks the registry's hashes, else the manifest in conversion.json, when present."""
    manifest = dict(expected) or _manifest(path, what)
    checked = {}
    for name, digest in manifest.items():
        if not _safe_name(name):  # by name: the cache's own files are symlinks into its blob store
            raise HubError(f"{what}: manifest entry {name!r} leaves the download directory: refused",
                           hint="the repo's conversion.json is unsafe: do not pull it")
        f = path / name
        if not f.is_file():
            raise HubError(f"{what}: {name} is listed with a sha256 but was not downloaded",
                           hint="the repo is incomplete: ask its publisher, or pull another revision")
        actual = sha256_file(f)
        if actual != digest:
            raise HubError(f"{what}: sha256 mismatch for {name}: expected {digest}, got {actual}",
                           hint="the download was discarded; the repository's files do not match their manifest")
        checked[name] = actual
    return checked


def _manifest(path: Path, what: str) -> dict[str, str]:
    record = path / "conversion.json"
    if not record.is_file():
        return {}
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise HubError(f"{what}: conversion.json is not valid JSON",
                       hint="convert the drafter again with eaglezoo (it writes conversion.json)") from None
    output = data.get("output") if isinstance(data, dict) else None
    if not isinstance(output, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in output.items()):
        raise HubError(f"{what}: conversion.json has no 'output' mapping of file names to sha256",
                       hint="convert the drafter again with eaglezoo (it writes the manifest), or pull without it")
    return output


# --------------------------------------------------------------------------------------------
# push


@dataclass
class Upload:
    path_in_repo: str
    local: Path | None  # None: generated content (the model card)
    size: int


@dataclass
class Pushed:
    repo: str
    revision: str
    commit: str | None
    created_commit: bool
    pull_request: str | None
    files: list[Upload]
    dry_run: bool = False


def select_files(folder: Path, include: list[str] | None = None, exclude: list[str] | None = None) -> list[Upload]:
    """Exactly what push uploads: regular files inside `folder`, hidden ones only when an --include
    pattern names a hidden path, `.git/` and `.cache/` never. A symlink is resolved and refused when
    it leaves the folder; a symlinked directory, a FIFO or a device is refused by name."""
    from huggingface_hub.utils import filter_repo_objects

    root = folder.resolve()
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in NEVER_UPLOADED)
        for d in dirnames:
            if (here / d).is_symlink():
                raise UsageError(f"{_rel(here / d, folder)}: a symlinked directory; push does not follow it",
                                 hint="copy the files into the folder, or --exclude it")
        for name in sorted(filenames):
            found.append((_rel(here / name, folder), here / name))
    visible = [(rel, p) for rel, p in found if not _hidden(rel)]
    asked_hidden = [pat for pat in include or [] if _hidden(pat)]
    chosen = list(filter_repo_objects(visible, allow_patterns=include or None, ignore_patterns=exclude or None,
                                      key=lambda item: item[0]))
    if asked_hidden:
        hidden = [(rel, p) for rel, p in found if _hidden(rel)]
        chosen += filter_repo_objects(hidden, allow_patterns=asked_hidden, ignore_patterns=exclude or None,
                                      key=lambda item: item[0])
    return [_upload(rel, p, root) for rel, p in sorted(chosen)]


def _rel(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix()


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") and part not in (".", "..") for part in PurePosixPath(rel).parts)


def _upload(rel: str, path: Path, root: Path) -> Upload:
    real = path.resolve()
    if real != root and root not in real.parents:
        raise UsageError(f"{rel}: a symlink that leaves the folder; push uploads only files inside it",
                         hint=f"copy the file into the folder, or --exclude {rel}")
    if not real.is_file():
        raise UsageError(f"{rel}: not a regular file (FIFO, device or socket); push uploads regular files only",
                         hint=f"--exclude {rel}")
    return Upload(rel, real, real.stat().st_size)


def push(folder: Path, repo: str, revision: str = "main", private: bool = False, create_pr: bool = False,
         report: Path | None = None, target: str | None = None, tag: str | None = None,
         include: list[str] | None = None, exclude: list[str] | None = None, dry_run: bool = False) -> Pushed:
    from .card import load_report, model_card

    if not folder.is_dir():
        raise UsageError(f"{folder}: not a directory", hint="give the converted drafter's folder")
    files = [f for f in select_files(folder, include, exclude) if f.path_in_repo != "README.md"]
    if not any(f.path_in_repo == "config.json" for f in files):
        raise UsageError(f"{folder}: no config.json; push a converted drafter folder",
                         hint="convert it first (eaglezoo convert SRC OUT), then push OUT")
    _refuse_local_paths(folder / "conversion.json")
    card = model_card(folder, report=load_report(report) if report else None, target=target, repo=repo).encode()
    files.append(Upload("README.md", None, len(card)))
    if dry_run:
        return Pushed(repo, revision, None, False, None, files, dry_run=True)
    return _commit(repo, revision, private, create_pr, tag, files, card)


def _refuse_local_paths(record: Path) -> None:
    """conversion.json written before eaglezoo recorded only relative names held the source's absolute path."""
    try:
        source = json.loads(record.read_text(encoding="utf-8")).get("source", {})
    except (OSError, ValueError, AttributeError, RecursionError):
        return
    if isinstance(source, dict) and isinstance(source.get("path"), str) and os.path.isabs(source["path"]):
        raise UsageError("conversion.json records an absolute local path (source.path); it would be published",
                         hint="convert the drafter again with this eaglezoo, which records relative names only")


def _commit(repo: str, revision: str, private: bool, create_pr: bool, tag: str | None,
            files: list[Upload], card: bytes) -> Pushed:
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi()
    what = f"{repo}@{revision}"
    hub_call(lambda: api.create_repo(repo, private=private, exist_ok=True), what)
    if tag and tag in _tags(api, repo):
        raise UsageError(f"{repo}: tag {tag!r} already exists; nothing was pushed", hint="choose another --tag")
    if revision != "main" and not create_pr:
        hub_call(lambda: api.create_branch(repo, branch=revision, exist_ok=True), what)
    before = _head(api, repo, revision)
    ops = [CommitOperationAdd(path_in_repo=f.path_in_repo, path_or_fileobj=str(f.local) if f.local else card)
           for f in files]
    info = hub_call(lambda: api.create_commit(repo, ops, commit_message="Upload drafter with eaglezoo",
                                              revision=revision, create_pr=create_pr), what)
    after = _head(api, repo, revision)
    commit = getattr(info, "oid", None) or after
    if tag:
        hub_call(lambda: api.create_tag(repo, tag=tag, revision=commit or revision), f"{repo}: tag {tag!r}")
    return Pushed(repo, revision, commit, created_commit=create_pr or after != before,
                  pull_request=getattr(info, "pr_url", None), files=files)


def _tags(api, repo: str) -> set[str]:
    refs = hub_call(lambda: api.list_repo_refs(repo), f"{repo}: tags")
    return {t.name for t in refs.tags}


def _head(api, repo: str, revision: str) -> str | None:
    try:
        return hub_call(lambda: api.repo_info(repo, revision=revision).sha, f"{repo}@{revision}")
    except HubError:  # an empty repo, or a branch not created yet, has no head
        return None
