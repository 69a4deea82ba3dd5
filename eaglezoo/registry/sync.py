"""`registry sync`: what the Hub's files state about each entry, as a diff against its YAML.

For the drafter and the target: the current commit of the tracked revision, every file's sha256 and
size, the drafter's config.json and safetensors headers (range requests, `remote.RemoteCheckpoint`),
the target's config.json and headers. A fact the files state and the entry lacks is `new`; one the
entry states otherwise is `differs` (a finding, never silently overwritten); a pin that moved or
vanished is `moved` / `gone`. `--write` records the Hub's values, each with its source in
`provenance`, by minimal edits (`yaml_edit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoint.tensors import DTYPE_NAMES
from ..errors import EaglezooError, HubError, HubSilent
from ..fsutil import atomic_write_text
from ..hub.state import Snapshot, snapshot
from .hardware import plan_hardware
from .schema import Entry

FLAGS = ("fc_norm", "norm_output", "norm_before_fc", "norm_before_residual")
SHA = 40


@dataclass
class Fact:
    field: str  # dotted path in the entry
    value: Any
    source: str  # "repo@sha file"


@dataclass
class Difference:
    field: str
    kind: str  # new | differs | moved | gone
    registry: Any
    hub: Any
    source: str


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
    stated = entry.model_dump(mode="json")
    result.differences += [d for f in facts if (d := _compare(stated, f))]
    return result


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
        result.differences.append(Difference(f"{role}.revision", "new" if pinned is None else "differs",
                                             pinned, head.sha, source))
    return head


def drafter_facts(snap: Snapshot, entry: Entry) -> list[Fact]:
    from ..checkpoint.formats.base import ReadOptions
    from ..checkpoint.read import interpret
    from ..hub.remote import RemoteCheckpoint

    ckpt = RemoteCheckpoint(snap.repo, snap.sha)
    cfg = ckpt.config
    # the facts are what the files state; the entry only names the convention of ids stored without one
    opts = ReadOptions(allow_missing_aux=True, registry_convention=entry.aux_layers.convention)
    reading = interpret(cfg, ckpt, None, opts)
    spec, dialect = reading.spec, reading.dialect
    stated = _keys(cfg)
    at = f"{snap.at} config.json"
    facts = [Fact("dialect", dialect, f"{at} (detected)"), Fact("hidden_size", spec.hidden_size, at),
             Fact("target_hidden_size", spec.target_hidden_size, at), Fact("target_vocab_size", spec.vocab_size, at),
             Fact("draft_vocab_size", spec.draft_vocab_size, at)]
    facts += [Fact(f"flags.{name}", getattr(spec, name), at) for name in FLAGS if name in stated]
    if spec.max_position_embeddings:
        facts.append(Fact("max_position_embeddings", spec.max_position_embeddings, at))
    rope = {k: v for k, v in spec.layer_config.items() if k in ("rope_theta", "rope_scaling", "rope_parameters")}
    if rope:
        facts.append(Fact("rope", rope, at))
    if spec.aux is not None:  # ids in the dialect's own convention, as its config states them
        facts += [Fact("aux_layers.ids", list(spec.aux.ids), at), Fact("aux_layers.convention", spec.aux.convention, at)]
    if snap.licence:
        facts.append(Fact("licence", snap.licence, f"{snap.at} README.md (card metadata)"))
    facts.append(Fact("files", snap.hashes(), f"{snap.at} (file listing, LFS sha256)"))
    return facts


def target_facts(snap: Snapshot, entry: Entry) -> list[Fact]:
    from ..hub.remote import RemoteCheckpoint

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
    facts += [Fact("target_parameters", params, headers), Fact("target_weight_bytes", nbytes, headers),
              Fact("target_dtype", dtype, headers)]
    if entry.hardware is None or entry.hardware.recomputable:
        source = (f"registry sync: {nbytes / 1e9:.1f} GB of weights in {headers}, by the docs/registry.md rule")
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
    return params, sum(by_dtype.values()), DTYPE_NAMES.get(main, (main.lower(),))[0]


def _keys(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    return set()


def _compare(entry: dict, fact: Fact) -> Difference | None:
    stated = _get(entry, fact.field)
    if stated == fact.value:
        return None
    return Difference(fact.field, "new" if stated in (None, {}) else "differs", stated, fact.value, fact.source)


def _get(data: dict, dotted: str) -> Any:
    for key in dotted.split("."):
        data = data.get(key) if isinstance(data, dict) else None
    return data


def write_entry(path: Path, entry: Entry, differences: list[Difference]) -> bool:
    """Records the Hub's values with their sources; True when the file changed."""
    from .yaml_edit import set_values

    changes: dict[tuple[str, ...], Any] = {}
    provenance = dict(entry.provenance)
    for d in differences:
        changes[tuple(d.field.split("."))] = d.hub
        provenance[d.field] = d.source
    if not changes:
        return False
    if any(d.field.startswith("aux_layers.") for d in differences):
        changes[("aux_layers", "source")] = next(d.source for d in differences if d.field.startswith("aux_layers."))
    changes[("provenance",)] = provenance
    filled = {d.field for d in differences if d.hub is not None}
    reasons = {k: v for k, v in entry.null_reasons.items() if k not in filled}
    reasons |= {d.field: d.source for d in differences if d.hub is None}  # e.g. a target too big for any runner
    if reasons != entry.null_reasons:
        changes[("null_reasons",)] = reasons
    text = path.read_text(encoding="utf-8")
    new = set_values(text, changes, str(path))
    atomic_write_text(path, new)
    return new != text


def sync_selected(args: list[str], directory: Path | None, write: bool) -> list[EntrySync]:
    from .load import select

    reg, only = select(args, directory)
    results = [EntrySync(name, error=message) for name, message in reg.broken.items() if not only or name in only]
    for entry_id, entry in reg.entries.items():
        if only and entry_id not in only:
            continue
        result = sync_entry(entry)
        if write and result.differences:
            result.written = write_entry(reg.directory / f"{entry_id}.yaml", entry, result.differences)
        results.append(result)
    return results
