"""The registry: one YAML file per published drafter (schema in `schema.py`) loaded with file:line
errors (a repeated key too); a malformed file is kept aside by name; lookup by id or entry file. The
consistency checks beyond the schema are in `check.py`.

Which folder: the user's own (`--registry DIR`, else `$EAGLEZOO_REGISTRY`) is laid over the base copy
(`shipped.py`: updated, shipped or the checkout's) when an id is looked up or the entries are listed: the
user's entry wins over the base's of the same id. Commands that maintain one folder (check, site, plan,
sync, record) act on the user's folder when one is named, else on the base copy."""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..errors import BadInput, UsageError
from ..fsutil import inside, regular_file
from . import shipped
from .schema import Entry, Repo  # noqa: F401  (Repo: re-exported for sources)
from .shipped import Copy


def user_dir(directory: Path | None = None) -> Path | None:
    """The user's own registry folder: the one named, else $EAGLEZOO_REGISTRY, else none."""
    env = os.environ.get("EAGLEZOO_REGISTRY")
    return Path(directory) if directory is not None else Path(env) if env else None


def base_copy() -> Copy:
    copy = shipped.base_copy()
    if copy is None:
        raise UsageError(
            "this eaglezoo has no registry: the package holds no eaglezoo/zoo/registry",
            hint="reinstall eaglezoo from its wheel, run eaglezoo registry update, or name a folder "
            "with --registry DIR",
        )
    return copy


def default_dir() -> Path:
    """The one folder a maintaining command acts on when none is named: the user's, else the base copy's."""
    return user_dir() or base_copy().directory


