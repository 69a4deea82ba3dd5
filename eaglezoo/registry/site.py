"""`eaglezoo registry site OUT/`: the zoo as a static, self-contained site. `index.html` lists every entry
(target, drafter, family, dialect, EAGLE version, evidence, status, reported and measured acceptance, how each
engine serves it, hardware class) with a filter box; `entries/ID.html` gives one entry's facts with their evidence,
the serving commands for vLLM and SGLang, every reported figure with its K, benchmark and engine, the floors, the
recorded measurements with their plots and the sources. No page fetches anything; the only script is the index's
filter, inline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from markupsafe import Markup

from ..errors import EaglezooError
from ..fsutil import check_out_dir, refuse_overlap, replace_dir, staging
from ..names import SERVE_ENGINES
from ..pages import figures, render
from ..plots import per_position, plotted_buckets
from ..serving import serve_entry, shown_path
from ..verify.saved import read_report
from .listing import Compared, compared, serving_summary, shown_figure, target_name
from .load import Registry
from .schema import EVIDENCE_LEVELS, FACTS, Entry, Evidence, Measured, best_first


def check_out(reg: Registry, out: Path, force: bool) -> None:
    """OUT as `eaglezoo convert` takes it: new, or replaced whole with `force`; never the registry folder, nor a
    folder or file an entry names (its drafter, target or prompts), inside it or above it: they are read, never
    written."""
    check_out_dir(out, force, reg.directory, "the registry")
    for entry in reg.entries.values():
        named = [("drafter", entry.drafter.path), ("target", entry.target.path), ("prompts", entry.prompts)]
        for what, relative in named:
            if relative:
                refuse_overlap(out, reg.root / relative, f"entry {entry.id}'s {what}")


def build(reg: Registry, out: Path, force: bool = False) -> list[str]:
    """Writes the site into `out`: built whole in a temporary folder beside it, then renamed into place (with
    `force`, an existing `out` is replaced whole, never mixed); returns its pages."""
    out = Path(out)
    check_out(reg, out, force)
    pages = {"index.html": index(reg)}
    pages |= {f"entries/{e.id}.html": entry_page(e, reg) for e in reg.entries.values()}
    with staging(out) as tmp:
        for name, text in pages.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(text, encoding="utf-8")
        replace_dir(tmp, out, force)
    return sorted(pages)


def _reported(e: Entry) -> str:
    """The most comparable reported acceptance length, with its K, benchmark and engine (listing.shown_figure)."""
    figure = shown_figure(e)
    return figure.label() if figure else ""


class IndexRow(NamedTuple):
    id: str
    cells: list[str]


def index(reg: Registry) -> str:
    """Every entry in one table (target, family, dialect, EAGLE version, evidence, status, reported and measured
    acceptance, serving, hardware), with a filter box."""
    figures = compared(list(reg.entries.values()))
    rows = [_index_row(e, figures) for e in sorted(reg.entries.values(), key=lambda e: e.id)]
    return render("site_index.html", title="eaglezoo: the zoo", count=len(reg.entries), rows=rows)


def _index_row(e: Entry, figures: list[Compared]) -> IndexRow:
    shown = shown_figure(e)
    row = next((r for r in figures if shown and r.figure == shown.figure(e.id)), None)
    comparable = ", ".join(dict.fromkeys(f.entry_id for f in row.comparable)) if row else ""
    levels = ", ".join(
        f"{sum(x.level == lv for x in e.evidence.values())} {lv}"
        for lv in EVIDENCE_LEVELS
        if any(x.level == lv for x in e.evidence.values())
    )
    cells = [
        e.target.repo or e.target.path or "",
        e.family,
        e.dialect or "?",
        e.eagle_version or "-",
        levels,
        e.status.state,
        _reported(e),
        comparable,
        f"{e.measured[-1].mean_acceptance_length:.3f}" if e.measured else "",
        serving_summary(e),
        e.hardware.runner if e.hardware else "cpu" if e.target.path else "?",
    ]
    return IndexRow(e.id, cells)


def entry_page(e: Entry, reg: Registry) -> str:
    drafter = e.drafter.repo or e.drafter.path or ""
    target = e.target.repo or e.target.path or ""
    return render(
        "site_entry.html",
        title=e.id,
        e=e,
        drafter=drafter,
        target=target,
        facts=_facts(e),
        serving=[_served_by(e, engine, drafter, target) for engine in SERVE_ENGINES],
        reported=best_first(e.reported) + [x for x in e.reported if x not in best_first(e.reported)],
        compared=_compared_figures(e, reg),
        measured=_measured(e, reg),
    )


def _facts(e: Entry) -> list[tuple[str, str | None, Evidence | None, str | None]]:
    """Each fact the entry states, with its evidence, or why it is unknown: (name, value shown, evidence, reason)."""
    rows = []
    for name in FACTS:
        value, evidence = e.fact(name), e.evidence.get(name)
        if value is not None:
            shown = json.dumps(value) if not isinstance(value, str) else value
            rows.append((name, shown[:120], evidence, None))
        elif name in e.null_reasons:
            rows.append((name, None, None, e.null_reasons[name]))
    return rows


def _served_by(e: Entry, engine: str, drafter: str, target: str) -> tuple[str, str | None, str | None]:
    """One engine's whole path, as serve-config prints it (its warnings first, convert first where the engine would
    not read the published drafter faithfully), or why it has none (SGLang has no P-EAGLE path):
    (engine, path, refusal)."""
    try:
        path = serve_entry(e, engine, drafter, target, 3, [e.id], e.target_num_layers)
    except EaglezooError as exc:
        return engine, None, exc.message
    return engine, shown_path(path.steps, path.warnings), None


def _compared_figures(e: Entry, reg: Registry) -> list[tuple[Compared, list[str]]]:
    """Each figure of the entry, reported and measured, with the other entries of its target whose figures were taken
    under the same conditions (listing.compared), each entry once, else what differs from the nearest."""
    rivals = [x for x in reg.entries.values() if x.id != e.id and target_name(x) == target_name(e)]
    rows = [r for r in compared([e, *rivals]) if r.figure.entry_id == e.id]
    return [(r, list(dict.fromkeys(f.entry_id for f in r.comparable))) for r in rows]


def _measured(e: Entry, reg: Registry) -> list[tuple[Measured, Markup | None, int, int]]:
    """Each recorded measurement, with the plot of its report where the report is there: (measurement, plot, buckets,
    buckets plotted)."""
    rows = []
    for m in e.measured:
        report = reg.path(m.report, "measured.report")
        if not report.is_file():
            rows.append((m, None, 0, 0))
            continue
        saved = read_report(report, "measured.report", needs="its plot")
        shown, total = plotted_buckets(saved)
        rows.append((m, figures([per_position(saved)])[0], total, len(shown)))
    return rows
