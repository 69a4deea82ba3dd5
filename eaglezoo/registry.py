"""The registry: one YAML file per published drafter (schema in `registry_schema`): loading with
file:line errors, lookup, and the consistency checks beyond the schema. `status: verified` is
accepted only with a committed verify report that really ran and passed its floors.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from .engines import engine_support
from .errors import BadInput, UsageError
from .fsutil import inside, regular_file
from .hardware import RUNNERS
from .registry_schema import Entry, Repo  # noqa: F401  (Repo: re-exported for sources)
from .spec import AuxLayers

SHA40 = re.compile(r"^[0-9a-f]{40}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
ENGINES = ("vllm", "sglang", "tensorrt-llm")


def default_dir() -> Path:
    env = os.environ.get("EAGLEZOO_REGISTRY")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "registry"


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


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; an entry that repeats a key is refused."""

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
                    None, None, f"duplicate key {key!r}, first on line {first_line[key]}", key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1


def load_entry(path: Path) -> Entry:
    regular_file(path, "registry entry")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not UTF-8 text") from None
    try:
        node = yaml.compose(text)
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except RecursionError:
        raise BadInput(f"{path}: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise BadInput(f"{where}: invalid YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}:1: a registry entry must be a mapping")
    try:
        entry = Entry.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(x for x in err["loc"] if not isinstance(x, str) or not x.startswith("function-"))
        line = _line_of(node, loc) or 1
        field = ".".join(str(x) for x in loc) or "entry"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise BadInput(f"{path}:{line}: {field}: {err['msg']}{more}") from None
    if entry.id != path.stem:
        raise BadInput(f"{path}:{_line_of(node, ('id',)) or 1}: id {entry.id!r} must equal the file name {path.stem!r}")
    return entry


@dataclass
class Registry:
    """The entries of one registry directory, and the files that failed to load (name -> message)."""

    directory: Path
    entries: dict[str, Entry]
    broken: dict[str, str]

    @property
    def root(self) -> Path:
        """Paths inside entries (drafter.path, status.report, prompts) are relative to this folder."""
        return self.directory.parent

    def get(self, entry_id: str) -> Entry:
        """The entry with exactly this id (file name and `id:` agree, so dots are part of the id)."""
        if entry_id in self.entries:
            return self.entries[entry_id]
        if entry_id in self.broken:
            raise BadInput(self.broken[entry_id])
        close = [e for e in self.entries if entry_id.lower() in e.lower()]
        raise UsageError(f"no registry entry {entry_id!r} in {self.directory}",
                         hint=f"did you mean {', '.join(close[:3])}?" if close else "eaglezoo registry list shows them")

    def path(self, relative: str, what: str) -> Path:
        return inside(self.root, relative, what)


def load(directory: Path | None = None) -> Registry:
    """Every entry of a registry directory; a malformed file is kept aside, by name, not fatal."""
    directory = Path(directory or default_dir())
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
    return Registry(directory, entries, broken)


def is_entry_file(arg: str) -> bool:
    return arg.endswith(".yaml") and Path(arg).is_file()


def lookup(id_or_file: str, directory: Path | None = None) -> tuple[Entry, Registry]:
    """A registry id in `directory`, or a path to an entry file (whose registry is its own folder)."""
    if is_entry_file(id_or_file):
        path = Path(id_or_file)
        reg = load(path.parent)
        return reg.get(path.stem), reg
    reg = load(directory)
    return reg.get(id_or_file), reg


def check_entry(entry: Entry, reg: Registry) -> list[str]:
    """Consistency beyond the schema; returns problems (empty when consistent)."""
    problems = []
    f = entry.flags
    if entry.eagle_version == "3.1" and not (f.fc_norm and f.norm_output):
        problems.append("eagle_version 3.1 needs fc_norm and norm_output true")
    if entry.eagle_version == "3" and (f.fc_norm or f.norm_output or f.norm_before_fc):
        problems.append("eagle_version 3 cannot have a 3.1 flag set")
    if f.fc_norm and f.norm_before_fc:
        problems.append("fc_norm and norm_before_fc are mutually exclusive")
    if entry.draft_vocab_size and entry.target_vocab_size and entry.draft_vocab_size > entry.target_vocab_size:
        problems.append("draft_vocab_size exceeds target_vocab_size")
    ids = entry.aux_layers.ids
    if ids and entry.target_num_layers:
        boundary = AuxLayers(ids=tuple(ids), convention=entry.aux_layers.convention).boundary()
        if not all(0 <= i <= entry.target_num_layers for i in boundary):
            problems.append(f"aux ids select boundary {boundary}, outside 0..{entry.target_num_layers}")
    for name, digest in entry.files.items():
        if not SHA256.match(digest):
            problems.append(f"files.{name}: not a sha256 hex digest")
    for repo in (entry.drafter, entry.target):
        if repo.revision and len(repo.revision) == 40 and not SHA40.match(repo.revision):
            problems.append(f"revision {repo.revision!r} looks like a sha but is not 40 hex digits")
    problems += _path_problems(entry, reg)
    computed = {e.engine: e for e in engine_support(entry.spec(), "speculators" if entry.dialect == "speculators" else "eagle31")}
    for e in entry.engines:
        floor = computed[e.engine].min_version
        if e.min_version and floor and _v(e.min_version) < _v(floor):
            problems.append(f"engines.{e.engine}.min_version {e.min_version} is below {floor}, which its flags need")
    problems += _null_problems(entry)
    if entry.hardware and entry.hardware.runner not in RUNNERS:
        problems.append(f"hardware class {entry.hardware.runner} has no CI runner (runners: {', '.join(RUNNERS)})")
    if entry.status.state == "verified" and not any(m.passed and m.report == entry.status.report for m in entry.measured):
        problems.append("status verified without a passing measurement recorded by `registry record`")
    if entry.status.state != "unverified" and not any(p.startswith("status.report") for p in problems):
        problems += _report_problems(entry, reg.path(entry.status.report, "status.report"))
    return problems


