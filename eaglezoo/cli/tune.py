"""`eaglezoo tune`: its options, and the rendering of its decision. Registered on the app by cli/app.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import EXIT_FINDINGS, UsageError
from ..limits import MAX_TUNE_K
from ..tune.rule import BUDGET_MINUTES, MAX_REPEATS, MIN_REPEATS, MIN_SECONDS, MIN_TOKENS
from .common import (
    AuxConventionOpt,
    AuxLayersOpt,
    DrafterArg,
    EnginePythonOpt,
    FlagOpt,
    JsonOpt,
    RegistryOpt,
    ReportOpt,
    RevisionOpt,
    app,
    emit,
    enforce_eager_option,
    err,
    gpu_memory_option,
    max_model_len_option,
    out,
    read_options,
    shown,
    tensor_parallel_option,
)
from .outputs import HtmlOpt, check_outputs, save
from .sources import resolve_request
from .verify import parse_engine_args, parse_levels, verify_progress

ENGINE = "Engine (vLLM)"
PASSED = "Engine (vLLM): passed to vLLM as named"  # a table of its own: long names read whole at 80 columns
MEASURE = "Measuring until settled"
LLAMACPP = "Engine (llama.cpp)"
MAX_REPEATS_LIMIT = 100


@app.command()
def tune(
    drafter: DrafterArg,
    target: Annotated[
        str | None, typer.Option(metavar="TARGET", help="Target folder or Hub repo id (default: the registry's).")
    ] = None,
    engine: Annotated[str, typer.Option(metavar="ENGINE", help="The engine to tune for: vllm or llamacpp.")] = "vllm",
    concurrency: Annotated[
        str, typer.Option(metavar="LEVELS", help="Loads to measure, in rising order.")
    ] = "1,4,16,64",
    k_max: Annotated[
        int, typer.Option("--k-max", min=1, max=MAX_TUNE_K, metavar="K", help="Measure every K from 1 to this.")
    ] = 4,
    prompts: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="JSONL prompts (default: the registry entry's, else the shipped set)."),
    ] = None,
    max_prompts: Annotated[int | None, typer.Option(min=1, metavar="N", help="Only the first N prompts.")] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1, metavar="N", help="Tokens generated per prompt.")] = 64,
    aux_layers: AuxLayersOpt = None,
    aux_convention: AuxConventionOpt = None,
    flag: FlagOpt = None,
    report: ReportOpt = None,
    html: HtmlOpt = None,
    revision: RevisionOpt = None,
    registry_dir: RegistryOpt = None,
    engine_python: EnginePythonOpt = None,
    tensor_parallel_size: Annotated[
        int | None, tensor_parallel_option(ENGINE, "Default: the registry entry's hardware, else 1.")
    ] = None,
    max_model_len: Annotated[int | None, max_model_len_option(PASSED)] = None,
    dtype: Annotated[str, typer.Option(metavar="DTYPE", rich_help_panel=PASSED)] = "auto",
    gpu_memory_utilization: Annotated[float | None, gpu_memory_option(PASSED)] = None,
    enforce_eager: Annotated[bool, enforce_eager_option(PASSED)] = False,
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", rich_help_panel=PASSED)] = False,
    engine_args: Annotated[
        str | None,
        typer.Option(
            metavar="JSON", rich_help_panel=ENGINE, help="Any other LLM(...) argument, e.g. '{\"max_num_seqs\": 64}'."
        ),
    ] = None,
    engine_timeout: Annotated[
        float,
        typer.Option(
            min=1.0, metavar="SECONDS", rich_help_panel=ENGINE, help="Limit for each engine run (start included)."
        ),
    ] = 3600.0,
    repeats: Annotated[
        int,
        typer.Option(
            min=2,
            max=MAX_REPEATS_LIMIT,
            metavar="N",
            rich_help_panel=MEASURE,
            help="Repeats of every cell before any decision.",
        ),
    ] = MIN_REPEATS,
    max_repeats: Annotated[
        int,
        typer.Option(
            min=2,
            max=MAX_REPEATS_LIMIT,
            metavar="N",
            rich_help_panel=MEASURE,
            help="Repeats of a contending cell before the load is called too close.",
        ),
    ] = MAX_REPEATS,
    min_tokens: Annotated[
        int,
        typer.Option(
            min=1, max=1_000_000, metavar="N", rich_help_panel=MEASURE, help="Tokens each repeat generates at least."
        ),
    ] = MIN_TOKENS,
    min_seconds: Annotated[
        float,
        typer.Option(
            min=0.0, max=3600.0, metavar="SECONDS", rich_help_panel=MEASURE, help="Seconds each repeat lasts at least."
        ),
    ] = MIN_SECONDS,
    llama_server: Annotated[
        Path | None,
        typer.Option(metavar="PATH", rich_help_panel=LLAMACPP, help="Default: EAGLEZOO_LLAMA_SERVER, cache, PATH."),
    ] = None,
    target_gguf: Annotated[
        Path | None,
        typer.Option(metavar="FILE", rich_help_panel=LLAMACPP, help="Default: written by eaglezoo (fp32)."),
    ] = None,
    budget: Annotated[
        float,
        typer.Option(
            min=0.1,
            max=60 * 24 * 7,
            metavar="MINUTES",
            rich_help_panel=MEASURE,
            help="Wall time tune may take: rounds it cannot pay for are cut, and said.",
        ),
    ] = BUDGET_MINUTES,
    as_json: JsonOpt = False,
):
    """Which K at which load: measure every K, print each engine's config.

    Example: eaglezoo tune tiny-example-eagle3 --concurrency 1,8 --k-max 3

    Every K (and none) at every concurrency on the engine.
    The goodput-optimal K per load, as vLLM's and SGLang's own config, confirmed with one more run."""
    from ..tune import SamplingRule, TuneRequest
    from ..verify.llamacpp_engine import LlamacppOptions, LlamaServerOptions
    from ..verify.vllm_engine import engine_options

    if engine not in ("vllm", "llamacpp"):
        raise UsageError(
            f"--engine {engine}: tune measures on vLLM or llama.cpp",
            hint="use --engine vllm (with --engine-python PATH where vLLM is installed) or --engine llamacpp",
        )
    if engine == "vllm" and (llama_server or target_gguf):
        flag = "--target-gguf" if target_gguf else "--llama-server"
        raise UsageError(f"{flag} is for --engine llamacpp", hint=f"add --engine llamacpp, or drop {flag}")
    check_outputs(report, html, reads=(prompts,))
    options = engine_options(
        python=engine_python,
        tensor_parallel_size=tensor_parallel_size or 1,
        max_model_len=max_model_len,
        dtype=dtype,
        trust_remote_code=trust_remote_code,
        gpu_memory_utilization=gpu_memory_utilization,
        enforce_eager=enforce_eager,
        extra=parse_engine_args(engine_args),
        timeout_s=engine_timeout,
    )
    request = TuneRequest(
        k_max=k_max,
        levels=tuple(parse_levels(concurrency)),
        max_prompts=max_prompts,
        max_new_tokens=max_new_tokens,
        engine_options=options,
        parallel_given=tensor_parallel_size is not None,
        sampling=SamplingRule(
            min_tokens=min_tokens,
            min_seconds=min_seconds,
            min_repeats=repeats,
            max_repeats=max_repeats,
            budget_s=budget * 60,
        ),
        llamacpp=LlamacppOptions(LlamaServerOptions(binary=llama_server), target_gguf)
        if engine == "llamacpp"
        else None,
    )
    with verify_progress() as advance:
        result = tune_source(
            drafter,
            target,
            request,
            revision=revision,
            registry_dir=registry_dir,
            prompts_file=prompts,
            opts=read_options(aux_layers, aux_convention, flag),
            progress=advance,
            outputs={"--report": report, "--html": html},
            say=_say,
        )
    data = result.model_dump(mode="json")
    save(result, data, report, html)
    emit(data, as_json, lambda: render_tune(result))
    if result.failures:
        raise typer.Exit(EXIT_FINDINGS)


def _say(line: str) -> None:
    """tune's plan and progress, kept on stderr (the progress bar is transient; stdout stays the report's)."""
    err.print(f"tune: {line}" if not line.startswith("tune") else line, markup=False, soft_wrap=True, highlight=False)


def tune_source(
    drafter: str,
    target: str | None,
    request,
    *,
    revision,
    registry_dir,
    prompts_file,
    opts,
    progress,
    outputs,
    say=lambda _: None,
):
    """Tune what `drafter` names, as `request` (a `tune.TuneRequest`) says; a registry entry supplies its target,
    aux ids, prompts, floors and hardware."""
    from ..tune import check_grid
    from ..tune import tune as run_tune
    from ..tune.report import EntryFacts
    from ..verify.run import WorkloadPlan, prepare

    r, options = request, request.engine_options
    check_grid(list(r.levels), r.k_max, options, r.sampling, r.llamacpp)
    named = resolve_request(
        drafter,
        target,
        opts,
        revision=revision,
        registry_dir=registry_dir,
        prompts_file=prompts_file,
        weights=False,
        outputs=outputs,
    )
    entry, floors = named.entry, {}
    if entry is not None:
        floors = entry.floor_table(0.0).whole()
        if entry.hardware and not r.parallel_given:
            options = options.model_copy(
                update={
                    "tensor_parallel_size": entry.hardware.tensor_parallel_size,
                    "pipeline_parallel_size": entry.hardware.pipeline_parallel_size,
                }
            )
    src, tgt = named.source, named.target
    work = prepare(
        WorkloadPlan(
            src.path,
            tgt.path,
            tgt.repo or str(tgt.path),
            tgt.commit,
            named.options,
            named.prompts_file,
            r.max_prompts,
            r.k_max,
            r.max_new_tokens,
            engines=("vllm",) if r.llamacpp is None else ("llamacpp",),
            max_model_len=options.max_model_len,
            trust_remote_code=options.trust_remote_code,
        )
    )
    return run_tune(
        work,
        options,
        list(r.levels),
        progress,
        EntryFacts(
            floors=floors,
            hardware=entry.hardware.runner if entry is not None and entry.hardware else None,
            registry_id=entry.id if entry is not None else None,
        ),
        rule=r.sampling,
        llamacpp=r.llamacpp,
        say=say,
    )


def _diagnose_with(command: str) -> None:
    """The recommended server as doctor needs it, labelled (serving.DIAGNOSE_LABEL); none where it drafts nothing."""
    from ..serving import DIAGNOSE_LABEL, diagnose_command, production_command

    diagnose = diagnose_command(production_command(command))
    if diagnose:
        out.print(f"# {DIAGNOSE_LABEL}", markup=False, soft_wrap=True)
        out.print(diagnose, markup=False, soft_wrap=True)


def render_tune(r) -> None:
    engine = "llama.cpp" if r.engine.name == "llamacpp" else "vLLM"
    out.print(
        f"[bold]{shown(r.drafter)}[/bold] on {engine} {shown(r.engine.version)} ({shown(r.engine.device)}, "
        f"{shown(r.engine.dtype)}), K 0..{r.k_max}, {r.num_prompts} prompts x {r.max_new_tokens} tokens"
    )
    table = Table(
        "concurrency",
        *[f"K={k}" for k in range(r.k_max + 1)],
        title="output tokens/s: median \\[interval] x repeats (acceptance length)",
        title_justify="left",
    )
    for c in r.concurrency:
        cells = {x.k: x for x in r.grid if x.concurrency == c}
        best = next(d.k for d in r.decision if d.concurrency == c)
        table.add_row(str(c), *[_cell(cells[k], k == best) for k in range(r.k_max + 1)])
    out.print(table)
    for d in r.decision:
        close = f", [yellow]too close to call[/yellow] (K={', K='.join(map(str, d.contenders))})" if d.too_close else ""
        out.print(
            f"concurrency {d.concurrency}: [bold]K={d.k}[/bold], {d.output_tokens_per_s:.1f} tokens/s, "
            f"speedup {d.speedup:.2f}x (measured){close}"
        )
    _latencies(r)
    if r.llamacpp:
        _llamacpp(r)
    else:
        _vllm(r)
    _confirmation(r)
    if r.cost:
        _cost(r.cost)
    for k, floor in r.floors.items():
        out.print(f"registry floors at K={k}: {_floor(floor)}, checked at every load")
    for failure in r.failures:
        out.print(f"[red]failed[/red] {shown(failure)}")
    for note in r.notes:
        out.print(f"[yellow]note[/yellow] {shown(note)}")


def _vllm(r) -> None:
    """The decision as vLLM's and SGLang's config."""
    if r.convert_command:
        out.print(f"convert first: {shown(r.convert_command)}")
    if r.recommended:
        out.print(f"recommended: [bold]{r.recommended}[/bold]: {shown(r.recommended_command)}")
    out.print(f"vLLM table:  {shown(r.vllm_command)}")
    _diagnose_with(r.recommended_command or r.vllm_command)
    out.print(
        f"SGLang:      {shown(r.sglang_command)}"
        if r.sglang_command
        else "SGLang:      no static K beats serving without speculation"
    )
    if r.sglang_adaptive_config:
        out.print(
            f"SGLang adaptive ({json.dumps(r.sglang_adaptive_config)} in sglang-adaptive.json): "
            f"{shown(r.sglang_adaptive_command)}"
        )


def _llamacpp(r) -> None:
    """The llama-server to run per load (slots = load), after the GGUF conversions; the p-min tried. (The report
    keeps vLLM's and SGLang's configs of the decision; `--json` shows them.)"""
    t = r.llamacpp
    if r.recommended:
        out.print(f"recommended: [bold]{r.recommended}[/bold]")
    for x in t.p_min:
        out.print(
            f"p-min {x.p_min:g} at concurrency {x.concurrency}, K={x.k}: {x.output_tokens_per_s:.1f} tokens/s, "
            f"{x.against_p_min_0} against p-min 0"
        )
    for step in t.steps:
        out.print(f"llama.cpp first: {shown(step)}", markup=False, soft_wrap=True)
    for level in t.levels:
        out.print(f"llama.cpp at concurrency {level.concurrency}: {shown(level.command)}", markup=False, soft_wrap=True)


def _cost(c) -> None:
    """Where the time went, one pass per cell beside it, and the same counts at GPU-scale start costs."""
    from ..tune.cost import simulations

    if c.engine_starts is None or c.wall_s is None:  # a report from before the counts
        out.print(
            f"engine time {c.engine_s:.0f} s for {c.repeats} repeats (one pass per cell: about {c.single_pass_s:.0f} s)"
        )
        return
    out.print(
        f"cost: {c.engine_starts} engine starts ({c.start_s:.0f} s), measuring {c.measure_s:.0f} s, wall "
        f"{c.wall_s:.0f} s, {c.repeats} repeats"
        + (f" (per cell: {_per_cell(c.repeats_per_cell)})" if c.repeats_per_cell else "")
    )
    if c.one_pass_s is not None:
        out.print(f"  one pass per cell: {c.one_pass_starts} engine starts, about {c.one_pass_s:.0f} s")
    for x in simulations(c):
        out.print(
            f"  simulated at {_minutes(x.start_s)} per start (not measured): tune {_minutes(x.tune_s)}, one pass per "
            f"cell {_minutes(x.one_pass_s)} ({x.ratio:.1f}x)"
        )


def _per_cell(cells) -> str:
    return ", ".join(f"K={x.k} c={x.concurrency} {x.repeats}" for x in cells)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _latencies(r) -> None:
    for d in r.decision:
        x = next(x for x in r.grid if x.k == d.k and x.concurrency == d.concurrency)
        if x.latency:
            tpot = (
                f", TPOT p50 {x.latency.tpot_p50_ms:.2f} / p90 {x.latency.tpot_p90_ms:.2f} ms"
                if x.latency.tpot_p50_ms is not None
                else ""
            )
            out.print(
                f"  at concurrency {d.concurrency}, K={d.k}: TTFT p50 {x.latency.ttft_p50_ms:.1f} / p90 "
                f"{x.latency.ttft_p90_ms:.1f} ms{tpot}"
            )


def _confirmation(r) -> None:
    conf, static = _levels(r.confirmation.schedule), _levels(r.confirmation.best_static)
    verdict = f" [bold]{r.confirmation.verdict}[/bold]" if r.confirmation.verdict else ""
    out.print(f"confirmation{verdict}: {conf} tokens/s; best static K={r.confirmation.best_static_k}: {static}")
    for x in r.no_speculation:
        out.print(
            f"  against no speculation at concurrency {x.concurrency} (table K={x.table_k}): "
            f"{x.ratio:.2f}x, {x.verdict}"
        )
    if r.adaptive:
        out.print(
            "vLLM adaptive verification: "
            + ", ".join(
                f"c={x.concurrency} {x.output_tokens_per_s:.1f} ({x.against_no_speculation} against no speculation)"
                for x in r.adaptive.levels
            )
        )


def _floor(floor) -> str:
    parts = [f"per position {floor.per_position}"] if floor.per_position else []
    return ", ".join(
        parts
        + ([f"acceptance length {floor.mean_acceptance_length}"] if floor.mean_acceptance_length is not None else [])
    )


def _levels(passes: list) -> str:
    return ", ".join(f"c={p.concurrency} {p.output_tokens_per_s:.1f}" for p in passes)


def _cell(c, best: bool) -> str:
    al = f" ({c.acceptance_length:.2f})" if c.acceptance_length is not None else ""
    spread = f" [{c.interval[0]:.0f}, {c.interval[1]:.0f}] x{len(c.repeats)}" if c.interval and c.repeats else ""
    text = f"{c.output_tokens_per_s:.1f}{spread}{al}"
    return f"[bold green]{text}[/bold green]" if best else text
