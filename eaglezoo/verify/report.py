"""Measurements -> one `VerifyReport`: tallies, the engine's own counters, thresholds, the comparison
of two engines and the speedup, whatever engine measured. Reading a saved one back: `saved.py`."""

from __future__ import annotations

import datetime as dt
from statistics import mean, median

from pydantic import BaseModel, Field

from .. import __version__
from ..checkpoint.problems import Finding
from .acceptance import INTERVAL, Tally, bootstrap_interval, by_k_estimate
from .workload import Measurement, Workload


class VerifyReport(BaseModel):
    drafter: str
    target: str
    device: str
    dtype: str
    num_spec_tokens: int
    max_new_tokens: int
    num_prompts: int
    acceptance_per_position: list[float]
    mean_acceptance_length: float
    mean_acceptance_length_per_prompt: float | None
    mean_acceptance_length_interval: list[float] | None = None  # INTERVAL; per bucket in drift
    num_drafts: int
    num_accepted: int
    histogram: list[int]
    all_positions: dict | None  # native only: every slot of the continuation, teacher-forced
    acceptance_by_k: dict | None = None  # {"basis": "exact ..." | "estimate ...", "rows": [{k, ...}]}
    drift: dict
    target_distinct_token_ratio: float | None
    lint: list[Finding]
    timing: dict
    engine: dict = {"name": "native"}
    sampling: dict = {"temperature": 0.0, "seed": None}
    per_prompt: list[dict] = []  # {"index", "bucket", "prompt_tokens", ["answers"], "accepted": [per verify step]}
    skipped_prompts: list[dict] = []  # prompts that do not fit the context: reported, never truncated
    notes: list[str] = []
    speedup: dict | None = None
    comparison: dict | None = None
    thresholds: dict = {}
    failures: list[str] = []
    registry_id: str | None = None  # the entry it measured, for `registry record`
    drafter_revision: str | None = None  # the Hub commit measured, when the drafter came from the Hub
    target_revision: str | None = None  # the Hub commit measured, when the target came from the Hub
    eaglezoo_version: str = __version__
    created: str = Field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))



def report_for(work: Workload, m: Measurement) -> VerifyReport:
    """One report from one measurement; the engine's own counters are the headline when it keeps them."""
    k, tally, buckets, per_prompt = work.k, Tally(work.k), {}, []
    for i, p, ids, steps in zip(work.indices, work.prompts, work.encoded, m.accepted):
        if steps is None:
            continue
        tally.add(steps)
        buckets.setdefault(p.bucket, Tally(k)).add(steps)
        earlier = {"answers": work.answers[i]} if i in work.answers else {}  # the target's own earlier turns
        per_prompt.append({"index": i, "bucket": p.bucket, "prompt_tokens": len(ids), **earlier, "accepted": steps})
    s = tally.summary()
    notes = list(work.notes) + list(m.notes)
    if m.counters is not None:
        s, note = headline_from_counters(m.counters, tally, k)
        notes += [note] if note else []
    als = [1 + sum(x["accepted"]) / len(x["accepted"]) for x in per_prompt if x["accepted"]]
    steps_by_bucket: dict[str, list[list[int]]] = {}
    for x in per_prompt:
        steps_by_bucket.setdefault(x["bucket"], []).append(x["accepted"])
    new = [t[:work.max_new_tokens] for t in m.tokens]
    return VerifyReport(
        drafter=str(work.drafter.path), target=work.target_name, device=m.device, dtype=m.dtype, num_spec_tokens=k,
        max_new_tokens=work.max_new_tokens, num_prompts=len(work.prompts),
        acceptance_per_position=s["acceptance_per_position"], mean_acceptance_length=s["mean_acceptance_length"],
        mean_acceptance_length_per_prompt=sum(als) / len(als) if als else None,
        num_drafts=s["num_drafts"], num_accepted=s["num_accepted"], histogram=s["histogram"],
        all_positions=m.all_positions,
        mean_acceptance_length_interval=interval([x["accepted"] for x in per_prompt]),
        drift={"feedback_rms_per_depth": m.feedback_rms,  # buckets (categories, conditions) in the prompt file's order
               "acceptance_per_position_by_bucket": {b: t.per_position() for b, t in buckets.items()},
               "mean_acceptance_length_by_bucket": {b: t.mean_acceptance_length() for b, t in buckets.items()},
               "mean_acceptance_length_interval_by_bucket": {b: interval(steps_by_bucket[b]) for b in buckets},
               "interval": INTERVAL},
        target_distinct_token_ratio=sum(len(set(t)) / max(1, len(t)) for t in new) / len(new) if new else None,
        lint=work.findings, timing=m.timing, engine=m.engine, speedup=m.speedup,
        sampling={"temperature": work.temperature, "seed": work.seed}, per_prompt=per_prompt,
        skipped_prompts=work.skipped, notes=notes, acceptance_by_k=acceptance_by_k(m, s["acceptance_per_position"]))


