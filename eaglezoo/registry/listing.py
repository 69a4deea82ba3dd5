"""What `registry list` and the site's index say of each entry beside its facts, to answer "which drafter for my
target?": the reported figure shown (the most comparable, with its K, benchmark and engine), whether each engine
serves the drafter as published or needs `eaglezoo convert` first, and, for a target no entry names, the
nearest targets that some do."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from ..errors import EaglezooError
from ..serving import serve_entry
from .schema import Entry, Reported, best_first

ENGINES = ("vllm", "sglang")
ServingState = Literal["as published", "convert first", "aux ids unknown", "not faithful", "no path"]


@dataclass(frozen=True)
class Serving:
    """One engine's path for an entry, in a word: served as published, after `convert`, with its default aux
    ids (the entry does not know the drafter's), unfaithfully (the engine lacks a norm the drafter has), or not
    at all (`why`)."""

    engine: str
    state: ServingState
    why: str | None = None

    def to_json(self) -> dict:
        return {"engine": self.engine, "state": self.state, **({"why": self.why} if self.why else {})}


def serving(entry: Entry) -> list[Serving]:
    """Each engine's path as `serve-config` and the site build it (`serving.serve_entry`, K=3)."""
    return [_serving(entry, engine) for engine in ENGINES]


def _serving(entry: Entry, engine: str) -> Serving:
    drafter, target = entry.drafter.repo or entry.drafter.path or "", entry.target.repo or entry.target.path or ""
    try:
        path = serve_entry(entry, engine, drafter, target, 3, [entry.id], entry.target_num_layers)
    except EaglezooError as exc:
        return Serving(engine, "no path", exc.message)
    unfaithful = next((w for w in path.warnings if "cannot serve this drafter faithfully" in w), None)
    if unfaithful:
        return Serving(engine, "not faithful", unfaithful)
    if path.convert_command:
        return Serving(engine, "convert first")
    return Serving(engine, "aux ids unknown" if path.aux_layers_default else "as published")


def serving_summary(entry: Entry) -> str:
    """`vllm: as published; sglang: convert first`."""
    return "; ".join(f"{s.engine}: {s.state}" for s in serving(entry))


def shown_figure(entry: Entry) -> Reported | None:
    """The reported acceptance length a listing shows: the most comparable (schema.best_first)."""
    ranked = best_first(entry.reported)
    return ranked[0] if ranked else None


def target_name(entry: Entry) -> str:
    return entry.target.repo or entry.target.path or ""


def for_target(entries: list[Entry], asked: str | None) -> list[Entry]:
    """The entries whose target contains `asked` (case-insensitive); all when none is asked."""
    if not asked:
        return list(entries)
    return [e for e in entries if asked.lower() in target_name(e).lower()]


# Suffixes that name a packaging of the same weights, not another model: a drafter trained on the bf16 target
# is the one to try on its FP8 or AWQ copy (`verify` says how well it holds).
PACKAGING = re.compile(
    r"[-_.](fp8|fp4|nvfp4|mxfp4|int4|int8|w4a16|w8a8|w4a8|awq|gptq|bf16|fp16|gguf|dynamic|"
    r"quantized|quant)(?=$|[-_.])"
)


def _normal(name: str) -> str:
    """A target's name without its owner, its packaging suffixes or the spelling of its separators."""
    base = name.lower().rsplit("/", 1)[-1]
    previous = None
    while previous != base:  # "-fp8-dynamic": each suffix in turn
        previous, base = base, PACKAGING.sub("", base)
    return re.sub(r"[-_\s]+", "-", base).strip("-")


def nearest_targets(entries: list[Entry], asked: str, n: int = 3) -> list[str]:
    """The targets some entry names that are nearest `asked`: the same model under another owner or packaging
    (an FP8 copy, `-Instruct` added or left out) where there is one, else the closest spellings (difflib)."""
    targets = sorted({target_name(e) for e in entries if target_name(e)})
    normal = {t: _normal(t) for t in targets}
    want = _normal(asked)

    def likeness(t: str) -> float:
        return difflib.SequenceMatcher(None, want, normal[t]).ratio()

    same = sorted(
        (t for t in targets if want and normal[t] and (want in normal[t] or normal[t] in want)),
        key=likeness,
        reverse=True,
    )
    if same:
        return same[:n]
    close = difflib.get_close_matches(want, list(normal.values()), n=n, cutoff=0.6)
    return list(dict.fromkeys(t for c in close for t in targets if normal[t] == c))[:n]
