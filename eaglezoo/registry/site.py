"""`eaglezoo registry site OUT/`: the zoo as a static, self-contained site. `index.html` lists every entry
(target, drafter, family, dialect, EAGLE version, evidence, status, reported and measured acceptance, how each
engine serves it, hardware class) with a filter box; `entries/ID.html` gives one entry's facts with their evidence,
the serving commands for vLLM and SGLang, every reported figure with its K, benchmark and engine, the floors, the
recorded measurements with their plots and the sources. No page fetches anything; the only script is the index's
filter, inline."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import EaglezooError
from ..fsutil import check_out_dir, refuse_overlap, replace_dir, staging
from ..pages import document, escape, plotted_note  # escape: HTML-escaped, control and bidi characters made visible
from ..plots import per_position, plotted_buckets
from ..serving import serve_entry, shown_path
from ..verify.saved import read_report
from .listing import serving_summary, shown_figure
from .load import Registry
from .schema import EVIDENCE_LEVELS, FACTS, Entry, best_first

FILTER = """<script>
const box = document.getElementById("filter");
box.addEventListener("input", () => {
  const words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
  for (const row of document.querySelectorAll("#entries tbody tr")) {
    const text = row.textContent.toLowerCase();
    row.hidden = !words.every(w => text.includes(w));
  }
});
</script>"""


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


def _link(text: str) -> str:
    """A source as a link when it starts with a URL (the words after it stay text); text otherwise."""
    if not text.startswith("https://"):
        return escape(text)
    url, space, words = text.partition(" ")
    return f'<a href="{escape(url)}">{escape(url)}</a>{escape(space + words)}'


def _reported(e: Entry) -> str:
    """The most comparable reported acceptance length, with its K, benchmark and engine (listing.shown_figure)."""
    figure = shown_figure(e)
    return figure.label() if figure else ""


def index(reg: Registry) -> str:
    head = (
        "<tr><th>entry</th><th>target</th><th>family</th><th>dialect</th><th>EAGLE</th><th>evidence</th>"
        "<th>status</th>"
        "<th>reported AL</th><th>measured AL</th><th>serves</th><th>hardware</th></tr>"
    )
    rows = []
    for e in sorted(reg.entries.values(), key=lambda e: e.id):
        levels = ", ".join(
            f"{sum(x.level == lv for x in e.evidence.values())} {lv}"
            for lv in EVIDENCE_LEVELS
            if any(x.level == lv for x in e.evidence.values())
        )
        measured = f"{e.measured[-1].mean_acceptance_length:.3f}" if e.measured else ""
        rows.append(
            f'<tr><td><a href="entries/{escape(e.id)}.html">{escape(e.id)}</a></td>'
            f"<td>{escape(e.target.repo or e.target.path or '')}</td><td>{escape(e.family)}</td>"
            f"<td>{escape(e.dialect or '?')}</td><td>{escape(e.eagle_version or '-')}</td><td>{escape(levels)}</td>"
            f"<td>{escape(e.status.state)}</td>"
            f"<td>{escape(_reported(e))}</td><td>{measured}</td><td>{escape(serving_summary(e))}</td>"
            f"<td>{escape(e.hardware.runner if e.hardware else 'cpu' if e.target.path else '?')}</td></tr>"
        )
    body = (
        f"<h1>eaglezoo: {len(reg.entries)} drafters (EAGLE-3 / 3.1, P-EAGLE, DFlash, DSpark)</h1>"
        '<p><input id="filter" type="search" placeholder="filter: a target, dialect, status..." size="40"></p>'
        f'<table id="entries"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
    )
    return document("eaglezoo: the zoo", body + FILTER)


def entry_page(e: Entry, reg: Registry) -> str:
    sections = [_facts(e), _serving(e), _reported_figures(e), _floors(e), _measured(e, reg), _sources(e)]
    body = (
        f'<p><a href="../index.html">all drafters</a></p><h1>{escape(e.id)}</h1>'
        f"<p>{escape(e.drafter.repo or e.drafter.path or '')} for {escape(e.target.repo or e.target.path or '')}"
        f", published by {escape(e.publisher)}; family {escape(e.family)}"
        + (f", EAGLE {escape(e.eagle_version)}" if e.eagle_version else "")
        + f", {escape(e.status.state)}</p>"
        + "".join(sections)
    )
    return document(e.id, body)


def _facts(e: Entry) -> str:
    rows = []
    for name in FACTS:
        value, evidence = e.fact(name), e.evidence.get(name)
        if value is not None:
            shown = json.dumps(value) if not isinstance(value, str) else value
            rows.append(
                f"<tr><td>{escape(name)}</td><td>{escape(shown[:120])}</td><td>{escape(evidence.level)}</td>"
                f"<td>{_link(evidence.source)}</td></tr>"
            )
        elif name in e.null_reasons:
            rows.append(
                f"<tr><td>{escape(name)}</td><td>unknown</td><td></td><td>{escape(e.null_reasons[name])}</td></tr>"
            )
    return (
        "<h2>Facts and their evidence</h2><table><tr><th>fact</th><th>value</th><th>evidence</th><th>source</th>"
        f"</tr>{''.join(rows)}</table>"
    )


def _serving(e: Entry) -> str:
    """Each engine's whole path, as serve-config prints it: its warnings first, convert first where the engine would
    not read the published drafter faithfully, the command to diagnose with apart."""
    drafter = e.drafter.repo or e.drafter.path or ""
    target = e.target.repo or e.target.path or ""
    return "<h2>Serve it</h2>" + "".join(
        _served_by(e, engine, drafter, target) for engine in ("vllm", "sglang", "llamacpp")
    )


def _served_by(e: Entry, engine: str, drafter: str, target: str) -> str:
    """One engine's path, or why it has none (SGLang has no P-EAGLE path)."""
    try:
        path = serve_entry(e, engine, drafter, target, 3, [e.id], e.target_num_layers)
    except EaglezooError as exc:
        return f"<p>{escape(engine)}: not served ({escape(exc.message)})</p>"
    return f"<p>{escape(engine)}</p><pre><code>{escape(shown_path(path.steps, path.warnings))}</code></pre>"


