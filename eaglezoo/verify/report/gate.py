"""The floors a verify run is held to (`Gate`: the command line's and a registry entry's, with what the entry's
were measured on) and their check against the measured figures (`gated`): PASS, FAIL, or compared only and why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ...checkpoint.problems import Finding
from ..prompt_set import PromptSet
from .models import FloorCheck, GateResult, Tallied, Thresholds


class Basis(BaseModel):
    """What a registry entry's floors were measured on: they gate a run on the same (the whole set, by its hash,
    and the engine where the floor names one); any other run is compared with them."""

    model_config = ConfigDict(frozen=True)

    prompt_set: str | None  # None: any set that holds the condition (a condition's floor that names no set)
    prompts_sha256: str | None = None  # None: the set could not be read, so no run can be shown to match it
    engine: str | None = None  # None: any engine
    k: int
    temperature: float

    def words(self) -> str:
        digest = f" (sha256 {self.prompts_sha256[:12]})" if self.prompts_sha256 else " (unreadable here)"
        where = f"{self.prompt_set}{digest}" if self.prompt_set else "any whole prompt set holding the condition"
        return (
            f"{where}, K={self.k}, T={self.temperature:g}, {'engine ' + self.engine if self.engine else 'any engine'}"
        )


class Floors(BaseModel):
    """Per-position floors, a floor on the acceptance length, one per condition."""

    model_config = ConfigDict(frozen=True)

    min_acceptance: list[float] | None = None
    min_al: float | None = None
    condition_floors: dict[str, float] | None = None

    def __bool__(self) -> bool:
        return bool(self.min_acceptance or self.min_al is not None or self.condition_floors)

    def whole(self) -> Floors:
        """The floors on the whole run's figures (per position, the acceptance length), without the conditions'."""
        return Floors(min_acceptance=self.min_acceptance, min_al=self.min_al)

    def by_condition(self) -> Floors:
        """The conditions' floors alone (each measured on a set that holds its condition, not the whole run's)."""
        return Floors(condition_floors=self.condition_floors)


class FloorTable(BaseModel):
    """A registry entry's floors at one temperature, by K (`registry.schema.Entry.floor_table`): the one value an
    entry's floors reach verify (`at`), tune (`whole`, every K) and doctor (`covering`) in."""

    model_config = ConfigDict(frozen=True)

    by_k: dict[int, Floors] = {}

    def at(self, k: int) -> Floors:
        """The floors at exactly this K (none where the entry has none: floors compare like with like)."""
        return self.by_k.get(k, Floors())

    def whole(self) -> dict[int, Floors]:
        """Each K's whole-run floors, at the Ks that have them."""
        return {k: f.whole() for k, f in sorted(self.by_k.items()) if f.whole()}

    def covering(self, k: int) -> list[float] | None:
        """The per-position floors for the positions a K-deep run shares with them: this K's where the entry has
        them, else the deepest shallower K's (positions 1..K' of a deeper run draft exactly as at K'), else a deeper
        K's first K positions."""
        ks = sorted(x for x, f in self.by_k.items() if f.min_acceptance)
        if not ks:
            return None
        shallower = [x for x in ks if x <= k]
        floors = self.by_k[shallower[-1] if shallower else ks[0]].min_acceptance or []
        return list(floors[:k])


NO_FLOORS = FloorTable()  # no registry entry, or one without floors


class Gate(BaseModel):
    """What the run is held to: the floors stated for this run (the command line: they gate whatever it runs on),
    and a registry entry's, with what they were measured on (they gate a run on the same, else are compared)."""

    model_config = ConfigDict(frozen=True)

    stated: Floors = Floors()
    entry: Floors = Floors()  # the entry's whole-run floors
    measured_on: Basis | None = None  # what they were measured on
    conditions: Floors = Floors()  # the entry's floors per condition
    conditions_measured_on: Basis | None = None


NO_GATE = Gate()  # the default: no floors stated


