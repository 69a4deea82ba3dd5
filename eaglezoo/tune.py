"""`eaglezoo tune`: which K at which load, as the engine's own config.

On the engine users deploy (vLLM's offline engine, `verify/vllm_engine.py`), one workload runs with the drafter
at every K = 1..K_max and without it (K = 0), each at every concurrency: a full grid, measured, nothing fitted.
The goodput-optimal K per concurrency is the one with the most output tokens per second (K = 0 where
speculation loses); batch sizes between two measured concurrencies take the K measured at the next one up
(said in the report: interpolated, not measured). The decision is written as vLLM's
`num_speculative_tokens_per_batch_size` schedule and SGLang's static best, then confirmed: one more engine run
with the recommended schedule, reported beside the best static K.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from . import __version__
from .errors import BadInput, UsageError
from .limits import MAX_CONCURRENCY, MAX_LEVELS, MAX_TUNE_K
from .serving import serve_config, vllm_serve_command
from .verify.conversation import converse
from .verify.report import PassTiming, built, pass_timing
from .verify.vllm_engine import EngineOptions, check_vllm_options, vllm_session
from .verify.workload import Progress, Workload


class Cell(BaseModel):
    k: int  # 0: without the drafter
    concurrency: int
    output_tokens_per_s: float
    mean_tpot_ms: float | None
    acceptance_length: float | None  # the engine's own count at this K and load
    acceptance_per_position: list[float] | None = None


class Choice(BaseModel):
    concurrency: int
    k: int
    output_tokens_per_s: float
    speedup: float  # against K = 0 at this concurrency, measured


class TuneEngine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Literal["vllm"] = "vllm"
    version: str | None
    device: str
    dtype: str


class ConfirmedPass(PassTiming):
    concurrency: int


class StaticPass(BaseModel):
    model_config = ConfigDict(extra="forbid")

    concurrency: int
    output_tokens_per_s: float


class Confirmation(BaseModel):
    """One more engine run with the recommended schedule, beside the best static K's cells."""

    model_config = ConfigDict(extra="forbid")

    schedule: list[ConfirmedPass]
    best_static_k: int
    best_static: list[StaticPass]


class Placement(BaseModel):
    model_config = ConfigDict(extra="forbid")

    measured: str  # where this ran
    entry: str | None  # the registry entry's runner class


class KFloor(BaseModel):
    model_config = ConfigDict(extra="forbid")

    per_position: list[float] | None
    mean_acceptance_length: float | None


class TuneReport(BaseModel):
    """One tune run: the grid, the decision as each engine's own config, its confirmation."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: Literal["tune"] = "tune"
    """Which command wrote it."""
    drafter: str
    """The drafter measured."""
    target: str
    """The target as the engine loaded it."""
    engine: TuneEngine
    """The engine measured on: vLLM's version, device and dtype."""
    k_max: int
    """Every K from 0 (no drafter) to this was measured."""
    concurrency: list[int]
    """The loads measured (requests in flight), rising."""
    num_prompts: int
    """Prompts in each pass."""
    max_new_tokens: int
    """Tokens generated per prompt."""
    grid: list[Cell]
    """Every (K, load) cell: output tokens/s, TPOT and the engine's acceptance."""
    decision: list[Choice]
    """Per load, the K with the most output tokens/s (K = 0 where speculation loses)."""
    schedule: list[list[int]]
    """vLLM's num_speculative_tokens_per_batch_size: [[first batch size, last batch size, K], ...]."""
    basis: str
    """What the decision rests on, in words."""
    vllm_speculative_config: dict
    """The --speculative-config that serves the schedule."""
    vllm_command: str
    """The vllm serve command with it."""
    sglang_static_k: int
    """SGLang takes one K: the best over the loads (geometric mean of the speedups)."""
    sglang_command: str | None
    """The SGLang command at that K (null when it is 0)."""
    confirmation: Confirmation
    """The schedule run once more, beside the best static K's cells."""
    hardware: Placement | None = None
    """Where this ran, beside the registry entry's hardware class."""
    floors: dict[str, KFloor] = {}
    """By K: the registry entry's floors, checked at every load."""
    failures: list[str] = []
    """A measured K below its floor: the drafter is not the one recorded (exit 1)."""
    notes: list[str] = []
    """What the reader must know (interpolated loads, loads the prompts cannot fill, the dialect served)."""
    eaglezoo_version: str = __version__
    """The eaglezoo that measured."""


