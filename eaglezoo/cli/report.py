"""`eaglezoo report REPORT.json --html FILE`: a saved verify, tune or compare report as its page; and the
`--html` the three commands share. Registered on the app by cli/app.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..fsutil import atomic_write_text, file_destination, read_json
from .common import app, out

HtmlOpt = Annotated[Optional[Path], typer.Option(metavar="FILE", help="Also write a self-contained HTML page with the plots.")]


def check_outputs(report: Path | None, html: Path | None) -> None:
    """Both destinations refused before a long run, never after it."""
    if report is not None:
        file_destination(report, "--report")
    if html is not None:
        file_destination(html, "--html")


def save(data: dict, report: Path | None, html: Path | None) -> None:
    """The JSON report and the page a command was asked for (both checked as destinations before it ran)."""
    if report:
        atomic_write_text(report, json.dumps(data, indent=2) + "\n")
    write_html(html, data)


def write_html(path: Path | None, data: dict) -> None:
    if path is None:
        return
    from ..errors import BadInput
    from ..pages import page_for

    try:
        page = page_for(data)
    except (KeyError, TypeError, ValueError, IndexError) as exc:  # an edited or truncated report: say which key
        raise BadInput(f"the report lacks what its page needs ({type(exc).__name__}: {str(exc)[:60]})",
                       hint="give the JSON that verify, tune or compare --report wrote, unedited") from None
    atomic_write_text(path, page)


@app.command()
def report(
    saved: Annotated[Path, typer.Argument(metavar="REPORT", help="A report written by verify, tune or compare --report.")],
    html: Annotated[Path, typer.Option(metavar="FILE", help="The HTML page to write.")],
):
    """Render a saved report as one self-contained HTML page (plots inline, no network)."""
    file_destination(html, "--html")
    write_html(html, read_json(saved, "report"))
    out.print(f"wrote {html}")
