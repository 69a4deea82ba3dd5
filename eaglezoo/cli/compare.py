"""`eaglezoo compare A B`: its options, and the rendering of the comparison. Registered on the app by cli/app.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..errors import UsageError
from ..limits import MAX_NEW_TOKENS
from ..names import COMPARE_ENGINES
from .common import (
    EnginePythonOpt,
    JsonOpt,
    NumSpecTokensOpt,
    RegistryOpt,
    ReportOpt,
    SuiteOpt,
    app,
    emit,
    enforce_eager_option,
    max_model_len_option,
    out,
    prompts_or_suite,
    shown,
)
from .outputs import HtmlOpt, check_outputs, save, spare_inputs
from .sources import local_folders, resolve
from .verify import verify_progress, verify_source


@app.command()
def compare(
    drafter_a: Annotated[
        str, typer.Argument(metavar="A", help="The reference drafter: directory, registry id or Hub repo.")
    ],
    drafter_b: Annotated[str, typer.Argument(metavar="B", help="The drafter compared with it, of the same target.")],
    target: Annotated[
        Optional[str],
        typer.Option(metavar="TARGET", help="Target directory or Hub repo id (default: the registry entries')."),
    ] = None,
    num_spec_tokens: NumSpecTokensOpt = 3,
    max_new_tokens: Annotated[int, typer.Option(min=1, max=MAX_NEW_TOKENS, help="Tokens generated per prompt.")] = 64,
    prompts: Annotated[
        Optional[Path],
        typer.Option(
            metavar="FILE",
            help=(
                "JSONL prompts; their buckets are the table's rows (default: A's registry entry's, else the shipped"
                " set)."
            ),
        ),
    ] = None,
    max_prompts: Annotated[Optional[int], typer.Option(min=1)] = None,
    suite: SuiteOpt = None,
    device: Annotated[str, typer.Option(help="native: auto, cpu, cuda or cuda:N.")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto, float32, bfloat16, float16.")] = "auto",
    engine: Annotated[
        str, typer.Option(metavar="ENGINE", help="What measures A (and B unless --engine-b): native or vllm.")
    ] = "native",
    engine_b: Annotated[
        Optional[str],
        typer.Option(metavar="ENGINE", help="What measures B, e.g. A and B the same drafter, native against vllm."),
    ] = None,
    engine_python: EnginePythonOpt = None,
    engine_python_b: Annotated[
        Optional[str],
        typer.Option(
            metavar="PATH",
            rich_help_panel="Engine (vLLM)",
            help="B's vLLM interpreter: another vLLM version (default: --engine-python).",
        ),
    ] = None,
    max_model_len: Annotated[Optional[int], max_model_len_option("Engine (vLLM)")] = None,
    enforce_eager: Annotated[bool, enforce_eager_option("Engine (vLLM)")] = False,
    report: ReportOpt = None,
    html: HtmlOpt = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Compare two drafters of one target, or one drafter on two engines.

    Example: eaglezoo compare tiny-example-eagle3 tiny-example-eagle31 --report compare.json

    Both run on the same prompts: per bucket each acceptance length and B/A with its bootstrap interval.
    Each figure is also given as vLLM, SpecForge and SGLang count it."""
    from ..compare import compare as compare_reports
    from ..verify.run import VerifyRequest, check_settings
    from ..verify.vllm_engine import engine_options

    check_outputs(report, html, reads=(prompts,))
    one_target(drafter_a, drafter_b, target, registry_dir)
    prompts = prompts_or_suite(prompts, suite) or entry_prompts(drafter_a, registry_dir)
    outputs = {"--report": report, "--html": html}
    folders = [f for name in (drafter_a, drafter_b) for f in local_folders(name, registry_dir)]
    spare_inputs(outputs, (*folders, Path(target) if target and Path(target).is_dir() else None), (prompts,))
    runs = [
        (
            d,
            VerifyRequest(
                engines=(one_engine(name),),
                device=device,
                dtype=dtype,
                k=num_spec_tokens,
                max_new_tokens=max_new_tokens,
                max_prompts=max_prompts,
                engine_options=engine_options(
                    python=python, dtype=dtype, max_model_len=max_model_len, enforce_eager=enforce_eager
                ),
            ),
        )
        for d, name, python in [
            (drafter_a, engine, engine_python),
            (drafter_b, engine_b or engine, engine_python_b or engine_python),
        ]
    ]
    for _, request in runs:  # both sides' settings refused before A runs
        check_settings(list(request.engines), engine_options=request.engine_options, device=device, dtype=dtype)
    with verify_progress() as advance:
        a, b = (
            verify_source(
                d,
                target,
                request,
                registry_dir=registry_dir,
                prompts_file=prompts,
                entry_floors=False,
                progress=advance,
                outputs=outputs,
            )
            for d, request in runs
        )
    result = compare_reports(a, b)
    data = result.model_dump(mode="json")
    save(result, data, report, html)
    emit(data, as_json, lambda: render_compare(result))