def check_grid(concurrency: list[int], k_max: int, opts: EngineOptions) -> None:
    """What the options alone refuse: checked before anything is read or any engine starts."""
    if not 1 <= k_max <= MAX_TUNE_K:
        raise UsageError(f"--k-max {k_max}: give 1 to {MAX_TUNE_K}", hint="e.g. --k-max 4")
    if len(set(concurrency)) != len(concurrency) or concurrency != sorted(concurrency):
        raise UsageError(f"--concurrency {','.join(map(str, concurrency))}: give distinct levels in rising order",
                         hint="e.g. --concurrency 1,4,16")
    max_seqs = opts.extra.get("max_num_seqs")
    if max_seqs is not None and (type(max_seqs) is not int or max_seqs < 1):
        raise UsageError(f"--engine-args max_num_seqs must be a positive integer, got {str(max_seqs)[:40]!r}",
                         hint="e.g. --engine-args '{\"max_num_seqs\": 64}'")
    if max_seqs is not None and concurrency[-1] > max_seqs:
        raise UsageError(f"--concurrency {concurrency[-1]} exceeds the engine's max_num_seqs ({max_seqs}): it never "
                         "batches that many", hint=f"measure up to {max_seqs}, or raise max_num_seqs in --engine-args")
    check_vllm_options(opts)


def check_prompts(work: Workload) -> None:
    if work.temperature != 0:
        raise UsageError("tune measures greedy serving (temperature 0)", hint="drop --temperature")
    sampled = sum(t > 0 for t in work.temperatures())
    if sampled:
        raise UsageError(f"tune measures greedy serving (temperature 0), and {sampled} prompt(s) of the set ask for "
                         "their own temperature", hint="give prompts without a \"temperature\" (--prompts FILE)")


@dataclass(frozen=True)
class TuneRequest:
    """What tune measures, built once by the command: K from 0 to k_max at every load, on this engine."""

    k_max: int
    levels: tuple[int, ...]
    max_new_tokens: int = 64
    max_prompts: int | None = None
    engine_options: EngineOptions = field(default_factory=EngineOptions)
    parallel_given: bool = False  # the user chose the parallel sizes: a registry entry's hardware does not


Floors = dict[int, tuple[list[float] | None, float | None]]  # K -> (per-position floors, acceptance-length floor)


def tune(work: Workload, opts: EngineOptions, concurrency: list[int], progress: Progress, floors: Floors | None = None,
         entry_hardware: str | None = None) -> TuneReport:
    """The grid, the decision, the configs and the confirmation run (work.k is K_max); the registry entry's floors
    checked on the grid, and its hardware class set beside the one measured."""
    check_grid(concurrency, work.k, opts)
    check_prompts(work)
    concurrency = work.reachable(concurrency)
    with vllm_session(work, opts, progress) as session:  # one process: vLLM imported once for the whole grid
        work = converse(work, lambda sub: session.measure(sub, None, progress), "vllm")  # multi-turn rows, answered
        drafter = str(session.drafter)

        def run(config: dict | None, label: str) -> dict:
            return session.run(work, config, label, concurrency)

        runs = {0: run(None, "without the drafter")}
        for k in range(1, work.k + 1):
            runs[k] = run(speculative_config(drafter, k), f"K={k}")
        grid = [cell(k, p) for k, r in runs.items() for p in r["passes"]]
        decision = decide(grid, concurrency)
        schedule = schedule_of(decision)
        confirmed = run(speculative_config(drafter, work.k, schedule), "the recommended schedule")
    return report(work, runs[0]["engine"], grid, decision, schedule, confirmed, concurrency, floors or {},
                  placement(runs[0]["engine"], opts, entry_hardware))


def speculative_config(drafter: str, k: int, schedule: list[list[int]] | None = None) -> dict:
    config = {"method": "eagle3", "model": drafter, "num_speculative_tokens": k}
    if schedule is not None:
        config["num_speculative_tokens_per_batch_size"] = schedule
    return config


def cell(k: int, p: dict) -> Cell:
    timing, counters = pass_timing(p), p["counters"]
    drafts = counters["drafts"] if k else 0
    return Cell(k=k, concurrency=p["concurrency"], output_tokens_per_s=timing["output_tokens_per_s"],
                mean_tpot_ms=timing["mean_tpot_ms"], acceptance_length=1 + counters["accepted"] / drafts if drafts else None,
                acceptance_per_position=[n / drafts for n in counters["per_position"]] if drafts else None)


