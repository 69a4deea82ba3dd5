"""A drafter folder, read once: `read_drafter` builds the one `Drafter` object (config, files, the
dialect's reading and canonical tensor names) that convert, lint and every verify engine work from."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput, UsageError
from ..fsutil import read_json
from . import formats
from .config import validate_config
from .formats.base import NAME_THE_DIALECT, Reading, ReadOptions
from .problems import check_tensors
from .spec import DrafterSpec
from .tensors import Checkpoint, TensorRef

if TYPE_CHECKING:
    import torch


@dataclass
class Drafter:
    """A drafter as read: `refs`, `load` and `state` speak the canonical names (the drafter module's own),
    whatever the dialect on disk. `checkpoint` is local or remote (`hub.remote.RemoteCheckpoint`)."""

    path: Path | str
    config: dict
    checkpoint: Checkpoint
    reading: Reading
    options: ReadOptions = field(default_factory=ReadOptions)

    @property
    def spec(self) -> DrafterSpec:
        return self.reading.spec

    @property
    def has_weights(self) -> bool:
        return not isinstance(self.checkpoint, NoWeights)

    @property
    def dialect(self) -> str | None:
        return self.reading.dialect

    @cached_property
    def refs(self) -> dict[str, TensorRef]:
        renames = self.reading.renames
        return {renames[src]: ref for src, ref in self.checkpoint.refs.items() if src in renames}

    @cached_property
    def _sources(self) -> dict[str, str]:
        return {canonical: src for src, canonical in self.reading.renames.items()}

    def source_name(self, canonical: str) -> str:
        return self._sources.get(canonical, canonical)

    def load(self, canonical: str) -> "torch.Tensor":
        return self.checkpoint.load(self._sources[canonical])

    def state(self) -> dict[str, "torch.Tensor"]:
        """Every mapped tensor, loaded, under its canonical name."""
        renames = self.reading.renames
        return {renames[src]: t for src, t in self.checkpoint.load_all().items() if src in renames}


class NoWeights:
    """The `Checkpoint` interface for a config alone (a trainer's template): no tensors, nothing to load."""

    def __init__(self):
        self.refs: dict[str, TensorRef] = {}
        self.metadata: dict[str, str] = {}
        self.files: list[Path] = []

    def load(self, name: str):
        raise UsageError(f"{name}: a config alone has no weights to load", hint="lint the drafter's folder instead")

    def load_all(self) -> dict:
        return {}

    def check_index(self) -> None:
        pass


def interpret(config: dict, checkpoint, dialect: str | None, opts: ReadOptions) -> Reading:
    """The one detect-then-read: the dialect (detected unless given) maps the files to canonical names. A
    config alone is detected from its keys, and read without a dialect when they name none."""
    dialect = dialect or opts.dialect
    if isinstance(checkpoint, NoWeights):
        name = dialect or formats.detect_config(config)
    else:
        name = dialect or formats.detect(config, set(checkpoint.refs), checkpoint.metadata)
    reading = (
        formats.get(name).read(config, checkpoint, opts)
        if name
        else formats.read_undetermined(config, checkpoint, opts)
    )
    spec = reading.spec
    if "model_type" not in spec.layer_config:
        spec.layer_config["model_type"] = {"mla": "deepseek_v3"}.get(spec.arch, spec.arch)
        reading.decisions.append(f"model_type absent: {spec.layer_config['model_type']!r} from the architecture")
    return reading


def read_drafter(
    source: Path, dialect: str | None = None, opts: ReadOptions | None = None, strict: bool = True, view=None
) -> Drafter:
    """Config + headers -> a Drafter; with `strict`, every tensor must fit the config. `view(config)`, where
    given, is the config as a reader other than eaglezoo's sees it (doctor: the keys an engine reads)."""
    if not source.is_dir():
        raise UsageError(f"{source}: not a directory", hint="name the drafter's folder (with its config.json)")
    opts = opts or ReadOptions()
    path = source / "config.json"
    config = validate_config(read_json(path, "drafter config"), str(path), "drafter")
    config = view(config) if view else config
    checkpoint = Checkpoint(source)
    checkpoint.check_index()
    drafter = Drafter(source, config, checkpoint, interpret(config, checkpoint, dialect, opts), opts)
    if strict:
        _refuse_misfits(drafter)
    return drafter


def read_config(path: Path, dialect: str | None = None, opts: ReadOptions | None = None) -> Drafter:
    """A drafter's config alone (a trainer's template, a config quoted in an issue): the spec and the shapes
    it implies come from the config; nothing is checked against tensors."""
    opts = opts or ReadOptions()
    config = validate_config(read_json(path, "drafter config"), str(path), "drafter")
    if not formats.looks_like_drafter(config):
        raise BadInput(
            f"{path}: not an EAGLE drafter config (no draft vocabulary, EAGLE keys or EAGLE architecture)",
            hint="give a drafter's config.json; a target model's config is passed with --target",
            code="not-a-drafter",
        )
    checkpoint = NoWeights()
    return Drafter(path, config, checkpoint, interpret(config, checkpoint, dialect, opts), opts)


def _refuse_misfits(drafter: Drafter) -> None:
    problems = check_tensors(drafter.spec, drafter.refs)
    if not problems:
        return
    unexpected = [p.message.split()[1] for p in problems if p.code == "unexpected"]
    if unexpected:
        raise BadInput(
            f"{len(unexpected)} tensor(s) neither mapped nor dropped with a reason: "
            f"{', '.join(drafter.source_name(n) for n in unexpected)}",
            hint=f"if the dialect was misdetected, {NAME_THE_DIALECT}",
        )
    first = problems[0]
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    raise BadInput(first.message + more, hint=first.hint or None)
