"""`eaglezoo report`: a saved verify, tune or compare report shown again (its terminal summary, `--json`, or
its page with `--html`), and `--schema KIND`, the JSON Schema each kind of report follows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from .common import JsonOpt, app, emit, out, print_json, shown
from .compare import render_compare
from .doctor import render_doctor
from .outputs import check_outputs, write_html
from .tune import render_tune
from .verify import render_verify

KINDS = ("verify", "tune", "compare", "doctor", "all")
RENDER = {"verify": render_verify, "tune": render_tune, "compare": render_compare, "doctor": render_doctor}


@app.command()
def report(
    saved: Annotated[
        Optional[Path],
        typer.Argument(metavar="REPORT", help="A report written by verify, tune, compare or doctor --report."),
    ] = None,
    html: Annotated[
        Optional[Path], typer.Option(metavar="FILE", help="Write its self-contained HTML page instead of the summary.")
    ] = None,
    schema: Annotated[
        Optional[str],
        typer.Option(
            metavar="KIND",
            help="Print the JSON Schema of a kind of report (verify, tune, compare, doctor or all), and nothing else.",
        ),
    ] = None,
    as_json: JsonOpt = False,
):
    """Show a saved report again: its summary, its JSON or its page.

    Example: eaglezoo report verify.json --html verify.html"""
    if schema is not None:
        return print_schema(schema, saved, html)
    if saved is None:
        raise UsageError("give a saved report (or --schema KIND)", hint="e.g. eaglezoo report out/verify.json")
    from ..reports import read_saved

    check_outputs(None, html, reads=(saved,))
    result = read_saved(saved)
    if html is not None:
        write_html(html, result)
        return emit(
            {"report": str(saved), "kind": result.kind, "html": str(html)},
            as_json,
            lambda: out.print(f"wrote {shown(html)}"),
        )
    emit(result.model_dump(mode="json"), as_json, lambda: summary(result))


def summary(result) -> None:
    """The command's own summary; a tune report's reproduction lines after it (verify and compare print theirs)."""
    RENDER[result.kind](result)
    if result.kind == "tune" and getattr(result, "reproduction", None) is not None:
        for line in result.reproduction.lines():
            out.print(f"[dim]{shown(line)}[/dim]")


def print_schema(kind: str, saved: Path | None, html: Path | None) -> None:
    if saved is not None or html is not None:
        raise UsageError("--schema prints a schema and reads no report", hint="drop REPORT and --html")
    if kind not in KINDS:
        raise UsageError(f"--schema {kind[:40]!r}: give one of {', '.join(KINDS)}", hint="e.g. --schema verify")
    from ..reports import schema

    print_json(schema(kind))