def _reported_figures(e: Entry) -> str:
    """Every figure the entry reports, each with its K, benchmark and engine; acceptance lengths the most comparable
    first, a broken setup's labelled and last."""
    if not e.reported:
        return ""
    lengths = best_first(e.reported)
    rest = [x for x in e.reported if x not in lengths]
    rows = "".join(
        f"<tr><td>{escape(x.metric)}</td><td>{escape(x.label())}</td><td>{_link(x.source)}</td></tr>"
        for x in lengths + rest
    )
    return (
        "<h2>Reported by others</h2><p>Figures from other engines, prompts and K: compare like with like "
        f"(eaglezoo verify measures this drafter itself).</p><table><tr><th>metric</th><th>value (K, benchmark, "
        f"engine)</th><th>source</th></tr>{rows}</table>"
    )


def _floors(e: Entry) -> str:
    if not e.acceptance_floors:
        return f"<h2>Floors</h2><p>{escape(e.null_reasons.get('acceptance_floors', 'none recorded'))}</p>"
    rows = "".join(
        f"<tr><td>{escape(f.k)}</td><td>{escape(f.temperature)}</td><td>{escape(f.per_position or '')}</td>"
        f"<td>{escape(f.mean_acceptance_length or '')}</td><td>{escape(f.source)}</td></tr>"
        for f in e.acceptance_floors
    )
    return (
        "<h2>Floors</h2><table><tr><th>K</th><th>T</th><th>per position</th><th>AL</th><th>source</th></tr>"
        f"{rows}</table>"
    )


def _measured(e: Entry, reg: Registry) -> str:
    if not e.measured:
        return "<h2>Measured</h2><p>no verify report recorded yet (`eaglezoo registry record`)</p>"

    parts = ["<h2>Measured</h2>"]
    for m in e.measured:
        parts.append(
            f"<p>K={escape(m.k)}, T={escape(m.temperature)}, {escape(m.engine)} on {escape(m.hardware)}, "
            f"{escape(m.date)}: "
            f"acceptance length {m.mean_acceptance_length:.3f} over {m.num_drafts} drafts, "
            f"{'passed' if m.passed else 'failed' if m.passed is False else 'no floors'}</p>"
        )
        report = reg.path(m.report, "measured.report")
        if report.is_file():
            saved = read_report(report, "measured.report", needs="its plot").model_dump(mode="json")
            shown, total = plotted_buckets(saved)
            parts.append(f'<div class="plot">{per_position(saved)}</div>{plotted_note(total, len(shown), table=False)}')
    return "".join(parts)


def _sources(e: Entry) -> str:
    items = "".join(f"<li>{_link(s)}</li>" for s in e.sources)
    notes = "".join(f"<li>{escape(n)}</li>" for n in e.notes)
    return f"<h2>Sources</h2><ul>{items}</ul>" + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