def interval(requests: list[list[int]]) -> list[float] | None:
    """The pooled acceptance length's bootstrap interval over these prompts (None for fewer than two)."""
    counts = [(len(r), sum(r)) for r in requests if r]  # (drafts, accepted): resampled without re-summing steps

    def pooled(pick: list[tuple[int, int]]) -> float:
        return 1 + sum(a for _, a in pick) / sum(d for d, _ in pick)

    return bootstrap_interval(counts, pooled) if len(counts) > 1 else None


EXACT = ("exact: replayed from this run's drafts (a K-token draft is the first K tokens of the K_max one), "
         "equal to a run at each K")
ESTIMATE = ("estimate: 1 + the first K per-position acceptance rates of this K_max run (the engine reports counts, "
            "not each slot's drafts); a run at K visits other positions")


def acceptance_by_k(m: Measurement, per_position: list[float]) -> dict | None:
    if m.by_k is not None:
        return {"basis": EXACT, "rows": m.by_k}
    if not per_position:
        return None
    return {"basis": ESTIMATE, "rows": by_k_estimate(per_position)}



def headline_from_counters(c: dict, tally: Tally, k: int) -> tuple[dict, str | None]:
    """The engine's counters (deltas over the measured requests) as the report's totals. When the
    per-request metrics add up to something else, another client moved the counters: say so."""
    drafts = c["drafts"]
    per_pos = (c["per_position"] + [0] * k)[:k]
    s = {"acceptance_per_position": [x / drafts if drafts else 0.0 for x in per_pos],
         "mean_acceptance_length": 1 + c["accepted"] / drafts if drafts else 1.0,
         "num_drafts": drafts, "num_accepted": c["accepted"],
         "histogram": tally.histogram() if tally.num_drafts else []}
    note = None
    if tally.num_drafts and (tally.num_drafts, tally.num_accepted) != (drafts, c["accepted"]):
        note = (f"the engine's counters ({drafts} drafts, {c['accepted']} accepted) differ from the sum of this run's "
                f"per-request metrics ({tally.num_drafts}, {tally.num_accepted}): another client may be using it")
    return s, note



def apply_thresholds(report: VerifyReport, min_acceptance: list[float] | None, min_al: float | None,
                     condition_floors: dict[str, float] | None = None) -> None:
    report.thresholds = {"min_acceptance": min_acceptance, "min_al": min_al}
    if condition_floors:
        report.thresholds["min_al_by_condition"] = condition_floors
    measured = report.drift["mean_acceptance_length_by_bucket"]
    for condition, floor in (condition_floors or {}).items():
        if condition not in measured:
            report.notes.append(f"no prompt of condition {condition} was measured: its floor ({floor}) was not checked")
        elif measured[condition] < floor:
            report.failures.append(f"condition {condition}: acceptance length {measured[condition]:.3f} < {floor}")
    if report.num_drafts == 0:
        report.failures.append("no drafts were measured (continuations too short for K)")
    for i, floor in enumerate(min_acceptance or []):
        if i < len(report.acceptance_per_position) and report.acceptance_per_position[i] < floor:
            report.failures.append(f"acceptance at position {i + 1} is {report.acceptance_per_position[i]:.3f} < {floor}")
    if min_al is not None and report.mean_acceptance_length < min_al:
        report.failures.append(f"mean acceptance length {report.mean_acceptance_length:.3f} < {min_al}")
    errors = [f for f in report.lint if f.severity == "error"]
    if errors:
        report.failures.append(f"lint found {len(errors)} error(s): {', '.join(sorted({f.code for f in errors}))}")


