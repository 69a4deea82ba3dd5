"""A fact the drafter's files leave ambiguous (a flag absent where engines default it differently, a flag whose
meaning changed, ids of no documented convention: every `errors.Ambiguous` the strict reader raises) is settled by
trying, not refused: each reading an engine could take is measured natively. The weights were trained for the
reading that accepts most on the target named; the server runs the one whose trial reproduces its acceptance
(`run.choose`, among the served folder's readings)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from ..checkpoint.formats.base import ReadOptions
from ..checkpoint.read import Drafter, read_drafter
from ..errors import Ambiguous, EaglezooError
from ..verify.identity import read_served
from ..verify.run import WorkloadPlan, prepare
from ..verify.workload import Progress, Workload
from .report import Acceptance
from .suspects import Suspect, as_named
from .trials import Prompts, Reference, acceptance, run_trials
from .verdict import MIN_GAP, figure

FLAG_CAUSE = "flag-ambiguous-served"


@dataclass(frozen=True)
class Choice:
    """One reading of an ambiguous fact: a flag's value, or the convention of the aux ids."""

    fact: str
    value: bool | str

    def options(self, opts: ReadOptions) -> ReadOptions:
        if self.fact == "aux_convention":
            return replace(opts, aux_convention=self.value)  # type: ignore[arg-type]
        return replace(opts, flags={**opts.flags, self.fact: bool(self.value)})

    def said(self) -> str:
        if self.fact == "aux_convention":
            return f"aux ids in the {self.value} convention"
        return f"{self.fact}={str(self.value).lower()}"

    def flag(self) -> str:
        """What `eaglezoo convert` takes to state it."""
        if self.fact == "aux_convention":
            return f"--aux-convention {self.value}"
        return f"--flag {self.fact}={str(self.value).lower()}"


@dataclass(frozen=True)
class Settled:
    """The ambiguity refused, each reading's native acceptance on the target named, and the one the weights were
    trained for (the one that accepts most; None where no reading accepts MIN_GAP more than the others)."""

    refusal: Ambiguous
    measured: dict[Choice, Acceptance]
    trained: Choice | None

    def said(self) -> str:
        each = ", ".join(f"{c.said()} accepts {figure(a)}" for c, a in self.measured.items())
        told = (
            f"the weights were trained for {self.trained.said()}"
            if self.trained
            else "the readings accept alike: the files cannot say which the weights were trained for"
        )
        return f"{self.refusal.message}; tried natively on the target named: {each}; {told}"


def choices(exc: Ambiguous) -> list[Choice]:
    return [Choice(exc.fact, v) for v in exc.values]


def prepare_settled(plan: WorkloadPlan, ref: Reference, progress: Progress) -> tuple[Workload, Settled | None]:
    """The workload as named; where the strict reader refuses a fact as ambiguous, each reading is read, measured
    natively (one target pass for all), and the workload is the reading the weights accept most under."""
    try:
        return prepare(plan), None
    except Ambiguous as exc:
        refusal = exc
    works = {c: prepare(replace(plan, opts=c.options(plan.opts))) for c in choices(refusal)}
    first = next(iter(works.values()))
    variants = [replace(as_named(w.drafter), source=c.said()) for c, w in works.items()]
    prompts = Prompts(first.encoded, first.k, first.max_new_tokens)
    paths = run_trials(plan.target_dir, variants, prompts, ref, progress)
    measured = {c: acceptance(c.said(), paths[c.said()], first.k) for c in works}
    ranked = sorted(measured, key=lambda c: -measured[c].mean_acceptance_length)
    gap = measured[ranked[0]].mean_acceptance_length - measured[ranked[-1]].mean_acceptance_length
    trained = ranked[0] if gap >= MIN_GAP else None
    return works[trained or ranked[0]], Settled(refusal, measured, trained)


def served_readings(folder: Path) -> list[tuple[Choice | None, Drafter]]:
    """The served folder under each reading an engine could take of what it leaves ambiguous (one, unambiguous,
    where it leaves nothing so); the server's acceptance tells which it ran."""
    options = ReadOptions(allow_missing_aux=True, trust_stored_flags=True)
    try:
        read_drafter(folder, None, options, strict=False)
    except Ambiguous as exc:
        return [(c, read_drafter(folder, None, c.options(options), strict=False)) for c in choices(exc)]
    except EaglezooError:  # another refusal: read_served says why, or reads the folder as vLLM does
        pass
    return [(None, read_served(folder))]


def settle_suspects(
    found: list[Suspect], choice: Choice | None, settled: Settled | None, folder: Path
) -> list[Suspect]:
    """The suspect a served reading raises about the ambiguous flag, named as such: the reading the server runs,
    the one the weights were trained for, and the fix that writes the flag explicitly. (Ambiguous aux ids are the
    named drafter's alone: the server's capture is read from its keys, and the aux suspects say it.)"""
    if choice is None or settled is None or settled.trained is None or choice.fact != settled.trained.fact:
        return found
    trained, where = settled.trained, shlex.quote(str(folder))
    return [
        replace(
            s,
            cause=FLAG_CAUSE,
            what=f"{settled.refusal.message}: the server runs {choice.said()}, the weights were trained for "
            f"{trained.said()}",
            fix=f'write "{trained.fact}": {str(trained.value).lower()} explicitly in {where}/config.json, or serve '
            f"OUT after `eaglezoo convert {where} OUT {trained.flag()}`",
            fixed=replace(s.fixed, source=f"fix: {FLAG_CAUSE}") if s.fixed else None,
        )
        if s.cause.startswith("norm-flags") and choice.fact in s.what
        else s
        for s in found
    ]
