"""What a figure was measured under (docs/registry.md, "Figures and their conditions"): a figure is its conditions.

Every reported or measured figure states each condition, `unknown` where its source does not say it (never
guessed). A figure's own conditions must agree with each other (`problems`); an engine's spelling of K is turned
into a chain K only where the two are exactly equivalent (`chain_k`); two figures are comparable only where
every condition is the same (`differences`). A condition unknown on both sides is the same only when both
figures come from one source (one run, one table); else it cannot be shown to be the same, and says so. Two
conditions cannot differ where nothing applies them: top_p between two greedy figures, and the thinking mode between
two figures of raw prompts (no chat template, so no thinking switch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..names import Thinking
from ..requirements import on_off

Unknown = Literal["unknown"]
UNKNOWN: Unknown = "unknown"
Number = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]  # a YAML number: never a quoted string
Count = Annotated[int, Field(strict=True, ge=1)]

# A metric's definitions. acceptance_length: counting the bonus token (1 + accepted / drafts, as vLLM's metrics
# and eaglezoo verify count it) or not (accepted / drafts). per_position_acceptance: position i accepted over all
# drafts (joint: every earlier position accepted too, as vLLM counts it) or over the drafts that reached it
# (conditional). Other metrics have no definition beyond their name.
DEFINITIONS: dict[str, tuple[str, ...]] = {
    "acceptance_length": ("with-bonus", "without-bonus"),
    "per_position_acceptance": ("joint", "conditional"),
}
Definition = Literal["with-bonus", "without-bonus", "joint", "conditional", "unknown"]

# SGLang's `--speculative-num-steps S --speculative-eagle-topk T --speculative-num-draft-tokens D`, written S-T-D:
# T = 1 and D = S + 1 is a chain of S draft tokens (the +1 is the verified root), exactly vLLM's
# num_speculative_tokens = S; T > 1 is a tree.
SGLANG_SPELLING = re.compile(r"^(?P<steps>\d+)-(?P<topk>\d+)-(?P<draft>\d+)$")


class Conditions(BaseModel):
    """Everything a figure was measured under; each one the source states, or `unknown`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k: Count | Unknown  # draft tokens per step, in chain terms (vLLM's num_speculative_tokens)
    k_spelling: str | Unknown  # the engine's own spelling where the source gives one, e.g. SGLang's 3-1-4
    drafting: Literal["chain", "tree", "unknown"]
    temperature: Number | Unknown
    top_p: Annotated[float, Field(strict=True, gt=0, le=1)] | Unknown
    dataset: Annotated[str, Field(min_length=1)]  # its name (MT-Bench, HumanEval, a prompt file) or unknown
    dataset_size: Count | Unknown  # prompts measured
    max_new_tokens: Count | Unknown
    engine: Annotated[str, Field(min_length=1)]  # vllm, sglang, native (eaglezoo verify's own), ... or unknown
    engine_version: str | Unknown
    thinking: Thinking
    prompt_format: Literal["chat", "raw", "unknown"]
    source: Annotated[str, Field(min_length=1)]  # where the figure is stated: an URL, a report in this repository

    @field_validator("thinking", mode="before")
    @classmethod
    def yaml_on_off(cls, value: object) -> object:
        return on_off(value)

    @field_validator("engine_version")
    @classmethod
    def version_parses(cls, version: str) -> str:
        if version != UNKNOWN:
            parsed_version(version, "engine_version")
        return version

    def chain_k(self) -> int | None:
        """K in chain terms: the stated one, else the one its spelling is exactly equivalent to, else None."""
        if self.k != UNKNOWN:
            return self.k
        return spelled_chain(self)[0]

    def drafted(self) -> str:
        """chain or tree: the stated one, else the one its spelling says, else unknown."""
        if self.drafting != UNKNOWN:
            return self.drafting
        return spelled_chain(self)[1]


def parsed_version(version: str, what: str) -> Version:
    """A PEP 440 version (0.22.0, 0.5.3.post1), or one ValueError naming the field."""
    try:
        return Version(version)
    except InvalidVersion:
        raise ValueError(f"{what} {version!r} is not a version (like 0.22.0)") from None


def spelled_chain(c: Conditions) -> tuple[int | None, str]:
    """(the chain K, chain or tree) that the engine's spelling is exactly equivalent to; (None, unknown) where
    the spelling is not one eaglezoo converts (another engine's, or an SGLang spelling that is no plain chain)."""
    match = SGLANG_SPELLING.match(c.k_spelling) if c.engine == "sglang" else None
    if match is None:
        return None, UNKNOWN
    steps, topk, draft = (int(match[n]) for n in ("steps", "topk", "draft"))
    if topk > 1:
        return None, "tree"
    return (steps, "chain") if draft == steps + 1 else (None, UNKNOWN)


