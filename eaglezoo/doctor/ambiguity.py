"""A fact the drafter's files leave ambiguous (a flag absent where engines default it differently, a flag whose
meaning changed, ids of no documented convention, files that match several dialects: every `errors.Ambiguous` the
strict reader raises) is settled by trying, not refused: each reading an engine could take is measured natively. The
weights were trained for the reading that accepts most on the target named; the server runs the one whose trial
reproduces its acceptance (`run.choose`, among the served folder's readings)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

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
T = TypeVar("T")


@dataclass(frozen=True)
class Choice:
    """One reading of an ambiguous fact: a flag's value, the convention of the aux ids, or the dialect; `also`: the
    readings of what that reading leaves ambiguous in turn (a dialect that does not document its ids' convention)."""

    fact: str
    value: bool | str
    also: tuple[Choice, ...] = ()

    def options(self, opts: ReadOptions) -> ReadOptions:
        for then in self.also:
            opts = then.options(opts)
        return self.own(opts)

    def own(self, opts: ReadOptions) -> ReadOptions:
        if self.fact == "aux_convention":
            return replace(opts, aux_convention=self.value)  # type: ignore[arg-type]
        if self.fact == "dialect":
            return replace(opts, dialect=str(self.value))
        return replace(opts, flags={**opts.flags, self.fact: bool(self.value)})

    def said(self) -> str:
        return " and ".join([self.own_said(), *(c.own_said() for c in self.also)])

    def own_said(self) -> str:
        if self.fact == "aux_convention":
            return f"aux ids in the {self.value} convention"
        if self.fact == "dialect":
            return f"the {self.value} dialect"
        return f"{self.fact}={str(self.value).lower()}"

    def flag(self) -> str:
        """What `eaglezoo convert` takes to state it."""
        return " ".join([self.own_flag(), *(c.own_flag() for c in self.also)])

    def own_flag(self) -> str:
        if self.fact == "aux_convention":
            return f"--aux-convention {self.value}"
        if self.fact == "dialect":
            return f"--from {self.value}"
        return f"--flag {self.fact}={str(self.value).lower()}"


@dataclass(frozen=True)
class Settled:
    """The ambiguity refused, each reading's native acceptance on the target named, and the one the weights were
    trained for (the one that accepts most, or the only one the files allow; None where no reading accepts MIN_GAP
    more than the others)."""

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


def readable(exc: Ambiguous, read: Callable[[Choice], T]) -> dict[Choice, T]:
    """Each reading the files allow, read: a reading that leaves another fact ambiguous branches into that fact's
    readings; a dialect whose reader refuses the files is no reading of them. The refusal itself where none reads."""
    out: dict[Choice, T] = {}
    pending = choices(exc)
    while pending:
        choice = pending.pop(0)
        try:
            out[choice] = read(choice)
        except Ambiguous as inner:
            if inner.fact in {choice.fact, *(c.fact for c in choice.also)}:
                raise
            pending += [replace(choice, also=(*choice.also, c)) for c in choices(inner)]
        except EaglezooError:
            if exc.fact != "dialect":
                raise
    if not out:
        raise exc
    return out


def prepare_settled(plan: WorkloadPlan, ref: Reference, progress: Progress) -> tuple[Workload, Settled | None]:
    """The workload as named; where the strict reader refuses a fact as ambiguous, each reading is read, measured
    natively (one target pass for all), and the workload is the reading the weights accept most under."""
    try:
        return prepare(plan), None
    except Ambiguous as exc:
        refusal = exc
    works = readable(refusal, lambda c: prepare(replace(plan, opts=c.options(plan.opts))))
    first = next(iter(works.values()))
    variants = [replace(as_named(w.drafter), source=c.said()) for c, w in works.items()]
    prompts = Prompts(first.encoded, first.k, first.max_new_tokens)
    paths = run_trials(plan.target_dir, variants, prompts, ref, progress)
    measured = {c: acceptance(c.said(), paths[c.said()], first.k) for c in works}
    ranked = sorted(measured, key=lambda c: -measured[c].mean_acceptance_length)
    gap = measured[ranked[0]].mean_acceptance_length - measured[ranked[-1]].mean_acceptance_length
    trained = ranked[0] if gap >= MIN_GAP or len(ranked) == 1 else None
    return works[trained or ranked[0]], Settled(refusal, measured, trained)


def served_readings(folder: Path) -> list[tuple[Choice | None, Drafter]]:
    """The served folder under each reading an engine could take of what it leaves ambiguous (one, unambiguous,
    where it leaves nothing so); the server's acceptance tells which it ran."""
    options = ReadOptions(allow_missing_aux=True, trust_stored_flags=True)
    try:
        read_drafter(folder, None, options, strict=False)
    except Ambiguous as exc:
        each = readable(exc, lambda c: read_drafter(folder, None, c.options(options), strict=False))
        return list(each.items())
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
