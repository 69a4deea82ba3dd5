"""`eaglezoo tune`: its options, and the rendering of its decision. Registered on the app by cli/app.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..errors import EXIT_FINDINGS, UsageError
from ..limits import MAX_TUNE_K
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
    out,
    read_options,
    shown,
)
from .outputs import HtmlOpt, check_outputs, save
from .sources import resolve_request
from .verify import parse_engine_args, parse_levels, verify_progress

ENGINE = "Engine (vLLM)"


@app.command()
def tune(
    drafter: DrafterArg,
    target: Annotated[Optional[str], typer.Option(metavar="TARGET", help="Target directory or Hub repo id (default: the registry's).")] = None,
    engine: Annotated[str, typer.Option(metavar="ENGINE", help="The engine to tune for: vllm.")] = "vllm",
    concurrency: Annotated[str, typer.Option(metavar="LEVELS", help="Loads to measure, in rising order.")] = "1,4,16,64",
    k_max: Annotated[int, typer.Option("--k-max", min=1, max=MAX_TUNE_K, help="Measure every K from 1 to this.")] = 4,
    prompts: Annotated[Optional[Path], typer.Option(metavar="FILE", help="JSONL prompts (default: the registry entry's, else the built-in set).")] = None,
    max_prompts: Annotated[Optional[int], typer.Option(min=1)] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1)] = 64,
    aux_layers: AuxLayersOpt = None,
    aux_convention: AuxConventionOpt = None,
    flag: FlagOpt = None,
    report: ReportOpt = None,
    html: HtmlOpt = None,
    revision: RevisionOpt = None,
    registry_dir: RegistryOpt = None,
    engine_python: EnginePythonOpt = None,
    tensor_parallel_size: Annotated[Optional[int], typer.Option("--tensor-parallel-size", "-tp", min=1, rich_help_panel=ENGINE, help="Default: the registry entry's hardware, else 1.")] = None,
    max_model_len: Annotated[Optional[int], typer.Option(min=16, rich_help_panel=ENGINE)] = None,
    dtype: Annotated[str, typer.Option(rich_help_panel=ENGINE)] = "auto",
    gpu_memory_utilization: Annotated[Optional[float], typer.Option(min=0.01, max=1.0, rich_help_panel=ENGINE)] = None,
    enforce_eager: Annotated[bool, typer.Option("--enforce-eager", rich_help_panel=ENGINE)] = False,
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", rich_help_panel=ENGINE)] = False,
    engine_args: Annotated[Optional[str], typer.Option(metavar="JSON", rich_help_panel=ENGINE, help="Any other LLM(...) argument, e.g. '{\"max_num_seqs\": 64}'.")] = None,
    engine_timeout: Annotated[float, typer.Option(min=1.0, metavar="SECONDS", rich_help_panel=ENGINE, help="Limit for each engine run (start included).")] = 3600.0,
    as_json: JsonOpt = False,
):
    """Which K at which load: measure every K (and none) at every concurrency on the engine, print the
    goodput-optimal K per load as vLLM's and SGLang's own config, and confirm it with one more run."""
    from ..tune import TuneRequest
    from ..verify.vllm_engine import engine_options

    if engine != "vllm":
        raise UsageError(f"--engine {engine}: tune measures on vLLM, the engine here that switches K by load",
                         hint="use --engine vllm (with --engine-python PATH where vLLM is installed)")
    check_outputs(report, html, reads=(prompts,))
    options = engine_options(python=engine_python, tensor_parallel_size=tensor_parallel_size or 1,
                             max_model_len=max_model_len, dtype=dtype, trust_remote_code=trust_remote_code,
                             gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
                             extra=parse_engine_args(engine_args), timeout_s=engine_timeout)
    request = TuneRequest(k_max=k_max, levels=tuple(parse_levels(concurrency)), max_prompts=max_prompts,
                          max_new_tokens=max_new_tokens, engine_options=options,
                          parallel_given=tensor_parallel_size is not None)
    with verify_progress() as advance:
        result = tune_source(drafter, target, request, revision=revision, registry_dir=registry_dir,
                             prompts_file=prompts, opts=read_options(aux_layers, aux_convention, flag),
                             progress=advance, outputs={"--report": report, "--html": html})
    data = result.model_dump(mode="json")
    save(data, report, html)
    emit(data, as_json, lambda: render_tune(result))
    if result.failures:
        raise typer.Exit(EXIT_FINDINGS)


def tune_source(drafter: str, target: str | None, request, *, revision, registry_dir, prompts_file, opts, progress,
                outputs):
    """Tune what `drafter` names, as `request` (a `tune.TuneRequest`) says; a registry entry supplies its target,
    aux ids, prompts, floors and hardware."""
    from ..tune import check_grid
    from ..tune import tune as run_tune
    from ..verify.run import prepare

    r, options = request, request.engine_options
    check_grid(list(r.levels), r.k_max, options)
    named = resolve_request(drafter, target, opts, revision=revision, registry_dir=registry_dir,
                            prompts_file=prompts_file, weights=False, outputs=outputs)
    entry, floors = named.entry, {}
    if entry is not None:
        floors = {f.k: entry.floors_at(f.k, 0.0)[:2] for f in entry.acceptance_floors or []
                  if f.temperature == 0 and f.condition is None}
        if entry.hardware and not r.parallel_given:
            options = options.model_copy(update={"tensor_parallel_size": entry.hardware.tensor_parallel_size,
                                                 "pipeline_parallel_size": entry.hardware.pipeline_parallel_size})
    src, tgt = named.source, named.target
    work = prepare(src.path, tgt.path, tgt.repo or str(tgt.path), tgt.commit, named.options, named.prompts_file,
                   r.max_prompts, r.k_max, r.max_new_tokens, 0.0, None, ["vllm"], options.max_model_len,
                   options.trust_remote_code)
    return run_tune(work, options, list(r.levels), progress, floors=floors,
                    entry_hardware=entry.hardware.runner if entry is not None and entry.hardware else None)


def render_tune(r) -> None:
    out.print(f"[bold]{shown(r.drafter)}[/bold] on vLLM {r.engine.version} ({shown(r.engine.device)}, "
              f"{r.engine.dtype}), K 0..{r.k_max}, {r.num_prompts} prompts x {r.max_new_tokens} tokens")
    table = Table("concurrency", *[f"K={k}" for k in range(r.k_max + 1)], title="output tokens/s (acceptance length)",
                  title_justify="left")
    for c in r.concurrency:
        cells = {x.k: x for x in r.grid if x.concurrency == c}
        best = next(d.k for d in r.decision if d.concurrency == c)
        row = [_cell(cells[k], k == best) for k in range(r.k_max + 1)]
        table.add_row(str(c), *row)
    out.print(table)
    for d in r.decision:
        out.print(f"concurrency {d.concurrency}: [bold]K={d.k}[/bold], {d.output_tokens_per_s:.1f} tokens/s, "
                  f"speedup {d.speedup:.2f}x (measured)")
    out.print(f"vLLM:   {shown(r.vllm_command)}")
    out.print(f"SGLang: {shown(r.sglang_command)}" if r.sglang_command else
              "SGLang: no static K beats serving without speculation")
    conf, static = _levels(r.confirmation.schedule), _levels(r.confirmation.best_static)
    out.print(f"confirmed with the schedule: {conf} tokens/s; best static K={r.confirmation.best_static_k}: "
              f"{static}")
    for k, floor in r.floors.items():
        out.print(f"registry floors at K={k}: {_floor(floor)}, checked at every load")
    for failure in r.failures:
        out.print(f"[red]below the registry's floor[/red] {shown(failure)}")
    for note in r.notes:
        out.print(f"[yellow]note[/yellow] {shown(note)}")


def _floor(floor) -> str:
    parts = [f"per position {floor.per_position}"] if floor.per_position else []
    return ", ".join(parts + ([f"acceptance length {floor.mean_acceptance_length}"]
                              if floor.mean_acceptance_length is not None else []))


def _levels(passes: list[dict]) -> str:
    return ", ".join(f"c={p.concurrency} {p.output_tokens_per_s:.1f}" for p in passes)


def _cell(c, best: bool) -> str:
    al = f" ({c.acceptance_length:.2f})" if c.acceptance_length is not None else ""
    text = f"{c.output_tokens_per_s:.1f}{al}"
    return f"[bold green]{text}[/bold green]" if best else text