def problems(metric: str, definition: str, value: float | list[float], c: Conditions) -> list[str]:
    """Where a figure's stated conditions contradict each other (or its metric, or its value)."""
    found = []
    own = DEFINITIONS.get(metric, ())
    if definition != UNKNOWN and definition not in own:
        found.append(
            f"definition {definition} is not one of {metric}'s ({', '.join(own) or 'it has none: state unknown'})"
        )
    if c.k_spelling != UNKNOWN and c.engine == "sglang" and not SGLANG_SPELLING.match(c.k_spelling):
        found.append(f"k_spelling {c.k_spelling!r} is not SGLang's steps-topk-draft (like 3-1-4)")
    spelled_k, spelled = spelled_chain(c)
    if c.k != UNKNOWN and spelled_k is not None and spelled_k != c.k:
        found.append(f"k {c.k} but k_spelling {c.k_spelling} is SGLang's chain K={spelled_k}")
    if c.drafting != UNKNOWN and spelled != UNKNOWN and spelled != c.drafting:
        found.append(f"drafting {c.drafting} but k_spelling {c.k_spelling} is a {spelled}")
    k = c.chain_k()
    if k is not None and c.drafted() == "chain":
        found += _value_problems(metric, definition, value, k)
    return found


def _value_problems(metric: str, definition: str, value: float | list[float], k: int) -> list[str]:
    """A chain of K tokens accepts at most K (K + 1 with the bonus token), and has K positions."""
    values = value if isinstance(value, list) else [value]
    if metric == "per_position_acceptance" and isinstance(value, list) and len(value) > k:
        return [f"{len(value)} per-position values, but a chain of K={k} has {k} positions"]
    if metric == "acceptance_length":
        most = k if definition == "without-bonus" else k + 1
        over = [v for v in values if v > most]
        if over:
            return [f"acceptance length {over[0]:g} exceeds {most}, the most a chain of K={k} accepts ({definition})"]
    return []


# The conditions two figures must share to be compared; `source` is where they come from, not a condition.
COMPARED = tuple(name for name in Conditions.model_fields if name not in ("source", "k_spelling"))


@dataclass(frozen=True)
class Figure:
    """One figure of one entry, as listings compare it: a reported one or one of a measured row's two."""

    entry_id: str
    metric: str
    definition: str
    value: float | list[float]
    conditions: Conditions
    origin: Literal["reported", "measured"]
    broken: bool = False

    def shown_value(self) -> str:
        return ", ".join(f"{v:g}" for v in self.value) if isinstance(self.value, list) else f"{self.value:g}"

    def where(self) -> str:
        """The conditions that tell figures apart at a glance: `(K=3, T=0, MT-Bench x80, vllm 0.10.1)`."""
        c = self.conditions
        k = c.chain_k()
        temperature = "?" if c.temperature == UNKNOWN else f"{c.temperature:g}"
        engine = c.engine + ("" if c.engine_version == UNKNOWN else f" {c.engine_version}")
        dataset = c.dataset + ("" if c.dataset_size == UNKNOWN else f" x{c.dataset_size}")
        return f"(K={k if k is not None else '?'}, T={temperature}, {dataset}, {engine})"

    def label(self) -> str:
        return f"{self.shown_value()} {self.where()}"


def _same(a: Conditions, b: Conditions, name: str) -> bool:
    if name == "k":
        return a.chain_k() is not None and a.chain_k() == b.chain_k() or (_unknown_both(a, b, name))
    if name == "top_p" and a.temperature == b.temperature == 0:
        return True  # greedy: no top_p changes what is sampled
    if name == "thinking" and a.prompt_format == b.prompt_format == "raw":
        return True  # raw text goes through no chat template, so no thinking switch is set on either side
    if name == "drafting":
        x, y = a.drafted(), b.drafted()
        return (x == y != UNKNOWN) or (x == y == UNKNOWN and a.source == b.source)
    x, y = getattr(a, name), getattr(b, name)
    if x == UNKNOWN or y == UNKNOWN:
        return _unknown_both(a, b, name)
    return str(x).lower() == str(y).lower() if isinstance(x, str) and isinstance(y, str) else bool(x == y)


def _unknown_both(a: Conditions, b: Conditions, name: str) -> bool:
    """Unknown on both sides is the same only within one source (one run, one table)."""
    if name == "k":
        unknown = a.chain_k() is None and b.chain_k() is None
    else:
        unknown = getattr(a, name) == UNKNOWN and getattr(b, name) == UNKNOWN
    return unknown and a.source == b.source


def differences(a: Figure, b: Figure) -> list[str]:
    """What keeps two figures from being compared (empty: comparable): another metric or definition, or each
    condition that differs or cannot be shown to be the same."""
    if a.metric != b.metric:
        return [f"metric: {a.metric} vs {b.metric}"]
    same_source = a.conditions.source == b.conditions.source
    defined = a.definition == b.definition and (a.definition != UNKNOWN or same_source)
    found = [] if defined or not DEFINITIONS.get(a.metric) else [_differ("definition", a.definition, b.definition)]
    return found + [
        _differ(name, _shown(a.conditions, name), _shown(b.conditions, name))
        for name in COMPARED
        if not _same(a.conditions, b.conditions, name)
    ]


def _differ(name: str, x: str, y: str) -> str:
    """`temperature: 0 vs 1`; unknown on both sides (in two sources): `temperature: unknown on both`."""
    return f"{name}: unknown on both" if x == y == UNKNOWN else f"{name}: {x} vs {y}"


def _shown(c: Conditions, name: str) -> str:
    if name == "k":
        k = c.chain_k()
        return str(k) if k is not None else UNKNOWN
    if name == "drafting":
        return c.drafted()
    value = getattr(c, name)
    return f"{value:g}" if isinstance(value, float) else str(value)