def floor_checks(grid: list[Cell], k_max: int, floors: Floors) -> tuple[dict[str, KFloor], list[str], list[str]]:
    """The registry entry's floors at every K tune measured, at every load: a decision made on a drafter that
    falls below its recorded acceptance (wrong aux ids, a dropped norm) would be a decision about another drafter.
    (floors checked, failures, notes)."""
    checked, failures, notes = {}, [], []
    for k, (per_position, al) in sorted(floors.items()):
        if k > k_max:
            notes.append(f"the registry entry's floors at K={k} were not checked: tune measured K up to {k_max}")
            continue
        checked[str(k)] = KFloor(per_position=per_position, mean_acceptance_length=al)
        for x in (x for x in grid if x.k == k):
            where = f"K={k} at concurrency {x.concurrency}"
            failures += [f"{where}: acceptance at position {i + 1} is {rate:.3f} < {floor}"
                         for i, (rate, floor) in enumerate(zip(x.acceptance_per_position or [], per_position or []))
                         if rate < floor]
            if al is not None and x.acceptance_length is not None and x.acceptance_length < al:
                failures.append(f"{where}: acceptance length {x.acceptance_length:.3f} < {al}")
    return checked, failures, notes


def placement(engine: dict, opts: EngineOptions, entry_hardware: str | None) -> tuple[Placement, list[str]]:
    measured = (f"{engine['device']} {engine['dtype']}, tensor parallel {opts.tensor_parallel_size} x pipeline "
                f"parallel {opts.pipeline_parallel_size}")
    notes = []
    if entry_hardware and engine["device"].startswith("cpu"):
        notes.append(f"the registry entry serves its target on {entry_hardware}; this decision was measured on "
                     f"{measured}: which K pays depends on the hardware, so tune where you serve")
    return Placement(measured=measured, entry=entry_hardware), notes


def decide(grid: list[Cell], concurrency: list[int]) -> list[Choice]:
    """Per concurrency, the K with the most output tokens per second (K = 0 when none beats the target alone)."""
    out = []
    for c in concurrency:
        cells = [x for x in grid if x.concurrency == c]
        base = next(x for x in cells if x.k == 0).output_tokens_per_s
        best = max(cells, key=lambda x: (x.output_tokens_per_s, -x.k))
        out.append(Choice(concurrency=c, k=best.k, output_tokens_per_s=best.output_tokens_per_s,
                          speedup=best.output_tokens_per_s / base))
    return out


def schedule_of(decision: list[Choice]) -> list[list[int]]:
    """vLLM's inclusive batch-size ranges: each measured level covers the sizes above the previous one; the last
    K carries on above the highest level (as vLLM does). Neighbours with one K merge."""
    ranges: list[list[int]] = []
    start = 1
    for choice in decision:
        if ranges and ranges[-1][2] == choice.k:
            ranges[-1][1] = choice.concurrency
        else:
            ranges.append([start, choice.concurrency, choice.k])
        start = choice.concurrency + 1
    return ranges


def static_best(grid: list[Cell], concurrency: list[int]) -> int:
    """One K for every load (SGLang takes one): the highest geometric-mean speedup over the measured levels."""
    def gain(k: int) -> float:
        ratios = [next(x for x in grid if x.k == k and x.concurrency == c).output_tokens_per_s /
                  next(x for x in grid if x.k == 0 and x.concurrency == c).output_tokens_per_s for c in concurrency]
        return math.exp(sum(map(math.log, ratios)) / len(ratios))
    return max(sorted({x.k for x in grid}), key=gain)


def report(work: Workload, engine: dict, grid: list[Cell], decision: list[Choice], schedule: list[list[int]],
           confirmed: dict, concurrency: list[int], floors: Floors | None = None,
           placed: tuple[Placement, list[str]] | None = None) -> TuneReport:
    """The one report of a tune run, built once: the entry's floors checked and its hardware placed here."""
    target = work.target_name
    config = speculative_config(str(work.drafter.path), work.k, schedule)
    static = static_best(grid, concurrency)
    sglang = None if static == 0 else serve_config(work.spec, "sglang", str(work.drafter.path), target, static).command
    static_passes = {x.concurrency: x.output_tokens_per_s for x in grid if x.k == static}
    confirmation = {"schedule": [{"concurrency": p["concurrency"], **pass_timing(p)} for p in confirmed["passes"]],
                    "best_static_k": static, "best_static": [{"concurrency": c, "output_tokens_per_s": static_passes[c]}
                                                             for c in concurrency]}
    notes = list(work.notes)
    if all(c.k == 0 for c in decision):
        measured = ", ".join(f"{p['output_tokens_per_s']:.1f}" for p in confirmation["schedule"])
        alone = ", ".join(f"{d.output_tokens_per_s:.1f}" for d in decision)
        notes.append(f"speculation loses at every measured load here (K = 0 throughout): serve without "
                     f"--speculative-config; with the all-zero schedule the engine measured {measured} tokens/s "
                     f"against {alone} without the drafter")
    notes += contradicted(confirmation["schedule"], grid, decision)
    if work.drafter.dialect not in ("eagle31", "speculators"):
        notes.append(f"the commands name the drafter folder as given ({work.drafter.dialect} dialect): vLLM and SGLang "
                     "read the EAGLE 3.1 schema, so serve `eaglezoo convert DRAFTER OUT` instead")
    if len(concurrency) > 1:
        notes.append("batch sizes between two measured concurrencies take the K measured at the next one up "
                     "(interpolated, not measured); above the highest, its K carries on")
    checked, failures, floor_notes = floor_checks(grid, work.k, floors or {})
    hardware, place_notes = placed or (None, [])
    return built(
        TuneReport, drafter=str(work.drafter.path), target=target,
        engine={"name": "vllm", "version": engine["version"], "device": engine["device"], "dtype": engine["dtype"]},
        k_max=work.k, concurrency=concurrency, num_prompts=len(work.encoded), max_new_tokens=work.max_new_tokens,
        grid=grid, decision=decision, schedule=schedule,
        basis=f"measured: every K in 0..{work.k} at every concurrency, {len(work.encoded)} prompts x "
              f"{work.max_new_tokens} tokens each, greedy, on this engine",
        vllm_speculative_config=config,
        vllm_command=vllm_serve_command(target, config),
        sglang_static_k=static, sglang_command=sglang, confirmation=confirmation, hardware=hardware, floors=checked,
        failures=failures, notes=notes + floor_notes + place_notes)


