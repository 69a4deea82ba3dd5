"""`eaglezoo doctor`: its options, and the rendering of its verdict. Registered on the app by cli/app.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import EXIT_FINDINGS, UsageError
from ..limits import MAX_K, MAX_NEW_TOKENS
from .common import (
    EnginePythonOpt,
    JsonOpt,
    RegistryOpt,
    ReportOpt,
    RevisionOpt,
    SuiteOpt,
    app,
    emit,
    enforce_eager_option,
    gpu_memory_option,
    max_model_len_option,
    out,
    parse_json_object,
    prompts_or_suite,
    shown,
    tensor_parallel_option,
)
from .outputs import HtmlOpt, check_outputs, save
from .verify import parse_engine_args, verify_progress

ENGINE = "Planned deployment (vLLM started by eaglezoo)"
REFERENCE = "Native reference (the drafter and target run by eaglezoo, beside the server)"


@app.command()
def doctor(
    drafter: Annotated[
        str | None,
        typer.Argument(
            metavar="[DRAFTER]",
            help=(
                "The drafter it should serve: a registry id, a folder or a Hub repo id (default: the server's own, "
                "read from its folder)."
            ),
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            metavar="TARGET",
            help="The target the drafter was trained for (default: the registry entry's, else the server's).",
        ),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            metavar="URL", help="A running vLLM, SGLang or llama.cpp server to diagnose, e.g. http://127.0.0.1:8000."
        ),
    ] = None,
    served_gguf: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The drafter GGUF a llama-server at --endpoint was started with (-md): llama-server does not say.",
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            metavar="vllm",
            help=(
                "Diagnose the deployment you are about to start: eaglezoo starts vLLM on the drafter's folder as given."
            ),
        ),
    ] = None,
    speculative_config: Annotated[
        str | None,
        typer.Option(
            metavar="JSON",
            rich_help_panel=ENGINE,
            help=(
                "What you would pass to vllm serve --speculative-config (e.g. a K table); model and method default "
                "to the drafter's."
            ),
        ),
    ] = None,
    num_spec_tokens: Annotated[
        int | None,
        typer.Option(
            "--num-spec-tokens", "-k", min=1, max=MAX_K, help="Draft depth K (a server in dev mode says its own)."
        ),
    ] = None,
    prompts: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="JSONL prompts like your traffic (default: the registry entry's, else the shipped set).",
        ),
    ] = None,
    suite: SuiteOpt = None,
    max_prompts: Annotated[int | None, typer.Option(min=1, help="Use only the first N prompts.")] = None,
    max_new_tokens: Annotated[int, typer.Option(min=1, max=MAX_NEW_TOKENS, help="Tokens generated per prompt.")] = 64,
    device: Annotated[
        str,
        typer.Option(
            "--reference-device",
            metavar="DEVICE",
            rich_help_panel=REFERENCE,
            help="auto, cpu, cuda or cuda:N (auto: the first GPU, else the CPU; beside a server that holds the GPU, "
            "cpu or another GPU).",
        ),
    ] = "auto",
    device_alias: Annotated[str | None, typer.Option("--device", hidden=True)] = None,  # the flag's earlier name
    reference_dtype: Annotated[
        str,
        typer.Option(
            metavar="DTYPE",
            rich_help_panel=REFERENCE,
            help=(
                "float32 (the exact reference: about 4 bytes a parameter, 32 GB for an 8B target), bfloat16, "
                "float16 or auto (as verify's --dtype)."
            ),
        ),
    ] = "float32",
    batch_size: Annotated[
        int, typer.Option(min=1, max=256, rich_help_panel=REFERENCE, help="Prompts per target batch.")
    ] = 32,
    engine_python: EnginePythonOpt = None,
    max_model_len: Annotated[int | None, max_model_len_option(ENGINE, "Tokens, 16 to 2^24.")] = None,
    dtype: Annotated[
        str, typer.Option(rich_help_panel=ENGINE, help="auto (the model's), float32, bfloat16, float16.")
    ] = "auto",
    enforce_eager: Annotated[bool, enforce_eager_option(ENGINE)] = False,
    gpu_memory_utilization: Annotated[float | None, gpu_memory_option(ENGINE)] = None,
    tensor_parallel_size: Annotated[int, tensor_parallel_option(ENGINE)] = 1,
    engine_args: Annotated[
        str | None, typer.Option(metavar="JSON", rich_help_panel=ENGINE, help="Any other LLM(...) argument.")
    ] = None,
    engine_timeout: Annotated[float, typer.Option(min=1.0, metavar="SECONDS", rich_help_panel=ENGINE)] = 3600.0,
    requests: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Your requests (OpenAI chat or completions JSONL), replayed on --endpoint."),
    ] = None,
    export_low: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="With --requests: the low-acceptance ones as SpecForge training JSONL."),
    ] = None,
    probe: Annotated[
        str | None,
        typer.Option(
            metavar="LIST",
            help="With --requests: A/B probes of your workload, one variable each: all, or a comma list of "
            "template, thinking, temperature, schema, context, cache.",
        ),
    ] = None,
    probe_sample: Annotated[
        int, typer.Option(min=2, max=64, metavar="N", help="With --probe: your requests sampled per probe arm.")
    ] = 8,
    trained_length: Annotated[
        int | None,
        typer.Option(metavar="TOKENS", help="With --probe context: the drafter's training length (16 to 2^24)."),
    ] = None,
    report: ReportOpt = None,
    html: HtmlOpt = None,
    revision: RevisionOpt = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Why is acceptance low? A verdict, its cause and the exact fix.

    Example: eaglezoo doctor tiny-example-eagle31 --endpoint http://127.0.0.1:8000

    A verdict (healthy, engine-config, drafter, target-mismatch, workload) is shown by measuring what its fix restores.
    Exit 0 healthy, 1 a problem found, 2 bad input."""
    from ..doctor.request import DEFAULT_K, DoctorRequest
    from ..verify.run import check_settings
    from ..verify.vllm_engine import engine_options

    if probe is not None:
        from .doctor_probes import probe_requests  # the probes' modules only where they run

        if export_low is not None:
            raise UsageError(
                "--export-low writes what --requests finds; --probe runs the probes instead", hint="drop one"
            )

        return probe_requests(endpoint, requests, probe, probe_sample, trained_length, (report, html), as_json)
    if requests is not None:
        from .doctor_requests import replay_requests  # the replay's modules only where it runs

        return replay_requests(drafter, endpoint, requests, (export_low, report, html), registry_dir, as_json)
    if export_low is not None:
        raise UsageError("--export-low writes what --requests finds", hint="add --requests FILE")
    if (endpoint is None) == (engine is None):
        raise UsageError(
            "give --endpoint URL (a running server) or --engine vllm (the deployment eaglezoo starts)",
            hint="e.g. eaglezoo doctor DRAFTER --endpoint http://127.0.0.1:8000",
        )
    if engine is not None and engine != "vllm":
        raise UsageError(f"--engine {engine}: doctor starts vLLM only", hint="use --engine vllm, or --endpoint URL")
    if endpoint and speculative_config:
        raise UsageError(
            "--speculative-config describes a planned deployment; a running server has its own",
            hint="drop it: doctor reads the server's config",
        )
    if engine and drafter is None:
        raise UsageError(
            "name the drafter of the planned deployment", hint="e.g. eaglezoo doctor DRAFTER --engine vllm"
        )
    device = device_alias or device
    check_outputs(report, html, reads=(prompts,))
    check_settings(["native"], device=device, dtype=reference_dtype)  # the reference's, as verify checks its own
    options = (
        engine_options(
            python=engine_python,
            max_model_len=max_model_len,
            dtype=dtype,
            enforce_eager=enforce_eager,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            extra=parse_engine_args(engine_args),
            timeout_s=engine_timeout,
        )
        if engine
        else None
    )
    config = parse_config(speculative_config, num_spec_tokens or DEFAULT_K)
    request = DoctorRequest(
        endpoint=endpoint,
        engine_options=options,
        k=num_spec_tokens,
        speculative_config=config,
        max_new_tokens=max_new_tokens,
        max_prompts=max_prompts,
        device=device,
        reference_dtype=reference_dtype,
        batch_size=batch_size,
        served_gguf=served_gguf,
    )
    with verify_progress() as advance:
        result = diagnose_source(
            drafter,
            target,
            request,
            revision=revision,
            registry_dir=registry_dir,
            prompts_file=prompts_or_suite(prompts, suite),
            progress=advance,
            outputs={"--report": report, "--html": html},
        )
    data = result.model_dump(mode="json")
    save(result, data, report, html)
    emit(data, as_json, lambda: render_doctor(result))
    if result.verdict != "healthy":
        raise typer.Exit(EXIT_FINDINGS)