def compare(ref, other) -> dict:
    """ref, other: VerifyReports of the same workload on two engines."""
    a, b = ref.engine["name"], other.engine["name"]
    steps = {p["index"]: p["accepted"] for p in ref.per_prompt}
    both = [p for p in other.per_prompt if p["index"] in steps]
    differing = [p["index"] for p in both if steps[p["index"]] != p["accepted"]]
    counts_equal = (ref.num_drafts, ref.num_accepted) == (other.num_drafts, other.num_accepted)
    return {
        "reference": a, "engine": b, "dtype": {a: ref.dtype, b: other.dtype},
        "acceptance_per_position": {a: ref.acceptance_per_position, b: other.acceptance_per_position},
        "difference_per_position": [y - x for x, y in zip(ref.acceptance_per_position, other.acceptance_per_position)],
        "mean_acceptance_length": {a: ref.mean_acceptance_length, b: other.mean_acceptance_length},
        "difference_mean_acceptance_length": other.mean_acceptance_length - ref.mean_acceptance_length,
        "num_drafts": {a: ref.num_drafts, b: other.num_drafts},
        "num_accepted": {a: ref.num_accepted, b: other.num_accepted},
        "acceptance_length_by_k": {name: {"basis": r.acceptance_by_k["basis"].split(":")[0],
                                          "values": [x["mean_acceptance_length"] for x in r.acceptance_by_k["rows"]]}
                                   for name, r in ((a, ref), (b, other)) if r.acceptance_by_k},
        "prompts_compared": len(both), "prompts_identical": len(both) - len(differing),
        "differing_prompts": differing,
        "identical": counts_equal and not differing and len(both) == len(ref.per_prompt)
        and ref.acceptance_per_position == other.acceptance_per_position,
    }


def speedup_report(with_drafter: dict, without: dict, temperature: float) -> dict:
    levels = []
    for spec, base in zip(with_drafter["passes"], without["passes"]):
        a, b = pass_timing(spec), pass_timing(base)
        levels.append({"concurrency": spec["concurrency"], "with_drafter": a, "without_drafter": b,
                       "speedup": a["output_tokens_per_s"] / b["output_tokens_per_s"]})
    pairs = list(zip(with_drafter["passes"][0]["requests"], without["passes"][0]["requests"]))
    identical = sum(x["tokens"] == y["tokens"] for x, y in pairs) / len(pairs)
    return {"levels": levels,
            # at T > 0 the two runs sample differently by design; equality is a greedy-only check
            "identical_outputs": identical if temperature == 0 else None,
            "engine_start_s": {"with_drafter": with_drafter["engine"]["start_s"],
                               "without_drafter": without["engine"]["start_s"]}}



def pass_timing(p: dict) -> dict:
    reqs = p["requests"]
    tokens = sum(len(r["tokens"]) for r in reqs)
    # time per output token after the first, as `vllm bench serve` reports TPOT
    tpot = [(r["e2e_s"] - r["ttft_s"]) / (len(r["tokens"]) - 1) for r in reqs
            if r["ttft_s"] is not None and len(r["tokens"]) > 1]
    e2e = [r["e2e_s"] for r in reqs]
    return {"output_tokens": tokens, "wall_s": p["wall_s"], "output_tokens_per_s": tokens / p["wall_s"],
            "mean_tpot_ms": 1000 * mean(tpot) if tpot else None, "mean_e2e_s": mean(e2e), "median_e2e_s": median(e2e)}
