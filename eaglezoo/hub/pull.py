"""`eaglezoo pull`: a repo at a revision into the cache or `--local-dir`, sha256-verified before
anything lands (the registry's hashes, else the manifest in conversion.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import HubError
from ..fsutil import move_into, sha256_file, staging
from .client import hub_call


@dataclass
class Pulled:
    repo: str
    revision: str | None
    commit: str | None
    path: Path
    verified: dict[str, str]  # file -> sha256 checked
    registry_id: str | None = None


def _safe_name(name: str) -> bool:
    p = PurePosixPath(name)
    return bool(name) and not p.is_absolute() and ".." not in p.parts and "\\" not in name


METADATA_FILES = ["*.json", "tokenizer*", "*.model", "*.tiktoken", "*.txt", "*.jinja"]  # no weights


def pull(
    repo: str,
    revision: str | None = None,
    local_dir: Path | None = None,
    expected: dict[str, str] | None = None,
    patterns: list[str] | None = None,
) -> Pulled:
    from huggingface_hub import HfApi, constants, snapshot_download

    what = f"{repo}@{revision or 'main'}"
    if not constants.HF_HUB_OFFLINE:
        names = hub_call(lambda: HfApi().list_repo_files(repo, revision=revision), what)
        bad = [n for n in names if not _safe_name(n)]
        if bad:
            raise HubError(
                f"{what}: refusing remote file name {bad[0]!r}: it escapes the download directory",
                hint="the repo holds unsafe file names: do not pull it",
            )
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
            raise HubError(
                f"{what}: manifest entry {name!r} leaves the download directory: refused",
                hint="the repo's conversion.json is unsafe: do not pull it",
            )
        f = path / name
        if not f.is_file():
            raise HubError(
                f"{what}: {name} is listed with a sha256 but was not downloaded",
                hint="the repo is incomplete: ask its publisher, or pull another revision",
            )
        actual = sha256_file(f)
        if actual != digest:
            raise HubError(
                f"{what}: sha256 mismatch for {name}: expected {digest}, got {actual}",
                hint="the download was discarded; the repository's files do not match their manifest",
            )
        checked[name] = actual
    return checked


def _manifest(path: Path, what: str) -> dict[str, str]:
    record = path / "conversion.json"
    if not record.is_file():
        return {}
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise HubError(
            f"{what}: conversion.json is not valid JSON",
            hint="convert the drafter again with eaglezoo (it writes conversion.json)",
        ) from None
    output = data.get("output") if isinstance(data, dict) else None
    if not isinstance(output, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in output.items()):
        raise HubError(
            f"{what}: conversion.json has no 'output' mapping of file names to sha256",
            hint="convert the drafter again with eaglezoo (it writes the manifest), or pull without it",
        )
    return output
