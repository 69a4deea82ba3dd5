"""What verify, tune and compare write, and where they may write it: `--report` and `--html`, checked as
destinations before a run, never on an input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..errors import UsageError
from ..fsutil import atomic_write_text, file_destination, within

if TYPE_CHECKING:
    from ..reports import AnyReport

HtmlOpt = Annotated[
    Optional[Path], typer.Option(metavar="FILE", help="Also write a self-contained HTML page with the plots.")
]


def check_outputs(report: Path | None, html: Path | None, reads: tuple[Path | None, ...] = ()) -> None:
    """Both destinations refused before a long run, never after it: each must be a writable file name,
    neither may be a file the command reads, and the two must differ."""
    named = {"--report": report, "--html": html}
    for option, path in named.items():
        if path is not None:
            file_destination(path, option)
            _not_an_input(path, option, reads)
    if report is not None and html is not None and _same_file(report, html):
        raise UsageError(
            f"--report and --html both name {html}: the page would replace the report",
            hint="give the page another name, e.g. --html report.html",
        )


def _not_an_input(path: Path, option: str, reads: tuple[Path | None, ...]) -> None:
    for given in reads:
        if given is not None and _same_file(path, given):
            raise UsageError(
                f"{option} {path} is a file this command reads: writing it would destroy that input",
                hint=f"give {option} another file name",
            )


def spare_inputs(
    outputs: dict[str, Path | None], folders: tuple[Path | None, ...], files: tuple[Path | None, ...]
) -> None:
    """Once the names are resolved, before anything runs: no output inside a folder the command reads (the drafter,
    the target, the registry) or on a file it reads (the prompts an entry names)."""
    for option, path in outputs.items():
        if path is None:
            continue
        _not_an_input(path, option, files)
        for folder in filter(None, folders):
            if within(path, folder):
                raise UsageError(
                    f"{option} {path} is inside {folder}, which this command reads: writing there would "
                    "change that input",
                    hint=f"give {option} a file outside {folder}",
                )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve() or (Path(a).exists() and Path(a).samefile(b))
    except OSError:  # an unreadable path is refused by its own reader
        return False


def save(result: AnyReport, data: dict[str, Any], report: Path | None, html: Path | None) -> None:
    """The JSON report (`data`, the model's dump) and the page a command was asked for (both checked as
    destinations before it ran)."""
    if report:
        atomic_write_text(report, json.dumps(data, indent=2) + "\n")
    write_html(html, result)


def write_html(path: Path | None, result: AnyReport) -> None:
    """The page of a report from its model (read strictly first when it was saved): a failure here is
    eaglezoo's own, and says so."""
    if path is None:
        return
    from ..pages import page_for  # noqa: PLC0415 - pages loads matplotlib: only when a page is written

    page = page_for(result)
    atomic_write_text(path, page)