def parse_config(text: str | None, k: int) -> dict | None:
    """The planned deployment's speculative config, its K table held to vLLM's rules and the deployment's K, before
    any engine starts (verify/server_facts.k_table_problem)."""
    from ..verify.server_facts import k_table_problem

    if text is None:
        return None
    config = parse_json_object(text, "--speculative-config", '{"num_speculative_tokens_per_batch_size": [[1, 4, 3]]}')
    for key, why in (
        ("model", "the drafter named"),
        ("method", "eagle3, the drafter's"),
        ("num_speculative_tokens", "-k"),
    ):
        if key in config:
            raise UsageError(f"--speculative-config: {key} is {why}", hint=f"drop {key} from the JSON")
    table = config.get("num_speculative_tokens_per_batch_size")
    problem = k_table_problem(table, k) if table is not None else None
    if problem:
        raise UsageError(f"--speculative-config: {problem}", hint=f"e.g. [[1, 4, {k}], [5, 256, {max(k - 1, 0)}]]")
    return config


def diagnose_source(
    drafter: str | None,
    target: str | None,
    request,
    *,
    revision=None,
    registry_dir=None,
    prompts_file: Path | None = None,
    outputs=None,
    progress=lambda *a, **kw: None,
):
    """Names to folders (a registry entry supplies its target, aux ids, floors and prompts), then the diagnosis, its
    requests to a server bounded in all by doctor's total wait (EAGLEZOO_DOCTOR_DEADLINE)."""
    from ..settings import doctor_deadline_s
    from ..verify.server_http import waiting_at_most

    if not request.endpoint:
        return resolve_and_diagnose(drafter, target, request, revision, registry_dir, prompts_file, outputs, progress)
    with waiting_at_most(doctor_deadline_s(), "EAGLEZOO_DOCTOR_DEADLINE", "doctor's total wait on a server"):
        from ..verify.endpoint import check_server

        check_server(request.endpoint)  # a wrong address fails before anything is resolved or downloaded
        return resolve_and_diagnose(drafter, target, request, revision, registry_dir, prompts_file, outputs, progress)


