"""`eaglezoo tune`: which K at which load, as the engine's own config.

On the engine users deploy (vLLM's offline engine, `verify/vllm_engine.py`), one workload runs with the drafter
at every K = 1..K_max and without it (K = 0), each at every concurrency: a full grid, measured, nothing fitted.
Every cell is measured until its figure can be trusted (`measure.py`: warm-up, repeats of a minimum length, more
repeats of the cells still contending until their intervals separate or the budget is spent). Per load the K with
the most output tokens per second wins where its interval stands apart; otherwise the load is too close to call
and the simpler configuration is taken (`decide.py`). Batch sizes between two measured concurrencies take the K
measured at the next one up (said in the report). The decision is written as vLLM's
`num_speculative_tokens_per_batch_size` table, SGLang's static best and its adaptive config, then confirmed: the
recommended configuration measured again and judged against no speculation and the best static K.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import EngineError, UsageError
from ..limits import MAX_TUNE_K
from ..verify.conversation import converse
from ..verify.llamacpp_engine import LlamacppOptions, check_llamacpp_options
from ..verify.vllm_engine import EngineOptions, VllmSession, check_vllm_options, vllm_session
from ..verify.workload import Progress, Workload
from .budget import Budget, Say, minutes
from .cost import cost_of
from .decide import decide, recommendation, schedule_of, static_best, table_k, verdict
from .llamacpp import P_MIN_TRIED, LlamacppSession, llamacpp_tune_session
from .measure import Bench, Samples, cell_of, grid_of, settle, timing_of
from .model import Adaptive, AdaptiveLevel, Cell, Choice, PMinLevel, TuneReport
from .report import NO_ENTRY, EntryFacts, Measured, placement, report, speculative_config
from .rule import SamplingRule


def check_grid(
    concurrency: list[int],
    k_max: int,
    opts: EngineOptions,
    rule: SamplingRule | None = None,
    llamacpp: LlamacppOptions | None = None,
) -> None:
    """What the options alone refuse: checked before anything is read or any engine starts (`llamacpp`: tune runs
    on llama-server, with these settings, instead of vLLM)."""
    if not 1 <= k_max <= MAX_TUNE_K:
        raise UsageError(f"--k-max {k_max}: give 1 to {MAX_TUNE_K}", hint="e.g. --k-max 4")
    if len(set(concurrency)) != len(concurrency) or concurrency != sorted(concurrency):
        raise UsageError(
            f"--concurrency {','.join(map(str, concurrency))}: give distinct levels in rising order",
            hint="e.g. --concurrency 1,4,16",
        )
    if rule is not None and rule.max_repeats < rule.min_repeats:
        raise UsageError(
            f"--max-repeats {rule.max_repeats} is below --repeats {rule.min_repeats}",
            hint=f"give --max-repeats of at least {rule.min_repeats}",
        )
    max_seqs = opts.extra.get("max_num_seqs")
    if max_seqs is not None and (type(max_seqs) is not int or max_seqs < 1):
        raise UsageError(
            f"--engine-args max_num_seqs must be a positive integer, got {str(max_seqs)[:40]!r}",
            hint="e.g. --engine-args '{\"max_num_seqs\": 64}'",
        )
    if max_seqs is not None and concurrency[-1] > max_seqs:
        raise UsageError(
            f"--concurrency {concurrency[-1]} exceeds the engine's max_num_seqs ({max_seqs}): it never "
            "batches that many",
            hint=f"measure up to {max_seqs}, or raise max_num_seqs in --engine-args",
        )
    if llamacpp is None:
        check_vllm_options(opts)
    else:
        check_llamacpp_options(llamacpp)


def check_prompts(work: Workload) -> None:
    if work.temperature != 0:
        raise UsageError("tune measures greedy serving (temperature 0)", hint="drop --temperature")
    sampled = sum(t > 0 for t in work.temperatures())
    if sampled:
        raise UsageError(
            f"tune measures greedy serving (temperature 0), and {sampled} prompt(s) of the set ask for "
            "their own temperature",
            hint='give prompts without a "temperature" (--prompts FILE)',
        )


@dataclass(frozen=True)
class TuneRequest:
    """What tune measures, built once by the command: K from 0 to k_max at every load, on this engine."""

    k_max: int
    levels: tuple[int, ...]
    max_new_tokens: int = 64
    max_prompts: int | None = None
    engine_options: EngineOptions = field(default_factory=EngineOptions)
    parallel_given: bool = False  # the user chose the parallel sizes: a registry entry's hardware does not
    sampling: SamplingRule = field(default_factory=SamplingRule)
    llamacpp: LlamacppOptions | None = None  # tune on llama-server (--engine llamacpp) instead of vLLM


def tune(  # noqa: PLR0913 - llama.cpp's settings beside vLLM's options, and say: the plan and rounds on stderr
    work: Workload,
    opts: EngineOptions,
    concurrency: list[int],
    progress: Progress,
    entry: EntryFacts = NO_ENTRY,
    rule: SamplingRule | None = None,
    llamacpp: LlamacppOptions | None = None,
    say: Say = lambda _: None,
) -> TuneReport:
    """The grid measured until settled, the decision, the configs, the confirmation and the adaptive column
    (work.k is K_max); the registry entry's floors checked on the grid, and its hardware class set beside.
    `llamacpp`: the same on llama-server, with llama.cpp's p-min column in place of vLLM's adaptive one."""
    rule = rule or SamplingRule()
    check_grid(concurrency, work.k, opts, rule, llamacpp)
    check_prompts(work)
    concurrency = work.reachable(concurrency)
    opened = time.perf_counter()
    with engine_session(work, opts, progress, llamacpp) as (session, work):  # every K's engine kept where it fits
        drafter, bench = str(session.drafter), Bench(session, work, rule)

        def config_of(k: int) -> dict | None:
            return speculative_config(drafter, k) if k else None

        budget = Budget(rule.budget_s, work.k, opened)
        rows = rounds(bench, budget, work.k, concurrency, config_of, say)
        held = [] if llamacpp is not None else [held_note(bench, work.k + 1)]
        if len(next(iter(rows[0].values())).repeats) == rule.min_repeats:
            settle(bench, rows, concurrency, config_of, budget, say)
        grid = grid_of(rows)
        static = static_best(grid, concurrency)
        decision = decide(grid, concurrency, static, rule.min_repeats)
        confirm = recommended_config(drafter, work.k, decision)
        confirmed = bench.measure(confirm, "the recommended configuration", concurrency, rule.min_repeats)
        if llamacpp is None:
            adaptive, notes, p_min = *adaptive_column(bench, drafter, work.k, opts, grid, concurrency), None
        else:
            adaptive, notes, p_min = None, [], p_min_column(bench, drafter, grid, decision)
    measured = Measured(
        engine=bench.engine,
        grid=grid,
        confirmed=[cell_of(table_k(schedule_of(decision), c), c, s) for c, s in sorted(confirmed.items())],
        confirmed_timing=[timing_of(s) for _, s in sorted(confirmed.items())],
        confirmed_config=confirm,
        adaptive=adaptive,
        notes=tuple(held + budget.cut + notes),
        cost=cost_of(bench, rows, confirmed, time.perf_counter() - opened),
        engine_name="vllm" if llamacpp is None else "llamacpp",
        p_min=p_min,
    )
    return report(work, measured, concurrency, entry, placement(measured.engine, opts, entry.hardware), rule)


@contextlib.contextmanager
def engine_session(
    work: Workload, opts: EngineOptions, progress: Progress, llamacpp: LlamacppOptions | None
) -> Iterator[tuple[VllmSession | LlamacppSession, Workload]]:
    """The engine tune measures on, and the workload with its conversations answered there (vLLM); llama.cpp's
    session refuses conversations."""
    if llamacpp is not None:
        with llamacpp_tune_session(work, llamacpp, progress) as served:
            yield served, work
        return
    with vllm_session(work, opts, progress, hold=work.k + 2) as session:  # one process: vLLM imported once; K = 0..
        # K_max and the confirmation each on an engine kept warm across the rounds, while they fit in memory
        yield session, converse(work, lambda sub: session.measure(sub, None, progress), "vllm")


def p_min_column(bench: Bench, drafter: str, grid: list[Cell], decision: list[Choice]) -> list[PMinLevel]:
    """llama.cpp's --spec-draft-p-min: at each load, P_MIN_TRIED measured at the decided K, or where that is 0 at
    the drafting K with the best median (warm-up, then --repeats repeats, not settled further), and judged against
    that K's p-min 0 cell by their intervals. It is chosen only at the decided K and only where it wins (too close
    to call keeps the default, 0); at a load that serves without the drafter the figure says what p-min did for the
    best K there."""
    out = []
    for d in decision:
        k = d.k or max((g for g in grid if g.k and g.concurrency == d.concurrency), key=tokens_per_s).k
        config = {**speculative_config(drafter, k), "p_min": P_MIN_TRIED}
        row = bench.measure(config, f"K={k}, p-min {P_MIN_TRIED:g}", [d.concurrency], bench.rule.min_repeats)
        x = cell_of(k, d.concurrency, row[d.concurrency])
        base = next(g for g in grid if g.k == k and g.concurrency == d.concurrency)
        v = verdict(
            x.interval or (x.output_tokens_per_s,) * 2,
            x.output_tokens_per_s,
            base.interval or (base.output_tokens_per_s,) * 2,
            base.output_tokens_per_s,
        )
        out.append(
            PMinLevel(
                concurrency=d.concurrency,
                k=k,
                p_min=P_MIN_TRIED,
                output_tokens_per_s=x.output_tokens_per_s,
                repeats=x.repeats,
                interval=x.interval,
                acceptance_length=x.acceptance_length,
                against_p_min_0=v,
            )
        )
    return out


def tokens_per_s(x: Cell) -> float:
    return x.output_tokens_per_s


def rounds(
    bench: Bench, budget: Budget, k_max: int, levels: list[int], config_of, say: Say
) -> dict[int, dict[int, Samples]]:
    """rule.min_repeats rounds of K = 0..k_max, interleaved (a cell's repeats span the run, as the machine's load
    drifts), on every K's engine kept warm where they fit, else one engine start each; the plan (engine starts and
    their time) said after the first start, the one that times them, with how the engines are held, and a budget
    below one pass per cell refused there, before any other start; a round the budget cannot pay for is cut, and
    said (the decision then calls every load too close: `decide`'s min_repeats)."""
    rule = bench.rule
    rows: dict[int, dict[int, Samples]] = {}
    for n in range(rule.min_repeats):
        if n and not budget.allows(bench, k_max + 1):
            budget.cut.append(
                f"the budget ({minutes(budget.limit_s or 0)}) ended after {n} of {rule.min_repeats} rounds: every "
                f"cell has {n} repeat(s), too few to tell any apart, so every load is too close to call"
            )
            say(budget.cut[-1])
            break
        for k in range(k_max + 1):
            label = f"K={k}" if k else "without the drafter"
            rows[k] = bench.measure(config_of(k), f"{label}, repeat {n + 1}", levels, 1, rows.get(k))
            if bench.starts == 1 and bench.runs == 1:
                budget.check_minimum(bench)
                say(budget.plan(bench, k_max, rule.min_repeats, rule.max_repeats))
                if isinstance(bench.session, VllmSession):
                    say(held_note(bench, k_max + 1))
        say(f"round {n + 1} of {rule.min_repeats}: {bench.starts} engine starts, {minutes(budget.spent_s())} so far")
    return rows


GIB = 1 << 30


def held_note(bench: Bench, cells: int) -> str:
    """How the engines were held (vLLM): every K's kept warm across the rounds, or one at a time, and why."""
    first = bench.engine
    size = f"about {first.footprint_bytes / GIB:.1f} GiB each" if first and first.footprint_bytes else "their size"
    if bench.keeps(cells):
        return (
            f"every K's engine was started once and kept warm across the rounds ({cells} held at once, {size} as "
            "measured at the first start), so a cell's repeats are interleaved with every other K's on the same "
            "engines"
        )
    if first is not None and not first.device.startswith("cpu"):
        return (
            "one engine at a time: on a GPU vLLM's engine asks for gpu_memory_utilization of the device's memory as "
            "it starts and refuses where less is free (vllm/v1/worker/utils.py, request_memory), so every repeat "
            "of a K starts its engine again (vLLM's sleep mode, which would keep them, is not used yet)"
        )
    return (
        f"one engine at a time: {bench.fit} of the {cells} engines ({size}) fit in the memory available at the "
        "first start, so every repeat of a K starts its engine again"
    )


def recommended_config(drafter: str, k_max: int, decision: list[Choice]) -> dict:
    """What the confirmation runs: the static K or the table the decision recommends; where no speculation is
    recommended, the all-zero table (to show what a table of zeros costs against no speculative config)."""
    if recommendation(decision) == "static":
        return speculative_config(drafter, decision[0].k)
    return speculative_config(drafter, k_max, schedule_of(decision))


ADAPTIVE_ON_CPU = (
    "vLLM's adaptive verification (enable_adaptive_verification) was not measured: vLLM 0.32 runs it "
    "only on Model Runner V2's GPU path with full CUDA graphs (vllm/config/vllm.py: "
    "_validate_adaptive_verification requires them; _get_v1_model_runner_unsupported_features lists "
    '"adaptive draft verification"), and the CPU backend\'s CPUModelRunner is the V1 runner '
    "(vllm/v1/worker/cpu_model_runner.py). Its docstring in vllm/config/speculative.py says it is "
    'supported only for method="dspark" so far'
)


def adaptive_column(
    bench: Bench, drafter: str, k_max: int, opts: EngineOptions, grid: list[Cell], concurrency: list[int]
) -> tuple[Adaptive | None, list[str]]:
    """vLLM's online K selection as one more column where the hardware allows it; otherwise the note says why."""
    device = bench.engine.device if bench.engine else ""
    if device.startswith("cpu"):
        return None, [ADAPTIVE_ON_CPU]
    if opts.enforce_eager or opts.pipeline_parallel_size > 1:
        return None, [
            (
                "vLLM's adaptive verification was not measured: it needs full CUDA graphs and no pipeline "
                "parallelism (vllm/config/vllm.py, _validate_adaptive_verification); drop --enforce-eager and "
                "pipeline parallelism to measure it"
            )
        ]
    config = {**speculative_config(drafter, k_max), "enable_adaptive_verification": True}
    try:
        row = bench.measure(config, "adaptive verification", concurrency, bench.rule.min_repeats)
    except EngineError as exc:  # the last run of the session: vLLM's refusal is the column's answer
        return None, [f"vLLM's adaptive verification was not measured: {exc.message}"]
    levels = []
    for c, s in sorted(row.items()):
        x, none = cell_of(k_max, c, s), next(g for g in grid if g.k == 0 and g.concurrency == c)
        levels.append(
            AdaptiveLevel(
                concurrency=c,
                output_tokens_per_s=x.output_tokens_per_s,
                interval=x.interval,
                against_no_speculation=verdict(
                    x.interval, x.output_tokens_per_s, none.interval, none.output_tokens_per_s
                ),
            )
        )
    return Adaptive(config=config, levels=levels), []
