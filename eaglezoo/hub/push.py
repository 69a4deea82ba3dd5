"""`eaglezoo push`: exactly the folder's regular files plus the generated model card, in one commit,
with an optional tag checked before anything is pushed."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import HubError, UsageError
from .client import hub_call

NEVER_UPLOADED = (".git", ".cache")



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
