"""`registry check`: each entry's consistency beyond the schema (flags, ids, paths, floors, reports);
`--online` adds the Hub's pins and a remote lint of the published drafter."""

from __future__ import annotations

import re
from pathlib import Path

from ..checkpoint.formats.blocks import max_k
from ..checkpoint.spec import AuxLayers
from ..errors import BadInput
from ..serving import engine_support, schema_for
from ..verify.saved import read_report
from .ci import recorded_problems
from .hardware import RUNNERS
from .llamacpp import llamacpp_problems
from .load import Registry, select
from .online import check_online
from .schema import FACTS, Entry

SHA40 = re.compile(r"^[0-9a-f]{40}$")


SHA256 = re.compile(r"^[0-9a-f]{64}$")


def check_entry(entry: Entry, reg: Registry) -> list[str]:
    """Consistency beyond the schema; returns problems (empty when consistent)."""
    problems = _flag_problems(entry) + _shape_problems(entry) + _digest_problems(entry)
    problems += _path_problems(entry, reg)
    problems += _engine_problems(entry)
    problems += _null_problems(entry) + _family_problems(entry) + _requirement_problems(entry)
    if entry.hardware and entry.hardware.runner not in RUNNERS:
        problems.append(f"hardware class {entry.hardware.runner} has no CI runner (runners: {', '.join(RUNNERS)})")
    problems += recorded_problems(entry, reg)
    if entry.status.state != "unverified" and not any(p.startswith("status.report") for p in problems):
        problems += _report_problems(entry, reg.path(entry.status.report, "status.report"))
    return problems


def _requirement_problems(entry: Entry) -> list[str]:
    """A figure measured in the thinking mode the entry's requirements rule out."""
    wanted = entry.requirements.thinking
    return [
        f"{f.origin} figure {f.label()} was measured with thinking {f.conditions.thinking}, but the entry "
        f"requires thinking {wanted}: state the figure's thinking as its source does, or the requirement"
        for f in entry.figures()
        if wanted is not None and f.conditions.thinking not in (wanted, "unknown")
    ]


def _flag_problems(entry: Entry) -> list[str]:
    """The EAGLE-3 / 3.1 norm flags against the version the entry states."""
    problems = []
    f = entry.flags
    if entry.eagle_version == "3.1" and not (f.fc_norm and f.norm_output):
        problems.append("eagle_version 3.1 needs fc_norm and norm_output true")
    if entry.eagle_version == "3" and (f.fc_norm or f.norm_output or f.norm_before_fc):
        problems.append("eagle_version 3 cannot have a 3.1 flag set")
    if f.fc_norm and f.norm_before_fc:
        problems.append("fc_norm and norm_before_fc are mutually exclusive")
    return problems


def _shape_problems(entry: Entry) -> list[str]:
    """The vocabularies and the aux layers against the target's size."""
    problems = []
    if entry.draft_vocab_size and entry.target_vocab_size and entry.draft_vocab_size > entry.target_vocab_size:
        problems.append("draft_vocab_size exceeds target_vocab_size")
    ids = entry.aux_layers.ids
    if ids and entry.target_num_layers:
        boundary = AuxLayers(ids=tuple(ids), convention=entry.aux_layers.convention).boundary()
        if not all(0 <= i <= entry.target_num_layers for i in boundary):
            problems.append(f"aux ids select boundary {boundary}, outside 0..{entry.target_num_layers}")
    return problems


def _digest_problems(entry: Entry) -> list[str]:
    """File digests and revisions that look like hashes but are not."""
    problems = [f"files.{name}: not a sha256 hex digest" for name, d in entry.files.items() if not SHA256.match(d)]
    for repo in (entry.drafter, entry.target):
        if repo.revision and len(repo.revision) == 40 and not SHA40.match(repo.revision):
            problems.append(f"revision {repo.revision!r} looks like a sha but is not 40 hex digits")
    return problems


def _engine_problems(entry: Entry) -> list[str]:
    """Each engine's stated min_version against the floor its flags need."""
    computed = {e.engine: e for e in engine_support(entry.spec(), schema_for(entry.dialect))}
    problems = []
    for e in (e for e in entry.engines if e.engine in computed):  # llama.cpp: llamacpp_problems
        floor = computed[e.engine].min_version
        if e.min_version and floor and _v(e.min_version) < _v(floor):
            problems.append(f"engines.{e.engine}.min_version {e.min_version} is below {floor}, which its flags need")
    return problems + llamacpp_problems(entry)


