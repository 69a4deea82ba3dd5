"""From the measurements to findings and one verdict. A suspect is a cause when trying its fix restores the
acceptance the server lost: the fix trial must win back at least half of the gap between the drafter as served
and as named, and at least MIN_GAP (two lengths closer than that are one for a diagnosis)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..serving import DEV_MODE
from .report import Acceptance, Finding, Verdict
from .suspects import Suspect


class Answered(Protocol):
    """A request as the server (verify's `endpoint.Completion`) or the planned deployment (`vllm_process.
    RequestResult`) answered it: its tokens, and the tokens accepted at each verify step (None without them)."""

    @property
    def tokens(self) -> list[int]: ...

    @property
    def accepted(self) -> list[int] | None: ...


MIN_GAP = 0.05  # acceptance length
RECOVERED = 0.5  # of the gap, for a fix to count as the cause
TAIL_RATE = 0.2  # a drafted position accepting less is rarely worth its drafter step (eaglezoo tune measures it)


@dataclass(frozen=True)
class Evidence:
    server: Acceptance | None  # None: the engine refused to serve the folder (`refusal` says why)
    requests: Sequence[Answered]
    trials: dict[str, Acceptance]
    suspects: list[Suspect]
    floors: list[float] | None
    entry_prompts: bool  # the prompts are the ones the entry's floors were measured on
    k_zero: list[list[int]]
    k_table: list[list[int]] | None
    refusal: str | None = None
    k: int = 3  # the server's K: what a K=0 row of its table should draft instead
    files_read: bool = True  # the served drafter's folder was read here
    family: str = "eagle3"  # the drafter's: a DFlash block is drafted whole (no shorter K is a prefix of it)
    rules: list[Finding] = field(default_factory=list)  # findings seen directly, without a trial (blocks.past_block)


def judge(e: Evidence) -> tuple[Verdict, str, list[Finding], list[str]]:
    findings, notes = not_below(e, [from_suspect(s, e) for s in e.suspects] + e.rules)
    if e.k_zero:
        findings.append(k_zero_finding(e))
    notes += reproduction_notes(e)
    if not findings:
        findings = unexplained(e)
    if not findings:
        findings = too_deep(e)
    if not findings:
        return "healthy", healthy_summary(e), [], notes
    findings.sort(key=lambda f: (not f.confirmed, -(f.restores or 0)))
    first = findings[0]
    return first.verdict, first.what, findings, notes


def not_below(e: Evidence, findings: list[Finding]) -> tuple[list[Finding], list[str]]:
    """A server that accepts at least what the drafter and target named accept natively is not at fault: a
    difference its trial does not confirm (a fine-tune of the target that suits the drafter better) is said as a
    note, not a finding."""
    reference = e.trials["reference"]
    if e.server is None or e.server.mean_acceptance_length < reference.mean_acceptance_length:
        return findings, []
    kept = [f for f in findings if f.confirmed or f.cause in ("engine-refuses", "server-fails")]
    return kept, [
        f"{f.what}; but the server accepts {figure(e.server)}, not below the drafter and target named "
        f"({reference.mean_acceptance_length:.3f}): not a fault"
        for f in findings
        if f not in kept
    ]


# Drafted in one pass (vLLM samples every draft token of a parallel drafter from one forward,
# v1/spec_decode/llm_base_proposer.py:629-632): a deep position costs no drafter step, and a DFlash block's rates at K
# say nothing of a shorter block's (verify/dflash.py). k-too-deep is a chain drafter's finding; the floors hold these.
PARALLEL = ("dflash", "peagle")


def too_deep(e: Evidence) -> list[Finding]:
    """K past what the drafter's acceptance supports, seen in the server's own rates: the drafted positions from
    the first one that accepts less than TAIL_RATE on are a drafter step each, rarely kept."""
    if e.server is None or e.k_table or not e.server.per_position or e.family in PARALLEL:
        return []
    rates = e.server.per_position
    supported = next((i for i, rate in enumerate(rates) if rate < TAIL_RATE), len(rates))
    if supported == 0 or supported == len(rates):
        return []  # the first position low is no question of depth; none low, no finding
    tail = ", ".join(f"{rate:.3f}" for rate in rates[supported:])
    covered = (
        f"; the entry's floors (K={len(e.floors)}) cover positions 1-{min(len(e.floors), len(rates))} only"
        if e.floors and len(e.floors) < len(rates)
        else ""
    )
    return [
        Finding(
            cause="k-too-deep",
            verdict="engine-config",
            what=f"at K={len(rates)} positions {supported + 1}-{len(rates)} accept {tail}, each below "
            f"{TAIL_RATE:.0%}: a drafter step each, rarely kept; these figures support K={supported}",
            evidence=[(f"server: {figure(e.server)}, per position {[round(r, 3) for r in rates]}{covered}")],
            fix=f'serve with "num_speculative_tokens": {supported} in --speculative-config, or measure the '
            "best K at your load with eaglezoo tune",
            confirmed=True,
        )
    ]


def figure(a: Acceptance) -> str:
    low, high = a.interval
    return f"{a.mean_acceptance_length:.3f} (95% {low:.3f}-{high:.3f}, {a.prompts} prompts)"


def from_suspect(s: Suspect, e: Evidence) -> Finding:
    if s.cause in ("engine-refuses", "server-fails"):  # seen directly: the engine's own words
        return Finding(
            cause=s.cause, verdict=s.verdict, what=s.what, evidence=[f"vLLM: {e.refusal}"], fix=s.fix, confirmed=True
        )
    served, reference = e.trials.get("as served"), e.trials["reference"]
    fixed = e.trials.get(f"fix: {s.cause}") if s.fixed is not None else reference
    evidence = [f"server: acceptance length {figure(e.server)}" if e.server else f"vLLM: {e.refusal}"]
    if served is not None:
        evidence.append(f"native, drafter and target as served: {figure(served)}")
    if fixed is not None and fixed is not reference:
        evidence.append(f"native, as served with this fix alone: {figure(fixed)}")
    evidence.append(f"native, the drafter and target named: {figure(reference)}")
    if served is None and s.fails:
        evidence.insert(1, "native, drafter and target as served: not run, as vLLM could not run it")
    confirmed = s.fails and e.server is None  # the failure it predicts is the one seen
    if served is not None and fixed is not None:
        gap = reference.mean_acceptance_length - served.mean_acceptance_length
        gain = fixed.mean_acceptance_length - served.mean_acceptance_length
        confirmed = gain >= max(MIN_GAP, RECOVERED * gap)
    return Finding(
        cause=s.cause,
        verdict=s.verdict,
        what=s.what,
        evidence=evidence,
        fix=s.fix,
        restores=fixed.mean_acceptance_length if fixed is not None else None,
        confirmed=confirmed,
    )


def undrafted(requests: Sequence[Answered]) -> tuple[int, int]:
    """(tokens decoded without a draft, tokens decoded) over the requests, each request's first token (the
    prefill's) aside: each verify step yields 1 + accepted tokens."""
    decoded = [len(r.tokens) - 1 for r in requests]
    drafted = [sum(1 + a for a in r.accepted or []) for r in requests]
    return sum(max(0, n - d) for n, d in zip(decoded, drafted, strict=True)), sum(
        decoded
    )  # a last step cut at max_tokens: 0


def k_zero_finding(e: Evidence) -> Finding:
    ranges = ", ".join(f"{lo}-{hi}" for lo, hi, _ in e.k_zero)
    table = [[lo, hi, k or e.k] for lo, hi, k in e.k_table]
    idle, total = undrafted(e.requests) if all(r.accepted is not None for r in e.requests) else (None, None)
    seen = (
        f"{idle} of the {total} tokens decoded here (after each prompt's first) had no draft"
        if idle is not None
        else "the server gave no per-request acceptance to count the undrafted steps"
    )
    return Finding(
        cause="k-table-zero",
        verdict="engine-config",
        what=f"num_speculative_tokens_per_batch_size sends K=0 at batch sizes {ranges}: {seen}, and a step at K=0 "
        "still pays for the drafter (vLLM #49986)",
        evidence=[seen, f"the server's table: {e.k_table}"],
        fix=f'set "num_speculative_tokens_per_batch_size": {table} in --speculative-config (or drop the table); '
        "where speculation loses at a load, serve that load without --speculative-config: eaglezoo tune "
        "measures which",
        confirmed=bool(idle),
    )


def unexplained(e: Evidence) -> list[Finding]:
    """No suspect: the server below the reference is the engine's doing; both below the floors is the drafter's
    (on its own prompts) or the workload's (on other prompts)."""
    reference = e.trials["reference"]
    if e.server is None:
        return []
    gap = reference.mean_acceptance_length - e.server.mean_acceptance_length
    if gap >= MIN_GAP and e.server.mean_acceptance_length < reference.interval[0]:
        return [
            Finding(
                cause="server-below-reference",
                verdict="engine-config",
                what="the server accepts less than the same drafter and target run natively"
                + ("; its files show no cause" if e.files_read else ", and its files could not be read here"),
                evidence=[f"server: {figure(e.server)}", f"native reference: {figure(reference)}"],
                fix=(
                    "compare the server's flags and engine version with `eaglezoo serve-config DRAFTER` (its "
                    "dtype, quantization, kernels)"
                    if e.files_read
                    else f"start the server with {DEV_MODE} on this machine so that doctor can read what it loaded"
                ),
                confirmed=False,
            )
        ]
    below = below_floors(reference, e.floors)
    if not below or not below_floors(e.server, e.floors):  # both below, or the server meets them: no fault
        return []
    on_own = e.entry_prompts
    return [
        Finding(
            cause="below-floors" if on_own else "workload-shift",
            verdict="drafter" if on_own else "workload",
            what=(
                "the drafter measures below its entry's floors on the entry's own prompts, natively as on the server"
                if on_own
                else "server and reference agree, and both measure below the entry's floors on these "
                "prompts: this traffic is not what the drafter was measured on"
            ),
            evidence=[f"server: {figure(e.server)}", f"native reference: {figure(reference)}", *below],
            fix=(
                "report it to the drafter's publisher, or choose another drafter (eaglezoo registry list --target ...)"
                if on_own
                else "measure on the entry's own prompts to compare like with like (eaglezoo verify ID), "
                "and train or choose a drafter on traffic like this"
            ),
            confirmed=True,
        )
    ]


def below_floors(a: Acceptance, floors: list[float] | None) -> list[str]:
    return [
        f"position {i + 1}: {rate:.3f} below the floor {floor:.3f}"
        for i, (rate, floor) in enumerate(zip(a.per_position, floors or [], strict=False))
        if rate < floor
    ]


def reproduction_notes(e: Evidence) -> list[str]:
    served = e.trials.get("as served")
    if (
        e.rules  # the server measured at another K than the trials (blocks.past_block)
        or served is None
        or e.server is None
        or abs(served.mean_acceptance_length - e.server.mean_acceptance_length) < MIN_GAP
    ):
        return []
    return [
        f"the native reference of the drafter as served gives {served.mean_acceptance_length:.3f}, the server "
        f"{e.server.mean_acceptance_length:.3f}: something besides its files also differs (the engine's "
        "version, dtype or kernels)"
    ]


def healthy_summary(e: Evidence) -> str:
    rates = [round(r, 3) for r in e.server.per_position]
    k = len(rates)
    which = (
        f"the entry's floors {e.floors}"
        if not e.floors or len(e.floors) == k
        else f"the entry's K={len(e.floors)} floors {e.floors} (positions 1-{min(k, len(e.floors))})"
    )
    if not e.floors:
        floors = "; the drafter has no registry floors to hold it to"
    elif below_floors(e.server, e.floors):
        floors = f"; per position {rates} miss some of {which}, as closely as the reference itself measures"
    else:
        floors = f"; per position {rates} meet {which}"
    return (
        f"the server accepts {figure(e.server)}, the native reference "
        f"{e.trials['reference'].mean_acceptance_length:.3f}{floors}"
    )
