"""`registry sync`: what the publisher's files state about each entry, as a diff against its YAML.

From the Hub (evidence level hub-file): for the drafter and the target, the current commit of the tracked
revision, every file's sha256 and size, the drafter's config.json and safetensors headers (range requests,
`remote.RemoteCheckpoint`), the target's config.json and headers. From a trainer template (`--template`,
level publisher-template, or another level a quoted config deserves): what the config states. A fact the
files state and the entry lacks is `new`; one the entry states otherwise is `differs` (a finding, never
silently overwritten); one the entry holds on weaker evidence and the files confirm is `confirmed` (the
level is upgraded); one the entry holds on stronger evidence is `disagrees` (reported, never written); a pin
that moved or vanished is `moved` / `gone`. `--write` records the values with their evidence by minimal
edits (`yaml_edit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoint.formats.base import ReadOptions
from ..checkpoint.read import interpret, read_config
from ..checkpoint.tensors import ST_DTYPES
from ..errors import EaglezooError, HubError, HubSilent
from ..fsutil import atomic_write_text
from ..hub.remote import RemoteCheckpoint
from ..hub.state import Snapshot, snapshot
from .hardware import plan_hardware
from .load import select
from .schema import EVIDENCE_LEVELS, FACTS, Entry, EvidenceLevel
from .yaml_edit import set_values

FLAGS = ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual")
SHA = 40


@dataclass
class Fact:
    field: str  # dotted path in the entry
    value: Any
    source: str  # "repo@sha file", or the template's URL
    level: EvidenceLevel = "hub-file"
    confirms: bool = True  # False: the value is partly the entry's own (a convention the file does not state)


@dataclass
class Difference:
    field: str
    kind: str  # new | differs | confirmed | disagrees | moved | gone
    registry: Any
    hub: Any  # the files' value (the Hub's, or the template's)
    source: str
    level: EvidenceLevel = "hub-file"


@dataclass
class EntrySync:
    entry_id: str
    differences: list[Difference] = field(default_factory=list)
    error: str | None = None
    written: bool = False


def sync_entry(entry: Entry) -> EntrySync:
    result = EntrySync(entry.id)
    if not entry.drafter.repo:
        return result
    try:
        drafter = _current(entry.drafter.repo, entry.drafter.revision, "drafter", result)
        target = _current(entry.target.repo, entry.target.revision, "target", result) if entry.target.repo else None
        facts = drafter_facts(drafter, entry) + (target_facts(target, entry) if target else [])
    except HubSilent:  # the next entry would wait as long: the command stops
        raise
    except EaglezooError as exc:
        result.error = exc.message
        return result
    result.differences += differences_from(entry, facts)
    return result


def sync_template(entry: Entry, template: Path, source: str, level: EvidenceLevel) -> EntrySync:
    """What a trainer template (a config alone) states about the entry's drafter, at the level it deserves."""

    result = EntrySync(entry.id)
    opts = ReadOptions(allow_missing_aux=True, trust_stored_flags=True)
    try:
        drafter = read_config(template, None, opts)
    except EaglezooError as exc:
        result.error = f"{template}: {exc.message}"
        return result
    # a config alone does not settle the dialect: TorchSpec and SpecForge templates share an architecture, and
    # the tensor names (which only the published files have) decide
    facts = [f for f in config_facts(drafter.reading, drafter.config, source, level) if f.field != "dialect"]
    result.differences += differences_from(entry, facts)
    return result


def differences_from(entry: Entry, facts: list[Fact]) -> list[Difference]:
    stated = entry.model_dump(mode="json")
    return [d for f in facts if (d := _compare(entry, stated, f))]


def _current(repo: str, pinned: str | None, role: str, result: EntrySync) -> Snapshot:
    """The head of what the entry tracks (its branch or tag, else main); a sha pin is compared to it."""
    is_sha = bool(pinned) and len(pinned) == SHA
    head = snapshot(repo, None if is_sha or not pinned else pinned)
    source = f"{head.at} (head of {pinned if pinned and not is_sha else 'main'})"
    if pinned == head.sha:
        return head
    if is_sha:
        try:
            snapshot(repo, pinned)
            kind = "moved"
        except HubError:
            kind = "gone"
        result.differences.append(Difference(f"{role}.revision", kind, pinned, head.sha, source))
    else:
        result.differences.append(
            Difference(f"{role}.revision", "new" if pinned is None else "differs", pinned, head.sha, source)
        )
    return head


def drafter_facts(snap: Snapshot, entry: Entry) -> list[Fact]:

    ckpt = RemoteCheckpoint(snap.repo, snap.sha)
    # the facts are what the files state; the entry only names the convention of ids stored without one
    opts = ReadOptions(allow_missing_aux=True, registry_convention=entry.aux_layers.convention)
    facts = config_facts(interpret(ckpt.config, ckpt, None, opts), ckpt.config, f"{snap.at} config.json", "hub-file")
    if snap.licence:
        facts.append(Fact("licence", snap.licence, f"{snap.at} README.md (card metadata)"))
    facts.append(Fact("files", snap.hashes(), f"{snap.at} (file listing, LFS sha256)"))
    return facts


