"""`eaglezoo lint`: a folder, a registry entry (remotely when it is published) or a Hub repo; findings rendered."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import EXIT_FINDINGS
from .common import (
    AuxConventionOpt,
    AuxLayersOpt,
    DrafterArg,
    FlagOpt,
    FromOpt,
    JsonOpt,
    RegistryOpt,
    RevisionOpt,
    app,
    emit,
    human_bytes,
    out,
    read_options,
    shown,
)

if TYPE_CHECKING:
    from ..checkpoint.formats.base import ReadOptions
    from ..lint import LintReport

SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "blue"}


@app.command()
def lint(
    drafter: DrafterArg,
    target: Annotated[
        Optional[str], typer.Option(metavar="TARGET", help="Target directory or Hub repo id (default: the registry's).")
    ] = None,
    from_: FromOpt = None,
    aux_layers: AuxLayersOpt = None,
    aux_convention: AuxConventionOpt = None,
    flag: FlagOpt = None,
    revision: RevisionOpt = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Static checks: shapes, flags, aux ids, vocab maps, norms, engine support.

    Example: eaglezoo lint tiny-example-eagle3"""
    report = lint_source(
        drafter,
        target,
        revision=revision,
        dialect=from_,
        registry_dir=registry_dir,
        opts=read_options(aux_layers, aux_convention, flag),
    )
    emit(report.model_dump(mode="json"), as_json, lambda: render_lint(report))
    if report.errors:
        raise typer.Exit(EXIT_FINDINGS)


def render_lint(report) -> None:
    head = f"[bold]{shown(report.drafter)}[/bold]"
    if report.dialect:
        head += f": dialect [cyan]{report.dialect}[/cyan], EAGLE {report.eagle_version}"
    if report.target:
        head += f", target {shown(report.target)}"
    if report.level == "config":
        head += " [dim](config alone: no tensors checked)[/dim]"
    out.print(head)
    for f in report.findings:
        style = SEVERITY_STYLE[f.severity]
        out.print(f"[{style}]{f.severity:7}[/{style}] [dim]{f.code}[/dim] {shown(f.message)}")
        if f.hint and f.severity != "info":
            out.print(f"          [dim]hint: {shown(f.hint)}[/dim]")
    for e in report.engines:
        status = "ok" if e.faithful else "[red]cannot serve faithfully[/red]"
        floor = f">= {e.min_version}" if e.min_version else "version unknown"
        out.print(f"[dim]engine[/dim]  {e.engine}: {floor}, {status}")
    if report.bytes_read is not None:
        share = 100 * report.bytes_read / max(1, report.weights_bytes or 1)
        out.print(
            f"remote: downloaded {human_bytes(report.bytes_read)} of {human_bytes(report.weights_bytes or 0)} "
            f"of weights ({share:.3f}%)"
        )
    n_err, n_warn = len(report.errors), sum(f.severity == "warning" for f in report.findings)
    colour = "red" if n_err else "green"
    out.print(f"[{colour}]{n_err} error(s)[/{colour}], {n_warn} warning(s)")


def lint_source(
    arg: str,
    target: str | None = None,
    *,
    revision: str | None = None,
    dialect: str | None = None,
    registry_dir: Path | None = None,
    opts: ReadOptions | None = None,
) -> LintReport:
    """Lint what `arg` names: a folder, a config file alone, a registry entry (remotely when it is on the Hub)
    or a Hub repo."""
    from ..checkpoint.formats.base import ReadOptions
    from ..lint import lint as lint_folder
    from ..lint import lint_config, remote_lint, with_requirements
    from .sources import Source, classify, location, resolve, target_for

    opts = opts or ReadOptions()
    if arg.endswith(".gguf") and Path(arg).is_file():  # llama.cpp's form: read as llama.cpp reads it
        from ..lint import lint_gguf

        tgt = resolve(target, what="target", registry_ids=False) if target else None
        return lint_gguf(Path(arg), tgt.path if tgt else None)
    kind = classify(arg, configs=True)
    if kind == "config":
        tgt = target_for(Source(Path(arg)), target, registry_dir, weights=False)
        return lint_config(Path(arg), tgt.path if tgt else None, dialect, opts)
    if kind == "hub":
        return remote_lint(arg, target, revision=revision, dialect=dialect, opts=opts)
    src = Source(Path(arg))
    if kind == "registry":
        from ..registry.load import lookup

        entry, reg = lookup(arg, registry_dir)
        opts = entry.read_options(opts)
        if entry.drafter.repo:  # headers and small tensors only, never the weights
            report = remote_lint(
                entry.drafter.repo,
                target or entry.target.repo,
                revision=revision or entry.drafter.revision,
                dialect=dialect or entry.dialect,
                opts=opts,
            )
            return with_requirements(report, entry.requirements)
        src = location(entry.drafter, reg, None, "drafter")
        src.entry, src.registry = entry, reg
    tgt = target_for(src, target, registry_dir)
    report = lint_folder(src.path, tgt.path if tgt else None, dialect, opts)
    return with_requirements(report, src.entry.requirements) if src.entry is not None else report