def _path_problems(entry: Entry, reg: Registry) -> list[str]:
    """Every path in an entry must stay inside the registry's repository and exist."""
    problems = []
    paths = {
        "drafter.path": (entry.drafter.path, Path.is_dir),
        "target.path": (entry.target.path, Path.is_dir),
        "prompts": (entry.prompts, Path.is_file),
        "status.report": (entry.status.report, Path.is_file),
    }
    paths |= {f"measured.{i}.report": (m.report, Path.is_file) for i, m in enumerate(entry.measured)}
    paths |= {
        f"evidence.{fact}.source": (e.source, Path.exists)
        for fact, e in entry.evidence.items()
        if e.level == "repo-file"
    }
    for what, (relative, exists) in paths.items():
        if relative is None:
            continue
        try:
            path = reg.path(relative, what)  # in every copy: no path leaves the registry's root
        except BadInput as exc:
            problems.append(exc.message)
            continue
        if not (_may_be_elsewhere(what) and repository_only(reg, relative)) and not exists(path):
            problems.append(f"{what} {relative} does not exist")
    return problems


def _may_be_elsewhere(what: str) -> bool:
    """The paths that may name a folder of the repository (the examples); reports are kept under registry/."""
    return what in ("drafter.path", "target.path", "prompts") or what.startswith("evidence.")


def repository_only(reg: Registry, relative: str) -> bool:
    """A path outside registry/ in a copy that carries registry/ alone (shipped, updated): it names a folder of
    the eaglezoo repository (the embedded examples), checked where the repository is, not here."""
    return not reg.repository and not relative.startswith("registry/")


NEEDS_REASON_WHEN_NULL = ("hardware", "acceptance_floors", "aux_layers")


def _value(entry: Entry, name: str):
    return entry.fact(name) if name in FACTS else getattr(entry, name, None)


def _null_problems(entry: Entry) -> list[str]:
    """A null that matters says why; a reason for a field that is set is stale."""
    problems = [
        f"{name} is null and null_reasons.{name} does not say why"
        for name in NEEDS_REASON_WHEN_NULL
        if _value(entry, name) is None and name not in entry.null_reasons
    ]
    problems += [
        f"null_reasons.{name}: {name} is set" for name in entry.null_reasons if _value(entry, name) is not None
    ]
    keys = [(f.k, f.temperature, f.condition) for f in entry.acceptance_floors or []]
    if len(set(keys)) != len(keys):
        problems.append("acceptance_floors: two floors for the same K, temperature and condition")
    return problems


def _family_problems(entry: Entry) -> list[str]:
    """What a parallel drafter's own keys must agree with (docs/formats.md#family-traps): the mask token lies in the
    vocabulary, the block within the context, and the engine's K within what one block drafts."""
    if entry.family == "eagle3":
        return []
    problems = []
    if entry.family in ("dflash", "dspark") and entry.fact("flags"):
        problems.append(f"flags: a {entry.family} drafter has none of EAGLE 3.1's norm flags")
    if entry.mask_token_id is not None and entry.target_vocab_size and entry.mask_token_id >= entry.target_vocab_size:
        problems.append(
            f"mask_token_id {entry.mask_token_id} is outside the vocabulary (0..{entry.target_vocab_size - 1})"
        )
    if entry.block_size and entry.max_position_embeddings and entry.block_size > entry.max_position_embeddings:
        problems.append(
            f"block_size {entry.block_size} exceeds max_position_embeddings {entry.max_position_embeddings}"
        )
    most = max_k(entry.spec(), entry.dialect)
    problems += [
        f"engines.{e.engine}.num_speculative_tokens {e.num_speculative_tokens} is beyond the block: "
        f"block_size {entry.block_size} drafts at most {most}"
        for e in entry.engines
        if most is not None and e.num_speculative_tokens > most
    ]
    return problems


def _report_problems(entry: Entry, report_path: Path) -> list[str]:

    try:
        report = read_report(report_path, "status.report", needs="registry check")
    except BadInput as exc:
        return [exc.message]
    problems = []
    if report.num_drafts <= 0:
        problems.append("status.report measured no drafts")
    if entry.status.state == "verified" and report.failures:
        problems.append("status verified, but the report lists failures")
    thresholds = report.thresholds
    if entry.status.state == "verified" and not (thresholds.min_acceptance or thresholds.min_al):
        problems.append("status verified, but the report applied no floors")
    if report.registry_id not in (None, entry.id):
        problems.append(f"status.report is a report for {report.registry_id}")
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


def check_selected(args: list[str], directory: Path | None = None, online: bool = False) -> dict[str, dict]:
    """`registry check [ID|FILE]...`: problems per entry; a FILE is checked within its own folder."""
    reg, only = select(args, directory)
    results = {k: {"problems": v} for k, v in check_all(reg, only).items()}
    if online:
        for entry_id, result in results.items():
            if entry_id in reg.entries:
                result["online"] = check_online(reg.entries[entry_id])
                result["problems"] += result["online"]["problems"]
    return results
