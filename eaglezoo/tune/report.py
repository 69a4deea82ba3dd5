"""The one report of a tune run, built once from what was measured: the decision, each engine's config, the
confirmation's verdict, the no-speculation column, the registry entry's floors and hardware."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ..reproduce import reproduction
from ..serving import LLAMACPP_BUILD, llamacpp_serve_command, sglang_serve_command, vllm_serve_command
from ..verify.report import PassTiming
from ..verify.report.build import built, serving_path
from ..verify.report.gate import Floors, failure_of
from ..verify.report.gate import floor_checks as check_floors
from ..verify.vllm_engine import EngineOptions
from ..verify.vllm_process import EngineEvent
from ..verify.workload import Workload
from .decide import (
    decide,
    equal_within_margin,
    judge,
    recommendation,
    schedule_of,
    sglang_adaptive_config,
    static_best,
    table_k,
    verdict,
)
from .llamacpp import P_MIN_DEFAULT, P_MIN_TRIED
from .model import Adaptive, Cell, Choice, Cost, KFloor, LlamacppTune, NoSpeculation, Placement, PMinLevel, TuneReport
from .rule import WARMUP_PASSES, SamplingRule
from .stats import INTERVAL_LEVEL, SEPARATION_MARGIN

SGLANG_ADAPTIVE_FILE = "sglang-adaptive.json"
ISSUE = "vLLM #49986"


@dataclass(frozen=True)
class EntryFacts:
    """What a registry entry brings to a tune run: its floors per K (checked on the grid), its hardware class (set
    beside the placement measured) and its id (the convert command names the drafter by it). Empty without one."""

    floors: dict[int, Floors] = field(default_factory=dict)  # K -> the entry's whole-run floors (FloorTable.whole)
    hardware: str | None = None
    registry_id: str | None = None


NO_ENTRY = EntryFacts()


@dataclass(frozen=True)
class Measured:
    """Everything the engine measured for one tune, handed to `report`."""

    engine: EngineEvent
    grid: list[Cell]
    confirmed: list[Cell]
    confirmed_timing: list[
        PassTiming
    ]  # per load: pass_timing over every measured request (output_tokens_per_s: the median)
    confirmed_config: dict
    adaptive: Adaptive | None = None
    notes: tuple[str, ...] = ()
    cost: Cost | None = None
    engine_name: str = "vllm"
    p_min: list[PMinLevel] | None = None  # llama.cpp's p-min column (None on vLLM)


def speculative_config(drafter: str, k: int, schedule: list[list[int]] | None = None) -> dict:
    config = {"method": "eagle3", "model": drafter, "num_speculative_tokens": k}
    if schedule is not None:
        config["num_speculative_tokens_per_batch_size"] = schedule
    return config


def report(
    work: Workload,
    measured: Measured,
    concurrency: list[int],
    entry: EntryFacts = NO_ENTRY,
    placed: tuple[Placement, list[str]] | None = None,
    rule: SamplingRule | None = None,
) -> TuneReport:
    """The one report of a tune run, built once. Its commands serve the drafter as serve-config does (the folder
    `convert_command` writes, where the engine would not read it as given; `entry.registry_id` names the entry it
    was read from, which convert names it by)."""
    registry_id = entry.registry_id
    rule = rule or SamplingRule()
    target, grid = work.target_name, measured.grid
    path = serving_path(work, registry_id)
    drafter = path.drafter  # what vLLM is given: the converted folder where conversion is needed
    static = static_best(grid, concurrency)
    decision = decide(grid, concurrency, static, rule.min_repeats)
    schedule = schedule_of(decision)
    config = speculative_config(drafter, work.k, schedule)
    decided = recommendation(decision)
    verdicts, confirm_failures, recommended = judge(grid, measured.confirmed, static, schedule, decided)
    rec_k = decision[0].k if recommended == decided else static
    sglang_path = None if static == 0 else serving_path(work, registry_id, "sglang", static)
    sglang = sglang_path and sglang_path.command
    adaptive_cfg = sglang_adaptive_config(decision) if any(d.k for d in decision) else None
    notes = list(work.notes) + too_close_notes(decision, grid) + list(measured.notes)
    no_spec = no_speculation(grid, measured.confirmed, schedule)
    notes += [
        f"at concurrency {x.concurrency} even the table's K=0 measured {x.table_tokens_per_s:.1f} tokens/s "
        f"against {x.no_speculation_tokens_per_s:.1f} with no speculative config ({ISSUE}: a K=0 entry in "
        "vLLM's table still costs throughput): serve without --speculative-config at such loads"
        for x in no_spec
        if x.table_k == 0 and x.verdict == "loses" and measured.p_min is None  # llama.cpp's K = 0 has no drafter
    ]
    if decided == "no speculation":
        notes.append(
            "speculation loses or is too close to call at every measured load (K = 0 throughout): serve "
            + ("without --speculative-config" if measured.p_min is None else "llama-server without -md")
        )
    if path.convert_command and measured.p_min is None:
        notes.append(f"the commands serve the folder `{path.convert_command}` writes: {'; '.join(path.warnings)}")
    if len(concurrency) > 1 and measured.p_min is None:
        notes.append(
            "batch sizes between two measured concurrencies take the K measured at the next one up "
            "(interpolated, not measured); above the highest, its K carries on"
        )
    llamacpp = None
    if measured.p_min is not None:
        ks = {
            c: rec_k if recommended == "static" else 0 if recommended == "no speculation" else k
            for c, k in ((d.concurrency, d.k) for d in decision)
        }
        llamacpp = llamacpp_tune(work, registry_id, ks, measured.p_min)
        notes.append(
            f"measured on llama.cpp {LLAMACPP_BUILD}: llama-server takes one K for all its slots, so each load was "
            "measured on a server with that many slots (-np), and each load has its command; the report's vLLM and "
            "SGLang configs carry the same decision to those engines, unmeasured there"
        )
    checked, failures, floor_notes = floor_checks(grid, work.k, entry.floors)
    hardware, place_notes = placed or (None, [])
    return built(
        TuneReport,
        drafter=str(work.drafter.path),
        target=target,
        convert_command=path.convert_command,
        llamacpp=llamacpp,
        engine={
            "name": measured.engine_name,
            "version": measured.engine.version,
            "device": measured.engine.device,
            "dtype": measured.engine.dtype,
        },
        k_max=work.k,
        concurrency=concurrency,
        num_prompts=len(work.encoded),
        max_new_tokens=work.max_new_tokens,
        grid=grid,
        decision=decision,
        schedule=schedule,
        basis=basis(work, rule),
        vllm_speculative_config=config,
        vllm_command=table_command(target, config),
        sglang_static_k=static,
        sglang_command=sglang,
        confirmation=confirmation(measured, grid, static, verdicts, decided, bool(confirm_failures)),
        recommended=recommended,
        recommended_command=command_of(recommended, target, drafter, rec_k, config),
        no_speculation=no_spec,
        adaptive=measured.adaptive,
        sglang_adaptive_config=adaptive_cfg,
        sglang_adaptive_command=None
        if adaptive_cfg is None
        else sglang_serve_command(
            target,
            serving_path(work, registry_id, "sglang").drafter,
            None,
            max(d.k for d in decision),
            SGLANG_ADAPTIVE_FILE,
        ),
        sampling={
            "warmup_passes": WARMUP_PASSES,
            "min_tokens": rule.min_tokens,
            "min_seconds": rule.min_seconds,
            "min_repeats": rule.min_repeats,
            "max_repeats": rule.max_repeats,
            "budget_s": rule.budget_s,
            "interval_level": INTERVAL_LEVEL,
            "separation_margin": SEPARATION_MARGIN,
        },
        cost=measured.cost,
        hardware=hardware,
        floors=checked,
        failures=failures + confirm_failures,
        notes=notes + floor_notes + place_notes,
        reproduction=reproduction(
            engine=f"{measured.engine_name} {measured.engine.version}",
            prompt_set=work.prompt_set and work.prompt_set.name,
            prompts_sha256=work.prompt_set and work.prompt_set.sha256,
            seed=work.seed,
        ),
    )


def llamacpp_tune(work: Workload, registry_id: str | None, ks: dict[int, int], tried: list[PMinLevel]) -> LlamacppTune:
    """The llama-server command per load: its K, the p-min that won there (else 0), as many slots as the load;
    the GGUF paths and conversions as serve-config --engine llamacpp prints them."""
    path = serving_path(work, registry_id, "llamacpp")
    family = work.drafter.spec.family
    won = {x.concurrency: x.p_min for x in tried if x.against_p_min_0 == "wins" and x.k == ks[x.concurrency]}
    levels = []
    for c, k in ks.items():
        p_min = won.get(c, P_MIN_DEFAULT)
        command = llamacpp_serve_command(path.target, path.drafter, family, k, p_min, parallel=c)
        levels.append({"concurrency": c, "k": k, "p_min": p_min, "command": command})
    return LlamacppTune(
        build=LLAMACPP_BUILD,
        p_min_grid=[P_MIN_DEFAULT, P_MIN_TRIED],
        p_min=tried,
        levels=levels,
        steps=[x for x in (path.target_convert_command, path.convert_command) if x],
    )


def basis(work: Workload, rule: SamplingRule) -> str:
    return (
        f"measured: every K in 0..{work.k} at every concurrency, {len(work.encoded)} prompts x "
        f"{work.max_new_tokens} tokens each, greedy, on this engine; each cell after {WARMUP_PASSES} warm-up "
        f"pass, in repeats of at least {rule.min_tokens} tokens and {rule.min_seconds:g} s, {rule.min_repeats} "
        f"to {rule.max_repeats} repeats until the best K stands apart from the rest round by round, or they are "
        f"equal within the margin"
    )


def too_close_notes(decision: list[Choice], grid: list[Cell]) -> list[str]:
    def why(d: Choice) -> str:
        if equal_within_margin([x for x in grid if x.concurrency == d.concurrency]):
            return (
                f"within {SEPARATION_MARGIN:.0%} of each other round by round after {d.settled_after} repeats, "
                "which more repeats could not tell apart by more"
            )
        return f"not told apart after {d.settled_after} repeats"

    return [
        f"concurrency {d.concurrency} is too close to call: K={', K='.join(map(str, d.contenders))} are {why(d)}; "
        f"the simpler K={d.k} is taken"
        for d in decision
        if d.too_close
    ]


def command_of(recommended: str, target: str, drafter: str, k: int, table: dict) -> str:
    if recommended == "no speculation":
        return shlex.join(["vllm", "serve", target])
    return vllm_serve_command(target, table if recommended == "table" else speculative_config(drafter, k))


def table_command(target: str, config: dict) -> str:
    """vLLM's K table as a command: a table whose every K is 0 drafts nothing and still costs throughput
    (vLLM #49986), so it is served without a speculative config."""
    rows = config.get("num_speculative_tokens_per_batch_size")
    if rows and all(row[2] == 0 for row in rows):
        return shlex.join(["vllm", "serve", target])
    return vllm_serve_command(target, config)


def confirmation(measured: Measured, grid: list[Cell], static: int, verdicts, decided: str, failed: bool) -> dict:
    levels = []
    for x, timing, (none, best) in zip(measured.confirmed, measured.confirmed_timing, verdicts, strict=True):
        levels.append(
            {
                "concurrency": x.concurrency,
                **timing.model_dump(),
                "output_tokens_per_s": x.output_tokens_per_s,
                "repeats": x.repeats,
                "interval": x.interval,
                "latency": x.latency,
                "against_no_speculation": none,
                "against_best_static": best,
            }
        )
    return {
        "schedule": levels,
        "best_static_k": static,
        "best_static": [
            {"concurrency": x.concurrency, "output_tokens_per_s": x.output_tokens_per_s} for x in grid if x.k == static
        ],
        "config": measured.confirmed_config,
        "verdict": "not judged" if decided == "no speculation" else "failed" if failed else "confirmed",
    }


def no_speculation(grid: list[Cell], confirmed: list[Cell], schedule: list[list[int]]) -> list[NoSpeculation]:
    """The table (the confirmation run) against no speculative config at every load."""
    out = []
    for x in confirmed:
        none = next(g for g in grid if g.k == 0 and g.concurrency == x.concurrency)
        out.append(
            NoSpeculation(
                concurrency=x.concurrency,
                table_k=table_k(schedule, x.concurrency),
                table_tokens_per_s=x.output_tokens_per_s,
                no_speculation_tokens_per_s=none.output_tokens_per_s,
                ratio=x.output_tokens_per_s / none.output_tokens_per_s,
                verdict=verdict(
                    x.interval or (x.output_tokens_per_s,) * 2,
                    x.output_tokens_per_s,
                    none.interval or (none.output_tokens_per_s,) * 2,
                    none.output_tokens_per_s,
                ),
            )
        )
    return out


def floor_checks(
    grid: list[Cell], k_max: int, floors: dict[int, Floors]
) -> tuple[dict[str, KFloor], list[str], list[str]]:
    """The registry entry's floors at every K tune measured, at every load: a decision made on a drafter that
    falls below its recorded acceptance (wrong aux ids, a dropped norm) would be a decision about another drafter.
    (floors checked, failures, notes). Each cell is checked as verify checks a run (`gate.floor_checks`)."""
    checked, failures, notes = {}, [], []
    for k, floor in sorted(floors.items()):
        if k > k_max:
            notes.append(f"the registry entry's floors at K={k} were not checked: tune measured K up to {k_max}")
            continue
        checked[str(k)] = KFloor(per_position=floor.min_acceptance, mean_acceptance_length=floor.min_al)
        for x in (x for x in grid if x.k == k):
            checks = check_floors(floor, x.acceptance_per_position or [], x.acceptance_length, {}, "registry", True)
            failures += [f"K={k} at concurrency {x.concurrency}: {failure_of(c)}" for c in checks if c.met is False]
    return checked, failures, notes


def placement(engine: EngineEvent, opts: EngineOptions, entry_hardware: str | None) -> tuple[Placement, list[str]]:
    measured = (
        f"{engine.device} {engine.dtype}, tensor parallel {opts.tensor_parallel_size} x pipeline "
        f"parallel {opts.pipeline_parallel_size}"
    )
    notes = []
    if entry_hardware and engine.device.startswith("cpu"):
        notes.append(
            f"the registry entry serves its target on {entry_hardware}; this decision was measured on "
            f"{measured}: which K pays depends on the hardware, so tune where you serve"
        )
    return Placement(measured=measured, entry=entry_hardware), notes
