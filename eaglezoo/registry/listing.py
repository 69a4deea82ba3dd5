"""What `registry list` and the site's index say of each entry beside its facts, to answer "which drafter for my
target?": the reported figure shown (the most comparable, with its K, benchmark and engine), each figure beside the
figures of the same target taken under the same conditions (`compared`, conditions.differences: like with like,
else what differs), whether each engine serves the drafter as published or needs `eaglezoo convert` first, and,
for a target no entry names, the nearest targets that some do."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from ..errors import EaglezooError
from ..hub.card_figures import CardComparison, CardFigure
from ..names import SERVER_ENGINES
from ..serving import serve_entry
from .conditions import Figure, differences
from .llamacpp import llamacpp_serving
from .schema import Entry, Reported, best_first

ServingState = Literal[
    "as published", "convert first", "aux ids unknown", "not faithful", "no path", "listed", "converts", "config unread"
]


@dataclass(frozen=True)
class Serving:
    """One engine's path for an entry, in a word: served as published, after `convert`, with its default aux
    ids (the entry does not know the drafter's), unfaithfully (the engine lacks a norm the drafter has), or not
    at all (`why`)."""

    engine: str
    state: ServingState
    why: str | None = None
    evidence: str | None = None  # llama.cpp: its own list of drafters, or eaglezoo's GGUF path (registry/llamacpp.py)

    def to_json(self) -> dict:
        return {
            "engine": self.engine,
            "state": self.state,
            **({"why": self.why} if self.why else {}),
            **({"evidence": self.evidence} if self.evidence else {}),
        }


def serving(entry: Entry) -> list[Serving]:
    """Each engine's path as `serve-config` and the site build it (`serving.serve_entry`, K=3); llama.cpp's with
    its evidence (`listed` by llama.cpp itself, `converts` by eaglezoo's GGUF path, else why not)."""
    llama = llamacpp_serving(entry)
    return [
        *(_serving(entry, engine) for engine in SERVER_ENGINES),
        Serving("llamacpp", llama.state, llama.why, llama.evidence),
    ]


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


@dataclass(frozen=True)
class Compared:
    """One figure beside the others of its target: the figures it can be compared with (the same metric,
    definition and conditions), and, where none can, the nearest figure of its metric and what differs from it."""

    figure: Figure
    comparable: tuple[Figure, ...]
    nearest: Figure | None
    differs: tuple[str, ...]

    def to_json(self) -> dict:
        return {
            **_figure_json(self.figure),
            "comparable_with": [_name(f) for f in self.comparable],
            "nearest": _name(self.nearest) if self.nearest else None,
            "differs": list(self.differs),
        }


def _name(f: Figure) -> str:
    return f"{f.entry_id} ({f.origin})"


def _figure_json(f: Figure) -> dict:
    return {
        "entry": f.entry_id,
        "origin": f.origin,
        "metric": f.metric,
        "definition": f.definition,
        "value": f.value,
        "label": f.label(),
        "conditions": f.conditions.model_dump(mode="json"),
    }


def compared(entries: list[Entry]) -> list[Compared]:
    """Every figure of these entries beside the other figures of the same target and metric (a broken setup's
    is compared with nothing), in the entries' order."""
    figures = [(target_name(e), f) for e in entries for f in e.figures()]
    return [_compared(f, [g for t, g in figures if t == target and _rivals(f, g)]) for target, f in figures]


def _rivals(f: Figure, g: Figure) -> bool:
    return g is not f and g.metric == f.metric and not (f.broken or g.broken)


def _compared(f: Figure, rivals: list[Figure]) -> Compared:
    differs = {id(g): differences(f, g) for g in rivals}
    same = tuple(g for g in rivals if not differs[id(g)])
    if same or not rivals:
        return Compared(f, same, None, ())
    # the nearest of another entry's figures (what a user chooses between), else of the entry's own
    nearest = min(rivals, key=lambda g: (g.entry_id == f.entry_id, len(differs[id(g)])))
    return Compared(f, (), nearest, tuple(differs[id(nearest)]))


def side_by_side(rows: list[Compared]) -> list[list[Compared]]:
    """The figures that can be compared, in groups of one metric and one set of conditions (each group's every
    figure comparable with every other), in the order first met; a figure comparable with none is in no group."""
    groups: list[list[Compared]] = []
    for row in rows:
        if not row.comparable:
            continue
        group = next((g for g in groups if all(x.figure in row.comparable for x in g)), None)
        if group is None:
            groups.append([row])
        else:
            group.append(row)
    return [g for g in groups if len(g) > 1]


def beside_run(run: Figure, entries: list[Entry]) -> CardComparison:
    """A run's figure (`registry record`'s shape: ci.measured_conditions) beside every figure of the same metric that
    these entries (its target's) hold: the comparable ones side by side, the others apart with what differs: the
    rule `compared` applies to the registry's own figures, for the model card."""
    rivals = [g for e in entries for g in e.figures() if _rivals(run, g)]
    shown = [CardFigure(_name(g), g.label(), tuple(differences(run, g))) for g in rivals]
    return CardComparison(
        measured=run.label(),
        comparable=tuple(f for f in shown if not f.differs),
        apart=tuple(f for f in shown if f.differs),
    )