def gated(
    gate: Gate,
    s: Tallied,
    by_condition: dict[str, float],
    findings: list[Finding],
    prompt_set: PromptSet | None,
    engine: str,
) -> tuple[Thresholds, list[str], list[str], GateResult]:
    """The floors against the measured figures: (the floors held, why the gate failed, what was not checked, the
    verdict with every floor's check). The command line's floors gate; the entry's gate a run on what they were
    measured on and are compared, with the difference, on anything else."""
    groups = [
        (f, basis, prefix)
        for f, basis, prefix in (
            (gate.entry, gate.measured_on, ""),
            (gate.conditions, gate.conditions_measured_on, "condition floors: "),
        )
        if f
    ]
    whys = [[prefix + w for w in not_like_with_like(basis, prompt_set, engine)] for _, basis, prefix in groups]
    figures = (s.acceptance_per_position, s.mean_acceptance_length, by_condition)
    checks = floor_checks(gate.stated, *figures, "command line", True)
    for (floors, _, _), why in zip(groups, whys, strict=True):
        checks += floor_checks(floors, *figures, "registry", not why)
    failures = [failure_of(c) for c in checks if c.gated and c.met is False]
    notes = [
        f"no prompt of {c.what.removesuffix(': acceptance length')} was measured: its floor ({c.floor:g}) was "
        "not checked"
        for c in checks
        if c.measured is None
    ]
    if s.num_drafts == 0:
        failures.append("no drafts were measured (continuations too short for K)")
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        failures.append(f"lint found {len(errors)} error(s): {', '.join(sorted({f.code for f in errors}))}")
    held = [gate.stated, gate.entry, gate.conditions]  # gated or compared: `gate` says which
    thresholds = Thresholds(
        min_acceptance=_highest([f.min_acceptance for f in held]),
        min_al=max((f.min_al for f in held if f.min_al is not None), default=None),
        min_al_by_condition=_highest_by_condition([f.condition_floors for f in held]),
    )
    verdict = (
        "FAIL"
        if failures
        else "PASS"
        if any(c.gated for c in checks)
        else "compared, not gated"
        if checks
        else "no floors"
    )
    why = [w for ws in whys for w in ws]
    bases = [basis.words() for _, basis, _ in groups if basis is not None]
    result = GateResult(
        verdict=verdict,
        entry_floors="compared" if why else "gated" if groups else "none",
        why_compared=why,
        measured_on="; ".join(dict.fromkeys(bases)) or None,
        checks=checks,
    )
    return thresholds, failures, notes, result


def not_like_with_like(basis: Basis | None, prompt_set: PromptSet | None, engine: str) -> list[str]:
    """Why an entry's floors cannot gate this run (empty: they can): another prompt set, a part of one, another
    engine. K and temperature match already: the entry's floors are looked up at exactly this run's."""
    if basis is None or prompt_set is None:
        return ["what the floors or this run measured on is not known"]
    why = []
    if basis.prompt_set is None:
        pass  # a condition's floor naming no set: any set that holds the condition, taken whole
    elif basis.prompts_sha256 is None:
        why.append(
            f"the floors' prompt set {basis.prompt_set} cannot be read here, so no run can be shown to measure the same"
        )
    elif basis.prompts_sha256 != prompt_set.sha256:
        why.append(
            f"the floors were measured on {basis.prompt_set}, this run on {prompt_set.name}"
            if basis.prompt_set != prompt_set.name
            else f"{prompt_set.name} has changed since the floors were measured on it (sha256 "
            f"{basis.prompts_sha256[:12]}, now {prompt_set.sha256[:12]})"
        )
    if not prompt_set.complete:
        why.append(
            f"this run took {prompt_set.taken} of the {prompt_set.rows} rows of {prompt_set.name} (--max-prompts)"
        )
    if basis.engine is not None and basis.engine != engine:
        why.append(f"the floors were measured on the {basis.engine} engine, this run on {engine}")
    return why


def floor_checks(
    floors: Floors,
    rates: Sequence[float],
    length: float | None,
    by_condition: dict[str, float],
    source: Literal["command line", "registry"],
    gates: bool,
) -> list[FloorCheck]:
    """Each floor against its figure: the rate at each position, the acceptance length (None: not measured), each
    condition's length (verify's run, and each of tune's cells)."""
    pairs: list[tuple[str, float, float | None]] = [
        (f"acceptance at position {i + 1}", floor, rates[i])
        for i, floor in enumerate(floors.min_acceptance or [])
        if i < len(rates)
    ]
    if floors.min_al is not None:
        pairs.append(("mean acceptance length", floors.min_al, length))
    pairs += [
        (f"condition {name}: acceptance length", floor, by_condition.get(name))
        for name, floor in (floors.condition_floors or {}).items()
    ]
    return [
        FloorCheck(
            what=what,
            floor=floor,
            measured=value,
            source=source,
            gated=gates,
            difference=None if value is None else value - floor,
            met=None if value is None else value >= floor,
        )
        for what, floor, value in pairs
    ]


def failure_of(check: FloorCheck) -> str:
    verb = " is" if check.what.startswith("acceptance at position") else ""
    return f"{check.what}{verb} {check.measured:.3f} < {check.floor}"


def _highest(lists: list[list[float] | None]) -> list[float] | None:
    given = [x for x in lists if x]
    if not given:
        return None
    return [max(x[i] for x in given if i < len(x)) for i in range(max(map(len, given)))]


def _highest_by_condition(dicts: list[dict[str, float] | None]) -> dict[str, float] | None:
    merged: dict[str, float] = {}
    for d in dicts:
        for name, floor in (d or {}).items():
            merged[name] = max(floor, merged.get(name, floor))
    return merged or None