def contradicted(confirmed: list[dict], grid: list[Cell], decision: list[Choice]) -> list[str]:
    """Loads where the confirmation run with the schedule fell below serving without the drafter: there the
    decision is within this machine's noise, and the report says so rather than stand by it."""
    without = {c.concurrency: c.output_tokens_per_s for c in grid if c.k == 0}
    chosen = {d.concurrency: d.k for d in decision}
    notes = []
    for p in confirmed:
        c, measured = p["concurrency"], p["output_tokens_per_s"]
        if chosen.get(c, 0) > 0 and measured < without[c]:
            notes.append(f"at concurrency {c} the confirmation with the schedule measured {measured:.1f} tokens/s, "
                         f"below the {without[c]:.1f} measured without the drafter: the choice of K={chosen[c]} there "
                         "is within this machine's noise (measure more prompts or tokens)")
    return notes


def tune_from(data: dict, where: str) -> TuneReport:
    """A saved tune report, refused (one BadInput naming the field) unless it holds what tune writes: a whole grid,
    decisions that follow it, and the serving command its own speculative config gives (the page prints it)."""
    from .verify.saved import number, validated

    def refuse(what: str) -> BadInput:
        return BadInput(f"{where}: {what}", hint="give the file that eaglezoo tune --report FILE wrote")

    r = validated(TuneReport, data, refuse)
    levels = r.concurrency
    if (not 1 <= r.k_max <= MAX_TUNE_K or not 1 <= len(levels) <= MAX_LEVELS or levels != sorted(set(levels))
            or not 1 <= levels[0] <= levels[-1] <= MAX_CONCURRENCY):
        raise refuse(f"k_max {r.k_max} or concurrency {levels[:8]}; expected K from 1 to {MAX_TUNE_K} and distinct "
                     "rising levels")
    grid = {(c.k, c.concurrency): c for c in r.grid}
    if len(grid) != len(r.grid) or set(grid) != {(k, c) for k in range(r.k_max + 1) for c in levels}:
        raise refuse("grid is not one cell per K (0 to k_max) and concurrency; expected the whole grid")
    if not all(number(c.output_tokens_per_s) and c.output_tokens_per_s > 0 for c in r.grid):
        raise refuse("grid holds an output_tokens_per_s that is not a positive number")
    if [d.concurrency for d in r.decision] != levels:
        raise refuse("decision is not one choice per concurrency, in order")
    for d in r.decision:
        cell, base = grid.get((d.k, d.concurrency)), grid[(0, d.concurrency)]
        if cell is None or d.output_tokens_per_s != cell.output_tokens_per_s or not math.isclose(
                d.speedup, cell.output_tokens_per_s / base.output_tokens_per_s, rel_tol=1e-6):
            raise refuse(f"decision at concurrency {d.concurrency} (K={d.k}) is not the grid's; expected a K from 0 "
                         f"to {r.k_max}, its cell's tokens/s and its speedup over K=0")
    config = speculative_config(r.drafter, r.k_max, r.schedule)
    if r.vllm_speculative_config != config or r.vllm_command not in (vllm_serve_command(r.target, config),
                                                                      _unmeasured_command(r.target, config)):
        raise refuse("vllm_command is not the command its target, drafter and schedule give")
    return r


def _unmeasured_command(target: str, config: dict) -> str:
    """The command tune wrote before it added what eaglezoo's measurements of the server need: still read."""
    return f"vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(_json(config))}"


def _json(value) -> str:
    import json

    return json.dumps(value, separators=(", ", ": "))