def _line_of(node, loc: tuple) -> int | None:
    """The 1-based line of the YAML key (or item) at a pydantic error location."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == key), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML keeps the last of two equal keys silently; an entry that repeats a key is refused. Parsed by
    libyaml where PyYAML was built with it (ten times faster than the pure-Python parser: every command that
    names a registry id reads the whole registry)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self._refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep=deep)

    def _refuse_duplicate_keys(self, node: yaml.MappingNode) -> None:
        first_line = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # the keys beside a merge (`<<:`) may override the merged ones
            key = self.construct_object(key_node)
            if key in first_line:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}, first on line {first_line[key]}", key_node.start_mark
                )
            first_line[key] = key_node.start_mark.line + 1

    def construct_object(self, node, deep=False):
        """A scalar that parses but cannot be built (a date like 2026-13-45; an integer longer than Python reads
        from text, a limit kept: it guards against quadratic-time parsing) is a YAML error at its own line,
        never a bare ValueError."""
        try:
            return super().construct_object(node, deep=deep)
        except ValueError:
            raise _BadValue(_value_problem(node), node.start_mark) from None


class _BadValue(yaml.constructor.ConstructorError):
    def __init__(self, problem: str, mark):
        super().__init__(None, None, problem, mark)


def _value_problem(node) -> str:
    value = str(getattr(node, "value", ""))
    shown = repr(value if len(value) <= 40 else value[:37] + "...")
    if node.tag == "tag:yaml.org,2002:int":
        return f"the number {shown} has too many digits (over {sys.get_int_max_str_digits()})"
    if node.tag == "tag:yaml.org,2002:timestamp":
        return f"{shown} is not a valid date or time (a date is YYYY-MM-DD)"
    return f"{shown} cannot be read as {node.tag.rpartition(':')[2] or 'a value'}"


def parse(text: str) -> tuple[yaml.Node | None, object]:
    """The document's node tree (for the line of a field) and its data, from one parse."""
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        return node, None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def load_entry(path: Path) -> Entry:
    regular_file(path, "registry entry")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not UTF-8 text", hint="save the file as UTF-8") from None
    try:
        node, data = parse(text)
    except RecursionError:
        raise BadInput(
            f"{path}: nested too deeply", hint="flatten the entry: registry entries are a few levels deep"
        ) from None
    except _BadValue as exc:
        raise BadInput(
            f"{path}:{exc.problem_mark.line + 1}: {exc.problem}",
            hint="correct the value at that line (eaglezoo registry check names every broken file)",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise BadInput(
            f"{where}: invalid YAML ({getattr(exc, 'problem', None) or exc})",
            hint="fix the YAML at that line (eaglezoo registry check names every broken file)",
        ) from None
    if not isinstance(data, dict):
        raise BadInput(
            f"{path}:1: a registry entry must be a mapping",
            hint="write the entry as key: value lines (see any file in registry/)",
        )
    try:
        entry = Entry.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(x for x in err["loc"] if not isinstance(x, str) or not x.startswith("function-"))
        line = _line_of(node, loc) or 1
        field = ".".join(str(x) for x in loc) or "entry"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise BadInput(
            f"{path}:{line}: {field}: {err['msg']}{more}", hint="fix that key (docs/registry.md lists every field)"
        ) from None
    if entry.id != path.stem:
        raise BadInput(
            f"{path}:{_line_of(node, ('id',)) or 1}: id {entry.id!r} must equal the file name {path.stem!r}",
            hint=f"rename the file to {entry.id}.yaml, or set id: {path.stem}",
        )
    return entry


@dataclass
class Registry:
    """The entries of one registry directory, and the files that failed to load (name -> message).
    `repository`: its root is a whole repository, so every path an entry names can exist there; False for the
    shipped and updated copies, which carry registry/ (and the shipped one examples/tiny) alone (paths elsewhere
    are repository-only)."""

    directory: Path
    entries: dict[str, Entry]
    broken: dict[str, str]
    repository: bool = True

    @property
    def root(self) -> Path:
        """Paths inside entries (drafter.path, status.report, prompts) are relative to this folder."""
        return self.directory.parent

    def get(self, entry_id: str) -> Entry:
        """The entry with exactly this id (file name and `id:` agree, so dots are part of the id)."""
        if entry_id in self.entries:
            return self.entries[entry_id]
        if entry_id in self.broken:
            raise BadInput(self.broken[entry_id], hint="fix the file (eaglezoo registry check shows the problem)")
        close = nearest_ids(entry_id, list(self.entries))
        raise UsageError(
            f"no registry entry {entry_id!r} in {self.directory}",
            hint=f"did you mean {', '.join(close)}?" if close else "eaglezoo registry list shows them",
        )

    def path(self, relative: str, what: str) -> Path:
        return inside(self.root, relative, what)


def nearest_ids(asked: str, ids: list[str], n: int = 3) -> list[str]:
    """The ids a mistyped one most likely meant: those that contain it, then the closest spellings (difflib)."""

    lower = {i.lower(): i for i in ids}
    within = [i for i in ids if asked.lower() in i.lower()]
    spelled = [lower[c] for c in difflib.get_close_matches(asked.lower(), list(lower), n=n, cutoff=0.6)]
    return list(dict.fromkeys(within + spelled))[:n]


def load(directory: Path | None = None) -> Registry:
    """Every entry of a registry directory (the one named, else the user's, else the base copy); a malformed
    file is kept aside, by name, not fatal."""
    if directory is None and user_dir() is None:
        return load_copy(base_copy())
    return _load_dir(Path(directory or default_dir()))


def load_copy(copy: Copy) -> Registry:
    return _load_dir(copy.directory, repository=copy.repository)


def _load_dir(directory: Path, repository: bool = True) -> Registry:
    if not directory.is_dir():
        raise UsageError(f"registry directory {directory} not found", hint="set EAGLEZOO_REGISTRY or --registry")
    entries, broken = {}, {}
    for path in sorted(directory.glob("*.yaml")):
        try:
            entry = load_entry(path)
        except BadInput as exc:
            broken[path.stem] = exc.message
            continue
        entries[entry.id] = entry
    return Registry(directory, entries, broken, repository)


def is_entry_file(arg: str) -> bool:
    return arg.endswith(".yaml") and Path(arg).is_file()


def lookup(id_or_file: str, directory: Path | None = None) -> tuple[Entry, Registry]:
    """A registry id in `directory`, or a path to an entry file (whose registry is its own folder)."""
    if is_entry_file(id_or_file):
        path = Path(id_or_file)
        reg = load(path.parent)
        return reg.get(path.stem), reg
    mine = user_dir(directory)
    if mine is None:
        reg = load_copy(base_copy())
        return reg.get(id_or_file), reg
    reg = load(mine)
    if id_or_file not in reg.entries and id_or_file not in reg.broken:
        copy = shipped.base_copy()
        below = load_copy(copy) if copy is not None else None
        if below is not None and id_or_file in below.entries:
            return below.entries[id_or_file], below
    return reg.get(id_or_file), reg


def replaces_base(entry_id: str, reg: Registry) -> bool:
    """Whether `reg` (where `lookup` found the id) is a folder of the user's that replaces the base copy's entry."""
    copy = shipped.base_copy()
    return (
        copy is not None
        and copy.directory.resolve() != reg.directory.resolve()
        and (copy.directory / f"{entry_id}.yaml").is_file()
    )


@dataclass(frozen=True)
class Layered:
    """The user's registry laid over the base copy, for listing: every entry by id (the user's wins), the files
    that failed to load in either, and the ids where the user's entry replaced the base's."""

    entries: dict[str, Entry]
    broken: dict[str, str]
    overridden: tuple[str, ...]
    mine: Path | None


def layered(directory: Path | None = None) -> Layered:
    mine = user_dir(directory)
    if mine is None:
        base = load_copy(base_copy())
        return Layered(base.entries, base.broken, (), None)
    top, copy = load(mine), shipped.base_copy()
    if copy is None or copy.directory.resolve() == mine.resolve():
        return Layered(top.entries, top.broken, (), mine)
    base = load_copy(copy)
    overridden = tuple(i for i in top.entries if i in base.entries or i in base.broken)
    entries = {i: e for i, e in base.entries.items() if i not in top.broken} | top.entries
    broken = {i: m for i, m in base.broken.items() if i not in top.entries} | top.broken
    return Layered(dict(sorted(entries.items())), broken, overridden, mine)


def select(args: list[str], directory: Path | None = None) -> tuple[Registry, list[str]]:
    """The registry that `[ID|FILE]...` names, and the ids (all when none is named): a FILE is taken
    within its own folder; every id must exist (a broken file counts, to be reported)."""
    files = [a for a in args if is_entry_file(a)]
    folders = {Path(f).resolve().parent for f in files}
    if len(folders) > 1 or (files and len(files) != len(args)):
        raise UsageError(
            "name entry files from one registry folder at a time (or ids only)",
            hint="give ids only, or entry files from one folder",
        )
    reg = load(Path(files[0]).parent if files else directory)
    only = [Path(a).stem if a in files else a for a in args]
    for entry_id in only:
        if entry_id not in reg.entries and entry_id not in reg.broken:
            reg.get(entry_id)  # raises: no such entry, with suggestions
    return reg, only