def resolve_and_diagnose(drafter, target, request, revision, registry_dir, prompts_file, outputs, progress):
    from ..checkpoint.formats.base import ReadOptions
    from ..doctor.run import Named, diagnose
    from ..requirements import Requirements
    from ..verify.report.gate import NO_FLOORS
    from .sources import resolve_request

    if drafter is None:
        target_dir = local_target(target)
        return diagnose(request, Named(None, target_dir, prompts_file, target_name=target), progress)
    named = resolve_request(
        drafter,
        target,
        ReadOptions(),
        revision=revision,
        registry_dir=registry_dir,
        prompts_file=prompts_file,
        outputs=outputs,
    )
    entry, tgt = named.entry, named.target
    return diagnose(
        request,
        Named(
            named.source.path,
            tgt.path,
            named.prompts_file,
            named.options,
            floors=entry.floor_table(0.0) if entry is not None else NO_FLOORS,
            entry_prompts=prompts_file is None and entry is not None and bool(entry.prompts),
            target_name=tgt.repo or str(tgt.path),
            drafter_name=drafter,
            requirements=entry.requirements if entry is not None else Requirements(),
        ),
        progress,
    )


def local_target(target: str | None) -> Path | None:
    if target is None:
        return None
    path = Path(target)
    if not path.is_dir():
        raise UsageError(f"--target {target}: not a folder here", hint="without DRAFTER, name the target's folder")
    return path


def render_prompts(r) -> None:
    """Prompt by prompt, the server against the drafter and target named."""
    sides = {a.source: a.per_prompt for a in r.measured}
    server, reference = sides.get("server"), sides.get("reference")
    if not server or not reference or len(server) != len(reference):
        return
    below = sum(s < ref - 1e-9 for s, ref in zip(server, reference, strict=True))
    above = sum(s > ref + 1e-9 for s, ref in zip(server, reference, strict=True))
    out.print(
        f"prompt by prompt: the server below the reference on {below}, above on {above}, equal on "
        f"{len(server) - below - above} of {len(server)}"
    )


ENGINES = {"sglang": "SGLang"}  # the engine's name as shown; vLLM's (served or started by eaglezoo) otherwise
COLOURS = {"healthy": "green", "engine-config": "red", "drafter": "red", "target-mismatch": "red", "workload": "yellow"}


def render_doctor(r) -> None:
    out.print(f"[bold {COLOURS[r.verdict]}]{r.verdict.upper()}[/] {shown(r.summary)}")
    s = r.server
    where = shown(s.url or s.engine)
    out.print(
        f"server: {where}, {ENGINES.get(s.engine, 'vLLM')} {shown(s.version or '?')}, target {shown(s.target)}, "
        f"drafter {shown(s.drafter or 'not said')}, K={s.k}" + (f", K table {s.k_table}" if s.k_table else "")
    )
    out.print(
        f"named: drafter {shown(r.drafter)}, target {shown(r.target)}"
        + (
            f"; {r.prompts} prompts x {r.max_new_tokens} tokens"
            if r.measured
            else "; its settings read, no prompts sent"
        )
    )
    for f in r.findings:
        mark = "confirmed" if f.confirmed else "to check" if r.server.engine == "sglang" else "not confirmed by a trial"
        out.print(f"\n[bold]{shown(f.cause)}[/bold] ({f.verdict}, {mark}): {shown(f.what)}")
        for line in f.evidence:
            out.print(f"  {shown(line)}")
        out.print(f"  [bold]fix[/bold]: {shown(f.fix)}")
    out.print("\nacceptance length, per position:" if r.measured else "")
    for a in r.measured:
        rates = ", ".join(f"{x:.3f}" for x in a.per_position)
        out.print(
            f"  {shown(a.source):<28} {a.mean_acceptance_length:.3f} "
            f"[{a.interval[0]:.3f}, {a.interval[1]:.3f}]  [{rates}]"
        )
    render_prompts(r)
    for note in r.notes:
        out.print(f"[yellow]note[/yellow] {shown(note)}")
    out.print(
        "time: "
        + ", ".join(
            f"{shown(k.removesuffix('_s'))} {v:.1f}s" if k.endswith("_s") else f"{shown(k)} {v:g}"
            for k, v in r.timing.items()
        )
    )