def _path_problems(entry: Entry, reg: Registry) -> list[str]:
    """Every path in an entry must stay inside the registry's repository and exist."""
    problems = []
    paths = {"drafter.path": (entry.drafter.path, Path.is_dir), "target.path": (entry.target.path, Path.is_dir),
             "prompts": (entry.prompts, Path.is_file), "status.report": (entry.status.report, Path.is_file)}
    paths |= {f"measured.{i}.report": (m.report, Path.is_file) for i, m in enumerate(entry.measured)}
    for what, (relative, exists) in paths.items():
        if relative is None:
            continue
        try:
            if not exists(reg.path(relative, what)):
                problems.append(f"{what} {relative} does not exist")
        except BadInput as exc:
            problems.append(exc.message)
    return problems


NEEDS_REASON_WHEN_NULL = ("hardware", "acceptance_floors")


def _null_problems(entry: Entry) -> list[str]:
    """A null that matters says why; a reason for a field that is set is stale."""
    problems = [f"{name} is null and null_reasons.{name} does not say why" for name in NEEDS_REASON_WHEN_NULL
                if getattr(entry, name) is None and name not in entry.null_reasons]
    problems += [f"null_reasons.{name}: {name} is set" for name in entry.null_reasons
                 if getattr(entry, name, None) is not None]
    keys = [(f.k, f.temperature) for f in entry.acceptance_floors or []]
    if len(set(keys)) != len(keys):
        problems.append("acceptance_floors: two floors for the same K and temperature")
    return problems


def _report_problems(entry: Entry, report_path: Path) -> list[str]:
    try:
        report = json.loads(regular_file(report_path, "status.report").read_text(encoding="utf-8"))
    except BadInput as exc:
        return [exc.message]
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return [f"status.report {entry.status.report} is not valid JSON"]
    if not isinstance(report, dict):
        return [f"status.report {entry.status.report} is not a JSON object"]
    problems = []
    if not isinstance(report.get("num_drafts"), int) or report["num_drafts"] <= 0:
        problems.append("status.report measured no drafts")
    if entry.status.state == "verified" and report.get("failures"):
        problems.append("status verified, but the report lists failures")
    thresholds = report.get("thresholds") or {}
    if entry.status.state == "verified" and not (thresholds.get("min_acceptance") or thresholds.get("min_al")):
        problems.append("status verified, but the report applied no floors")
    if report.get("registry_id") not in (None, entry.id):
        problems.append(f"status.report is a report for {report['registry_id']}")
    return problems


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


def check_all(reg: Registry, only: list[str] | None = None) -> dict[str, list[str]]:
    """Problems per entry id (a file that does not load is a problem under its file name)."""
    owners: dict[str, list[str]] = {}
    for entry_id, entry in reg.entries.items():
        if entry.drafter.repo:
            owners.setdefault(entry.drafter.repo, []).append(entry_id)
    results = {name: [message] for name, message in reg.broken.items() if not only or name in only}
    for entry_id, entry in reg.entries.items():
        if only and entry_id not in only:
            continue
        problems = check_entry(entry, reg)
        others = [o for o in owners.get(entry.drafter.repo or "", []) if o != entry_id]
        if others:
            problems.append(f"drafter repo also listed by {', '.join(others)}")
        results[entry_id] = problems
    return results


def select(args: list[str], directory: Path | None = None) -> tuple[Registry, list[str]]:
    """The registry that `[ID|FILE]...` names, and the ids (all when none is named): a FILE is taken
    within its own folder; every id must exist (a broken file counts, to be reported)."""
    files = [a for a in args if is_entry_file(a)]
    folders = {Path(f).resolve().parent for f in files}
    if len(folders) > 1 or (files and len(files) != len(args)):
        raise UsageError("name entry files from one registry folder at a time (or ids only)")
    reg = load(Path(files[0]).parent if files else directory)
    only = [Path(a).stem if a in files else a for a in args]
    for entry_id in only:
        if entry_id not in reg.entries and entry_id not in reg.broken:
            reg.get(entry_id)  # raises: no such entry, with suggestions
    return reg, only


def check_selected(args: list[str], directory: Path | None = None, online: bool = False) -> dict[str, dict]:
    """`registry check [ID|FILE]...`: problems per entry; a FILE is checked within its own folder."""
    reg, only = select(args, directory)
    results = {k: {"problems": v} for k, v in check_all(reg, only).items()}
    if online:
        from .registry_sync import pin_problems
        from .remote import check_online
        for entry_id, result in results.items():
            if entry_id in reg.entries:
                result["online"] = check_online(reg.entries[entry_id])
                result["online"]["problems"] = pin_problems(reg.entries[entry_id]) + result["online"]["problems"]
                result["problems"] += result["online"]["problems"]
    return results