def one_engine(name: str) -> str:
    if name not in COMPARE_ENGINES:
        raise UsageError(
            f"--engine {name!r}: compare measures each side on one engine, native or vllm",
            hint="e.g. --engine native --engine-b vllm",
        )
    return name


def entry_prompts(drafter: str, registry_dir: Path | None) -> Path | None:
    src = resolve(drafter, registry_dir=registry_dir)
    return src.registry.path(src.entry.prompts, "prompts") if src.entry is not None and src.entry.prompts else None


def one_target(a: str, b: str, target: str | None, registry_dir: Path | None) -> None:
    """Refused before any run: two drafters whose registry entries name different targets (a --target given
    names one for both). Only the entries are read: nothing is pulled."""
    if target is not None:
        return
    from ..registry.load import lookup
    from .sources import classify

    targets = []
    for name in (a, b):
        if classify(name) != "registry":
            raise UsageError(
                f"{name}: --target is required (only a registry entry names its target)",
                hint="add --target DIR (or a Hub repo id)",
            )
        entry, reg = lookup(name, registry_dir)
        targets.append(entry.target.repo or str(reg.path(entry.target.path, "target.path")))
    if targets[0] != targets[1]:
        raise UsageError(
            f"A and B are drafters of different targets ({targets[0]} and {targets[1]})",
            hint="compare two drafters of one target (or one drafter on two engines)",
        )


def render_compare(r) -> None:
    engines = r.engine if r.engine == r.engine_b else f"{r.engine} (A) and {r.engine_b} (B)"
    out.print(
        f"[bold]A[/bold] {shown(r.a)}\n[bold]B[/bold] {shown(r.b)}\nagainst {shown(r.target)} on "
        f"{shown(engines)}, K={r.num_spec_tokens}"
    )
    table = Table(
        "bucket",
        "prompts",
        "AL A",
        "AL B",
        "B / A",
        "95% interval",
        "verdict",
        title="acceptance length, B against A",
        title_justify="left",
    )
    for row in r.rows:
        table.add_row(
            shown(row.bucket),
            str(row.prompts),
            f"{row.a:.3f}",
            f"{row.b:.3f}",
            f"{row.ratio:.3f}",
            f"[{row.interval[0]:.3f}, {row.interval[1]:.3f}]",
            row.verdict,
        )
    out.print(table)
    every = r.rows[-1]
    out.print(
        f"[bold]verdict[/bold] at 95% over {every.prompts} prompts: {every.verdict} "
        f"(B/A {every.ratio:.3f} [{every.interval[0]:.3f}, {every.interval[1]:.3f}])"
    )
    for who in ("a", "b"):
        figures = ", ".join(f"{peer} {value:.3f}" for peer, value in r.peers[who].items())
        out.print(f"{who.upper()} as the peers count it: {figures}")
    out.print(
        f"[dim]{shown(r.interval)}; vLLM pools 1 + accepted/drafts, SpecForge averages per-request values, "
        f"SGLang divides completion tokens by verify steps[/dim]"
    )
    for line in r.reproduction.lines() if r.reproduction else []:
        out.print(f"[dim]{shown(line)}[/dim]")
