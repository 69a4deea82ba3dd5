"""`doctor --endpoint URL --requests FILE [--export-low FILE]`: the options' checks and the rendering of the replay
(eaglezoo/doctor/requests.py). Called by cli/doctor.py."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..doctor.requests import analyse, export_low, read_requests, replay
from ..errors import EXIT_FINDINGS, UsageError
from ..fsutil import atomic_write_text, file_destination
from ..verify.endpoint import check_server
from ..verify.report.gate import FloorTable
from .common import emit, out, shown
from .outputs import _not_an_input
from .sources import classify
from .verify import verify_progress


def replay_requests(
    drafter: str | None,
    endpoint: str | None,
    requests: Path,
    outputs: tuple[Path | None, Path | None, Path | None],
    registry_dir: Path | None,
    as_json: bool,
) -> None:
    """outputs: --export-low, --report and --html as given (the replay writes its JSON report and no page)."""
    low_file, report_file, html = outputs
    if endpoint is None:
        raise UsageError("--requests replays your requests on a running server", hint="add --endpoint URL")
    if html is not None:
        raise UsageError("--requests writes no HTML page", hint="drop --html; --report FILE writes the replay's JSON")
    for path, option in ((low_file, "--export-low"), (report_file, "--report")):
        if path is not None:
            file_destination(path, option)
            _not_an_input(path, option, (requests,))
    asked = read_requests(requests)  # every line checked before anything is sent
    floors = entry_floors(drafter, registry_dir)
    base = check_server(endpoint)
    with verify_progress() as advance:
        results = replay(base, asked, advance)
    report = analyse(results, floors)
    written = export_low(low_file, results, report) if low_file is not None else None
    data = report.as_dict() | ({"exported": written, "export": str(low_file)} if low_file is not None else {})
    if report_file is not None:
        atomic_write_text(report_file, json.dumps(data, indent=2) + "\n")
    emit(data, as_json, lambda: render(data))
    if report.low:
        raise typer.Exit(EXIT_FINDINGS)


def entry_floors(drafter: str | None, registry_dir: Path | None) -> FloorTable:
    """The registry entry's floors at T=0 (what its benchmark measured), where DRAFTER names an entry."""
    if drafter is None or classify(drafter) != "registry":
        return FloorTable()
    from ..registry.load import lookup

    entry, _ = lookup(drafter, registry_dir)
    return entry.floor_table(0.0)


def render(data: dict) -> None:
    rows = data["per_request"]
    low = set(data["low"])
    threshold = data["low_threshold"]
    bar = f"AL below {threshold:.2f} ({data['low_threshold_from']})" if threshold else data["low_threshold_from"]
    out.print(
        f"{'LOW' if low else 'OK'}: {len(low)} of {data['requests']} request(s) accept poorly; {bar}; "
        f"{data['rejected']} rejected by the server",
        markup=False,
    )
    for row in sorted(rows, key=lambda r: r["mean_acceptance_length"] or 99)[:10]:
        al = row["mean_acceptance_length"]
        what = f"rejected: {shown(row['rejected'])}" if row["rejected"] else f"AL {al:.2f}" if al else "no drafts"
        mark = " low" if row["line"] in low else ""
        out.print(f"  line {row['line']}: {what}{mark}  [{', '.join(row['traits'])}]", markup=False)
    for trait in data["shared_by_low"]:
        out.print(f"  shared by the low requests: {trait}", markup=False)
    for note in data["notes"]:
        out.print(f"  note: {note}", markup=False)
    if "exported" in data:
        out.print(
            f"  wrote {data['exported']} low request(s) to {shown(data['export'])} (SpecForge's format)", markup=False
        )