def config_facts(reading, cfg: dict, at: str, level: EvidenceLevel) -> list[Fact]:
    """The facts a drafter config states, as read by its dialect (a config alone names none: no dialect fact)."""
    spec, stated = reading.spec, _keys(cfg)
    facts = [Fact("dialect", reading.dialect, f"{at} (detected)", level)] if reading.dialect else []
    facts += [
        Fact(name, getattr(spec, attr), at, level)
        for name, attr in (
            ("hidden_size", "hidden_size"),
            ("target_hidden_size", "target_hidden_size"),
            ("target_vocab_size", "vocab_size"),
            ("draft_vocab_size", "draft_vocab_size"),
        )
    ]
    facts += [Fact(f"flags.{name}", getattr(spec, name), at, level) for name in FLAGS if name in stated]
    if spec.max_position_embeddings:
        facts.append(Fact("max_position_embeddings", spec.max_position_embeddings, at, level))
    rope = {k: v for k, v in spec.layer_config.items() if k in ("rope_theta", "rope_scaling", "rope_parameters")}
    if rope:
        facts.append(Fact("rope", rope, at, level))
    fields = spec.family_fields.stated() if spec.family_fields else {}
    facts += [Fact(name, fields[name], at, level) for name in ("block_size", "mask_token_id") if name in fields]
    if spec.aux is not None:  # ids in the dialect's own convention, as its config states them
        own = reading.aux_stated_by == "config"  # else the convention is the entry's: compared, never confirmed
        facts += [
            Fact("aux_layers.ids", list(spec.aux.ids), at, level, own),
            Fact("aux_layers.convention", spec.aux.convention, at, level, own),
        ]
    return facts


def target_facts(snap: Snapshot, entry: Entry) -> list[Fact]:

    ckpt = RemoteCheckpoint(snap.repo, snap.sha, need_weights=False)
    cfg = ckpt.config.get("text_config") or ckpt.config
    at = f"{snap.at} config.json"
    facts = [Fact("target_remote_code", "auto_map" in ckpt.config, at)]
    if cfg.get("num_hidden_layers"):
        facts.append(Fact("target_num_layers", cfg["num_hidden_layers"], at))
    if not ckpt.refs:  # weights in another format: sizes stay unknown, and so does the hardware class
        return facts
    params, nbytes, dtype = _weights(ckpt)
    headers = f"{snap.at} safetensors headers ({len(ckpt.files)} files)"
    facts += [
        Fact("target_parameters", params, headers),
        Fact("target_weight_bytes", nbytes, headers),
        Fact("target_dtype", dtype, headers),
    ]
    if entry.hardware is None or entry.hardware.recomputable:
        source = f"registry sync: {nbytes / 1e9:.1f} GB of weights in {headers}, by the docs/registry.md rule"
        hardware, why = plan_hardware(nbytes, {**ckpt.config, **cfg}, source)  # quantization_config sits on top
        facts.append(Fact("hardware", hardware.model_dump() if hardware else None, why or source))
    return facts


def _weights(ckpt) -> tuple[int, int, str]:
    """Parameters, bytes and the dtype holding most bytes, from the headers alone."""
    by_dtype: dict[str, int] = {}
    params = 0
    for ref in ckpt.refs.values():
        params += math.prod(ref.shape)
        by_dtype[ref.dtype] = by_dtype.get(ref.dtype, 0) + ref.nbytes
    main = max(by_dtype, key=by_dtype.get) if by_dtype else "BF16"
    return params, sum(by_dtype.values()), ST_DTYPES.get(main, (main.lower(),))[0]


def _keys(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    return set()


def _compare(entry: Entry, stated: dict, fact: Fact) -> Difference | None:
    value = _get(stated, fact.field)
    held = entry.evidence.get(fact.field.split(".")[0])
    stronger = held is not None and held.rank < EVIDENCE_LEVELS.index(fact.level)
    if value == fact.value:
        weaker = (
            fact.confirms
            and fact.field.split(".")[0] in FACTS
            and (held is None or held.rank > EVIDENCE_LEVELS.index(fact.level))
        )
        return Difference(fact.field, "confirmed", value, fact.value, fact.source, fact.level) if weaker else None
    kind = "disagrees" if stronger else "new" if value in (None, {}) else "differs"
    return Difference(fact.field, kind, value, fact.value, fact.source, fact.level)


def _get(data: dict, dotted: str) -> Any:
    for key in dotted.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def write_entry(path: Path, entry: Entry, differences: list[Difference]) -> bool:
    """Records the files' values with their evidence; True when the file changed. A fact held on stronger
    evidence (`disagrees`) is never written."""

    written = [d for d in differences if d.kind != "disagrees"]
    changes: dict[tuple[str, ...], Any] = {tuple(d.field.split(".")): d.hub for d in written}
    if not changes:
        return False
    evidence = {k: v.model_dump() for k, v in entry.evidence.items()}
    for d in written:
        if d.field.split(".")[0] in FACTS:
            evidence[d.field.split(".")[0]] = {"level": d.level, "source": d.source}
    if evidence != {k: v.model_dump() for k, v in entry.evidence.items()}:
        changes[("evidence",)] = evidence
    known = [d.field for d in written if d.hub is not None]
    filled = set(known) | {field.split(".")[0] for field in known}
    reasons = {k: v for k, v in entry.null_reasons.items() if k not in filled}
    reasons |= {d.field: d.source for d in written if d.hub is None}  # e.g. a target too big for any runner
    if reasons != entry.null_reasons:
        changes[("null_reasons",)] = reasons
    text = path.read_text(encoding="utf-8")
    new = set_values(text, changes, str(path))
    atomic_write_text(path, new)
    return new != text


def sync_selected(
    args: list[str], directory: Path | None, write: bool, template: tuple[Path, str, EvidenceLevel] | None = None
) -> list[EntrySync]:
    """Sync the selected entries from the Hub, or one entry from a template (path, source URL, level)."""

    reg, only = select(args, directory)
    results = [EntrySync(name, error=message) for name, message in reg.broken.items() if not only or name in only]
    for entry_id, entry in reg.entries.items():
        if only and entry_id not in only:
            continue
        result = sync_template(entry, *template) if template else sync_entry(entry)
        if write and result.differences:
            result.written = write_entry(reg.directory / f"{entry_id}.yaml", entry, result.differences)
        results.append(result)
    return results
