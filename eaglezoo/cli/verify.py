"""`eaglezoo verify`: its options, and the rendering of its report. Registered on the app by cli/app.py."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..errors import EXIT_FINDINGS, UsageError
from ..limits import MAX_CONCURRENCY, MAX_LEVELS, MAX_MIN_AL, MAX_NEW_TOKENS, MAX_TEMPERATURE
from ..names import RUN_ENGINES
from . import common
from .common import (
    AuxConventionOpt,
    AuxLayersOpt,
    DrafterArg,
    EnginePythonOpt,
    FlagOpt,
    JsonOpt,
    NumSpecTokensOpt,
    RegistryOpt,
    ReportOpt,
    RevisionOpt,
    SuiteOpt,
    app,
    emit,
    enforce_eager_option,
    err,
    gpu_memory_option,
    max_model_len_option,
    out,
    parse_floors,
    parse_json_object,
    prompts_or_suite,
    read_options,
    shown,
    tensor_parallel_option,
)
from .outputs import HtmlOpt, check_outputs, save
from .sources import resolve_request

if TYPE_CHECKING:
    from ..checkpoint.formats.base import ReadOptions
    from ..verify.report import VerifyReport

# Panels of options, each a table of its own: rich gives the option names at most half of what the help leaves,
# so long names (--distributed-executor-backend) sit apart from wide types, and read whole at 80 columns.
NATIVE = "Engine (native)"
VLLM = "Engine (vLLM)"
PARALLEL = "Engine (vLLM): parallelism, passed to vLLM"
ENGINE = "Engine (vLLM): passed to vLLM as named"
NODES = "Engine (vLLM): across nodes"
LLAMACPP = "Engine (llama.cpp)"


@app.command()
def verify(
    drafter: DrafterArg,
    target: Annotated[
        Optional[str], typer.Option(metavar="TARGET", help="Target folder or Hub repo id (default: the registry's).")
    ] = None,
    num_spec_tokens: NumSpecTokensOpt = 3,
    max_new_tokens: Annotated[
        int, typer.Option(min=1, max=MAX_NEW_TOKENS, metavar="N", help="Tokens generated per prompt.")
    ] = 64,
    prompts: Annotated[
        Optional[Path],
        typer.Option(metavar="FILE", help="JSONL prompts (default: the registry entry's, else the shipped set)."),
    ] = None,
    max_prompts: Annotated[
        Optional[int], typer.Option(min=1, metavar="N", help="Only N prompts (floors then compare, not gate).")
    ] = None,
    suite: SuiteOpt = None,
    engine: Annotated[
        str,
        typer.Option(metavar="ENGINE", help="native (fp32 reference), vllm, llamacpp, or native,ENGINE."),
    ] = "native",
    endpoint: Annotated[
        Optional[str], typer.Option(metavar="URL", help="Measure a running vLLM or llama.cpp server.")
    ] = None,
    temperature: Annotated[
        float,
        typer.Option(
            min=0.0, max=MAX_TEMPERATURE, metavar="T", help="Sampling temperature (above 0: rejection sampling)."
        ),
    ] = 0.0,
    seed: Annotated[
        Optional[int], typer.Option(min=0, metavar="SEED", help="Sampling seed (request i uses SEED + i).")
    ] = None,
    speedup: Annotated[
        bool, typer.Option("--speedup", help="Also run without the drafter: tokens/s, latency, speedup.")
    ] = False,
    concurrency: Annotated[str, typer.Option(metavar="LEVELS", help="Concurrency levels for --speedup.")] = "1,8",
    device: Annotated[
        str, typer.Option(metavar="DEVICE", rich_help_panel=NATIVE, help="auto, cpu, cuda or cuda:N.")
    ] = "auto",
    dtype: Annotated[
        str,
        typer.Option(
            metavar="DTYPE",
            help="auto, float32, bfloat16 or float16 (auto: native fp32 on CPU, bf16 on CUDA; vllm the model's).",
        ),
    ] = "auto",
    batch_size: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_CONCURRENCY,
            metavar="N",
            rich_help_panel=NATIVE,
            help="Prompts the target generates together (memory grows with N).",
        ),
    ] = 32,
    dequantize_mxfp4: Annotated[
        bool,
        typer.Option(
            "--dequantize-mxfp4", rich_help_panel=NATIVE, help="Load an MXFP4 target dequantised (the report says so)."
        ),
    ] = False,
    trust_remote_code: Annotated[
        bool, typer.Option("--trust-remote-code", help="Run the code the target ships (both engines).")
    ] = False,
    aux_layers: AuxLayersOpt = None,
    aux_convention: AuxConventionOpt = None,
    flag: FlagOpt = None,
    min_acceptance: Annotated[
        Optional[str],
        typer.Option(metavar="FLOORS", help="Per-position floors, e.g. 0.5,0.3,0.2 (default: the registry's)."),
    ] = None,
    min_al: Annotated[
        Optional[float],
        typer.Option(
            min=1.0,
            max=MAX_MIN_AL,
            metavar="AL",
            help="Acceptance-length floor, added to the registry's (at most K + 1).",
        ),
    ] = None,
    report: ReportOpt = None,
    html: HtmlOpt = None,
    revision: RevisionOpt = None,
    registry_dir: RegistryOpt = None,
    engine_python: EnginePythonOpt = None,
    tensor_parallel_size: Annotated[int, tensor_parallel_option(PARALLEL)] = 1,
    pipeline_parallel_size: Annotated[
        int, typer.Option("--pipeline-parallel-size", "-pp", min=1, metavar="N", rich_help_panel=PARALLEL)
    ] = 1,
    data_parallel_size: Annotated[
        int, typer.Option("--data-parallel-size", "-dp", min=1, metavar="N", rich_help_panel=PARALLEL)
    ] = 1,
    enable_expert_parallel: Annotated[bool, typer.Option("--enable-expert-parallel", rich_help_panel=PARALLEL)] = False,
    distributed_executor_backend: Annotated[
        Optional[str],
        typer.Option(metavar="mp|ray", rich_help_panel=NODES, help="ray spans nodes (start the Ray cluster first)."),
    ] = None,
    max_model_len: Annotated[
        Optional[int], max_model_len_option(ENGINE, "Longer prompts are skipped, and said.")
    ] = None,
    quantization: Annotated[Optional[str], typer.Option(metavar="METHOD", rich_help_panel=ENGINE)] = None,
    gpu_memory_utilization: Annotated[Optional[float], gpu_memory_option(ENGINE)] = None,
    enforce_eager: Annotated[bool, enforce_eager_option(ENGINE)] = False,
    engine_args: Annotated[
        Optional[str],
        typer.Option(
            metavar="JSON", rich_help_panel=VLLM, help="Any other LLM(...) argument, e.g. '{\"max_num_seqs\": 64}'."
        ),
    ] = None,
    llama_server: Annotated[
        Optional[Path],
        typer.Option(
            metavar="PATH",
            rich_help_panel=LLAMACPP,
            help="Default: EAGLEZOO_LLAMA_SERVER, cache, PATH.",
        ),
    ] = None,
    target_gguf: Annotated[
        Optional[Path],
        typer.Option(metavar="FILE", rich_help_panel=LLAMACPP, help="Default: written by eaglezoo (fp32)."),
    ] = None,
    engine_timeout: Annotated[
        float,
        typer.Option(
            min=1.0, metavar="SECONDS", rich_help_panel=VLLM, help="Limit for each engine run (start included)."
        ),
    ] = 3600.0,
    as_json: JsonOpt = False,
):
    """Measure acceptance: per position, acceptance length, drift, speedup.

    Example: eaglezoo verify tiny-example-eagle3 -k 3 --report verify.json

    DRAFTER is a folder, a registry id or a Hub repo.
    A registry entry supplies its target, aux ids, prompts and floors; exit 1 when a floor fails."""
    from ..verify.llamacpp_engine import LlamacppOptions, LlamaServerOptions
    from ..verify.run import VerifyRequest, check_engine_only
    from ..verify.vllm_engine import engine_options
    from ..verify.workload import NativeOptions

    floors = parse_floors(min_acceptance, num_spec_tokens)
    check_outputs(report, html, reads=(prompts,))
    options = engine_options(
        python=engine_python,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
        data_parallel_size=data_parallel_size,
        enable_expert_parallel=enable_expert_parallel,
        distributed_executor_backend=distributed_executor_backend,
        max_model_len=max_model_len,
        dtype=dtype,
        quantization=quantization,
        trust_remote_code=trust_remote_code,
        gpu_memory_utilization=gpu_memory_utilization,
        enforce_eager=enforce_eager,
        extra=parse_engine_args(engine_args),
        timeout_s=engine_timeout,
    )
    engines = ("endpoint",) if endpoint else tuple(parse_engines(engine))
    check_engine_only(list(engines), options)
    request = VerifyRequest(
        engines=engines,
        endpoint=endpoint,
        engine_options=options,
        device=device,
        dtype=dtype,
        k=num_spec_tokens,
        max_new_tokens=max_new_tokens,
        max_prompts=max_prompts,
        temperature=temperature,
        seed=seed,
        speedup=tuple(parse_levels(concurrency)) if speedup else None,
        trust_remote_code=trust_remote_code,
        native=NativeOptions(batch_size, dequantize_mxfp4),
        llamacpp=LlamacppOptions(LlamaServerOptions(binary=llama_server), target_gguf),
    )
    with verify_progress() as advance:
        result = verify_source(
            drafter,
            target,
            request,
            revision=revision,
            registry_dir=registry_dir,
            prompts_file=prompts_or_suite(prompts, suite),
            opts=read_options(aux_layers, aux_convention, flag),
            min_acceptance=floors,
            min_al=min_al,
            progress=advance,
            outputs={"--report": report, "--html": html},
        )
    data = result.model_dump(mode="json")
    save(result, data, report, html)
    emit(data, as_json, lambda: render_verify(result))
    if result.failures:
        raise typer.Exit(EXIT_FINDINGS)


def parse_engine_args(text: str | None) -> dict:
    return {} if text is None else parse_json_object(text, "--engine-args", '{"max_num_seqs": 64}')


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or len(levels) > MAX_LEVELS or any(not 1 <= c <= MAX_CONCURRENCY for c in levels):
        raise UsageError(
            f"--concurrency must be at most {MAX_LEVELS} comma-separated integers from 1 to "
            f"{MAX_CONCURRENCY}, got {text[:80]!r}",
            hint="e.g. --concurrency 1,8,32",
        )
    return levels


@contextlib.contextmanager
def verify_progress():
    """One bar on stderr whose description follows the phase (engine start has no total: a spinner)."""
    if not common.SHOW_PROGRESS:
        yield lambda *a, **kw: None
        return
    columns = [
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("verifying", total=None)

        def advance(done: int, total: int | None, phase: str = "verifying") -> None:
            progress.update(task, completed=done, total=total, description=phase)

        yield advance


def by_temperature(r) -> dict[float, list]:
    """The measured rows by the temperature each was sampled at (its own, else the run's)."""
    groups: dict[float, list] = {}
    for p in r.per_prompt:
        groups.setdefault(r.sampling.temperature if p.temperature is None else p.temperature, []).append(p)
    return dict(sorted(groups.items()))


def temperatures(r) -> str:
    groups = by_temperature(r)
    if len(groups) <= 1:
        return f"{next(iter(groups), r.sampling.temperature)}"
    return ", ".join(f"{t} ({len(rows)} row{'s' if len(rows) > 1 else ''})" for t, rows in groups.items())


def render_temperatures(r) -> None:
    """Rows at several temperatures: each group's acceptance length, as vLLM pools it (each group measured on its own
    wave of requests; the headline pools them all)."""
    groups = by_temperature(r)
    if len(groups) <= 1:
        return
    parts = []
    for t, rows in groups.items():
        steps = [s for p in rows for s in p.accepted]
        parts.append(
            f"T={t}: {1 + sum(steps) / len(steps):.3f} ({len(rows)} prompts)" if steps else f"T={t}: no drafts"
        )
    out.print("acceptance length by temperature: " + ", ".join(parts))


def render_verify(r) -> None:
    where = shown(f"{r.engine.name} {r.engine.version or ''}".strip())
    out.print(
        f"[bold]{shown(r.drafter)}[/bold] against [bold]{shown(r.target)}[/bold] on {where}, "
        f"{shown(r.device)} ({shown(r.dtype)}), "
        f"K={r.num_spec_tokens}, {r.num_prompts} prompts x {r.max_new_tokens} tokens, "
        f"temperature {temperatures(r)}" + (f", seed {r.sampling.seed}" if r.sampling.seed is not None else "")
    )
    render_temperatures(r)
    if r.prompt_set:
        out.print(f"prompts: {shown(r.prompt_set.name)}, {shown(r.prompt_set.selection)}")
    render_positions(r)
    out.print("accepted-length histogram: " + ", ".join(f"{j}: {c}" for j, c in enumerate(r.histogram)))
    if r.drift.feedback_rms_per_depth:
        rms = ", ".join(f"{x:.2f}" for x in r.drift.feedback_rms_per_depth)
        out.print(f"drift: fed-back hidden RMS per depth [{rms}]")
    render_conditions(r)
    if r.target_distinct_token_ratio is not None:
        out.print(f"target output diversity: {r.target_distinct_token_ratio:.2f} distinct-token ratio")
    render_skipped(r.skipped_prompts)
    if r.speedup:
        render_speedup(r.speedup)
    if r.comparison:
        render_comparison(r.comparison)
    for note in r.notes:
        out.print(f"[yellow]note[/yellow] {shown(note)}")
    errors = [f for f in r.lint if f.severity == "error"]
    warns = [f for f in r.lint if f.severity == "warning"]
    out.print(
        f"lint: {len(errors)} error(s), {len(warns)} warning(s)"
        + "".join(f"\n  [red]{f.code}[/red] {shown(f.message)}" for f in errors)
        + "".join(f"\n  [yellow]{f.code}[/yellow] {shown(f.message)}" for f in warns)
    )
    out.print("time: " + ", ".join(f"{shown(k.removesuffix('_s'))} {v:.1f}s" for k, v in r.timing.items()))
    if r.reproduction:
        for line in r.reproduction.lines():
            out.print(f"[dim]{shown(line)}[/dim]")
    render_gate(r)


def render_conditions(r) -> None:
    """Per condition (prompt bucket): prompts, drafts, the acceptance length with its interval, per position."""
    lengths = r.drift.mean_acceptance_length_by_bucket
    if not lengths:
        return
    intervals = r.drift.mean_acceptance_length_interval_by_bucket
    prompts: dict[str, int] = {}
    drafts: dict[str, int] = {}
    for p in r.per_prompt:
        prompts[p.bucket] = prompts.get(p.bucket, 0) + 1
        drafts[p.bucket] = drafts.get(p.bucket, 0) + len(p.accepted)
    table = Table(
        "condition",
        "prompts",
        "drafts",
        "acceptance length",
        "95% interval",
        "per position",
        title="per condition (prompt bucket)",
        title_justify="left",
    )
    for bucket, al in lengths.items():
        per = ", ".join(f"{x:.2f}" for x in r.drift.acceptance_per_position_by_bucket.get(bucket, []))
        table.add_row(
            shown(bucket),
            str(prompts.get(bucket, "-")),
            str(drafts.get(bucket, "-")),
            f"{al:.3f}",
            interval_text(intervals.get(bucket)).strip() or "-",
            f"[{per}]",
        )
    out.print(table)


def render_gate(r) -> None:
    """The verdict last: PASS or FAIL where a floor gated; the entry's floors compared, with the difference, and
    why they did not gate."""
    g = r.gate
    if g.checks:
        table = Table("floor", "source", "floor", "measured", "difference", "", title="floors", title_justify="left")
        for c in g.checks:
            mark = ("[green]met[/green]" if c.met else "[red]below[/red]" if c.met is False else "not measured") + (
                "" if c.gated else " (compared)"
            )
            table.add_row(shown(c.what), c.source, f"{c.floor:g}", fmt3(c.measured), signed(c.difference), mark)
        out.print(table)
    if g.entry_floors == "compared":
        out.print(
            f"[yellow]compared, not gated[/yellow] (the registry's floors, measured on "
            f"{shown(g.measured_on or 'another basis')}): "
            + "; ".join(shown(w) for w in g.why_compared)
            + (" - exit 0" if not r.failures else "")
        )
    for f in r.failures:
        out.print(f"[red]FAIL[/red] {shown(f)}")
    if not r.failures and g.verdict == "PASS":
        out.print("[green]PASS[/green] all floors met")


def fmt3(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def interval_text(interval: list[float] | None) -> str:
    return f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""


def render_skipped(skipped) -> None:
    """Every skipped prompt with its reason: by bucket and reason, each by its row in the prompt set (over-long
    prompts are never truncated)."""
    groups: dict[tuple[str, str], list[int]] = {}
    for s in skipped:
        groups.setdefault((s.bucket, s.reason), []).append(s.index)
    for (bucket, reason), rows in groups.items():
        out.print(
            f"[yellow]skipped {len(rows)} prompt(s)[/yellow] of {shown(bucket)}: {shown(reason)}"
            + (" (never truncated)" if "exceed the context" in reason else "")
            + f" (row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows))})"
        )


def render_positions(r) -> None:
    every = r.all_positions
    columns = ["position", "acceptance (decoding path)", ""] + (["acceptance (all positions)"] if every else [])
    table = Table(*columns, title="per-position acceptance", title_justify="left")
    for i, a in enumerate(r.acceptance_per_position):
        table.add_row(str(i + 1), f"{a:.3f}", bar(a), *([f"{every.acceptance_per_position[i]:.3f}"] if every else []))
    out.print(table)
    per_prompt = (
        f"; mean of per-prompt values {r.mean_acceptance_length_per_prompt:.3f}"
        if r.mean_acceptance_length_per_prompt is not None
        else ""
    )
    out.print(
        f"mean acceptance length: [bold]{r.mean_acceptance_length:.3f}[/bold]"
        f"{interval_text(r.mean_acceptance_length_interval)} (1 + accepted/drafts over "
        f"{r.num_drafts} drafts){per_prompt}" + (f"; all positions {every.mean_acceptance_length:.3f}" if every else "")
    )
    if r.acceptance_by_k and r.num_spec_tokens > 1:
        basis = r.acceptance_by_k.basis.split(":")[0]
        rows = " · ".join(f"K={x.k} {x.mean_acceptance_length:.3f}" for x in r.acceptance_by_k.rows)
        out.print(f"acceptance length by K ({shown(basis)}): {rows}")


def bar(fraction: float, width: int = 20) -> str:
    """A bar of `width` cells, eighths of a cell resolved."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    return "█" * (eighths // 8) + ("▏▎▍▌▋▊▉"[eighths % 8 - 1] if eighths % 8 else "")


def render_speedup(s) -> None:
    table = Table(
        "concurrency",
        "tokens/s with",
        "tokens/s without",
        "speedup",
        "TPOT ms with",
        "TPOT ms without",
        "e2e s with",
        "e2e s without",
        title="speedup (same engine, same prompts)",
        title_justify="left",
    )
    for level in s.levels:
        a, b = level.with_drafter, level.without_drafter
        table.add_row(
            str(level.concurrency),
            f"{a.output_tokens_per_s:.1f}",
            f"{b.output_tokens_per_s:.1f}",
            f"[bold]{level.speedup:.2f}x[/bold]",
            fmt(a.mean_tpot_ms),
            fmt(b.mean_tpot_ms),
            f"{a.mean_e2e_s:.2f}",
            f"{b.mean_e2e_s:.2f}",
        )
    out.print(table)
    start = s.engine_start_s
    out.print(
        f"engine start (not measured above): {start['with_drafter']:.1f}s with the drafter, "
        f"{start['without_drafter']:.1f}s without"
    )
    if s.identical_outputs is not None:
        out.print(f"outputs identical with and without the drafter: {100 * s.identical_outputs:.0f}%")


def render_comparison(c) -> None:
    a, b = c.reference, c.engine
    table = Table(
        "position",
        f"{a} ({c.dtype[a]})",
        f"{b} ({c.dtype[b]})",
        "difference",
        title=f"fidelity: {b} against {a}",
        title_justify="left",
    )
    for i, (x, y) in enumerate(zip(c.acceptance_per_position[a], c.acceptance_per_position[b], strict=False), 1):
        table.add_row(str(i), f"{x:.3f}", f"{y:.3f}", f"{y - x:+.3f}")
    out.print(table)
    verdict = "[green]identical[/green]" if c.identical else "[yellow]different[/yellow]"
    out.print(
        f"{verdict}: {c.prompts_identical}/{c.prompts_compared} prompts step for step; drafts "
        f"{c.num_drafts[a]} vs {c.num_drafts[b]}, accepted {c.num_accepted[a]} vs "
        f"{c.num_accepted[b]}; acceptance length difference {c.difference_mean_acceptance_length:+.3f}"
    )


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def parse_engines(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in RUN_ENGINES]
    two = len(names) == 2 and "native" not in names  # a comparison is against the native reference
    if not names or unknown or len(set(names)) != len(names) or len(names) > 2 or two:
        raise UsageError(
            f"--engine {text!r}: give native, vllm, llamacpp, native,vllm or native,llamacpp",
            hint="e.g. --engine native,vllm",
        )
    return names


def verify_source(
    drafter: str,
    target: str | None,
    request,
    *,
    revision: str | None = None,
    registry_dir: Path | None = None,
    prompts_file: Path | None = None,
    min_acceptance: list[float] | None = None,
    min_al: float | None = None,
    opts: ReadOptions | None = None,
    outputs: dict[str, Path | None] | None = None,
    entry_floors: bool = True,
    progress=lambda *a, **kw: None,
) -> VerifyReport:
    """Verify what `drafter` names, as `request` (a `verify.run.VerifyRequest`) says; a registry entry supplies
    its target, aux ids, floors (with what they were measured on; `entry_floors=False`: none) and prompts. The
    floors given here are added to the entry's, never in place of them. No output may land in what the run reads
    (`outputs`: option -> path)."""
    from ..checkpoint.formats.base import ReadOptions
    from ..verify.report import Floors, Gate
    from ..verify.report.build import Origin
    from ..verify.run import Sources, check_llamacpp, check_settings, verify

    r = request
    # before any download; the endpoint connected here once, and passed down to verify()
    server = check_settings(list(r.engines), r.endpoint, r.engine_options, r.device, r.dtype, r.native)
    check_llamacpp(list(r.engines), r.llamacpp)
    named = resolve_request(
        drafter,
        target,
        opts or ReadOptions(),
        revision=revision,
        registry_dir=registry_dir,
        prompts_file=prompts_file,
        weights="native" in r.engines or "llamacpp" in r.engines,
        outputs=outputs,
    )
    entry = named.entry
    gate, notes = Gate(stated=Floors(min_acceptance=min_acceptance or None, min_al=min_al)), ()
    if entry is not None and entry_floors:
        gate, notes = entry_gate(named.source, gate, r.k, r.temperature)
    src, tgt = named.source, named.target
    origin = Origin(
        registry_id=entry.id if entry else None, drafter_revision=src.commit, target_revision=tgt.commit, notes=notes
    )
    return verify(
        Sources(src.path, tgt.path, tgt.repo or str(tgt.path), named.prompts_file, named.options),
        r,
        gate=gate,
        origin=origin,
        progress=progress,
        server=server,
    )


def entry_gate(src, gate, k: int, temperature: float):
    """The entry's floors at exactly this K and temperature beside the stated ones, with what they were measured
    on: (the gate, a note when the entry has none here)."""
    entry = src.entry
    floors, note = entry.floors(k, temperature), entry.floors_note(k, temperature)
    whole = entry.floor_for(k, temperature)
    update = {"entry": floors.whole(), "measured_on": floor_basis(src, whole) if whole is not None else None}
    if floors.condition_floors:  # a condition's floor that names no set holds on any set with that condition, whole
        first = entry.condition_floor_list(k, temperature)[0]
        update |= {"conditions": floors.by_condition(), "conditions_measured_on": floor_basis(src, first, True)}
    return gate.model_copy(update=update), ((note,) if note else ())


def floor_basis(src, floor, by_condition: bool = False):
    """What a floor was measured on, its prompt set resolved and hashed as a run hashes its own (a floor that
    records its hash keeps it: the set may have changed since)."""
    from ..errors import EaglezooError
    from ..verify.report import Basis
    from ..verify.workload import DEFAULT_SET, prompt_set_name, prompts_sha256, suite_path

    if by_condition and floor.prompts is None:
        return Basis(prompt_set=None, engine=floor.engine, k=floor.k, temperature=floor.temperature)
    name, path, readable = src.entry.floor_prompts(floor), None, True
    try:
        if name.startswith("suite:"):
            path = suite_path(name.removeprefix("suite:"))
        elif name != DEFAULT_SET:
            path = src.registry.path(name, "acceptance_floors.prompts")
        digest = floor.prompts_sha256 or prompts_sha256(path)
    except (EaglezooError, OSError):
        digest, readable = floor.prompts_sha256, False  # no run can be shown to match: the floors are compared
    return Basis(
        prompt_set=prompt_set_name(path) if readable else name,
        prompts_sha256=digest if readable else None,
        engine=floor.engine,
        k=floor.k,
        temperature=floor.temperature,
    )
