"""The plots of eaglezoo's pages and model cards, drawn by matplotlib as SVG text from a report's model (a saved
report, read by reports.read_saved, renders the same as a fresh one). Figures are built with the object API (no
pyplot state) and written deterministically (fixed hash salt, no date), so the same report gives the same bytes."""

from __future__ import annotations

import functools
import io
import re
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from matplotlib import rcParams
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from .compare import CompareReport, Row
    from .tune.model import TuneReport
    from .verify.report import VerifyReport

rcParams["svg.hashsalt"] = "eaglezoo"
rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and the page's own font
rcParams["text.usetex"] = False  # whatever a matplotlibrc says: text is never handed to TeX,
rcParams["text.parse_math"] = True  # and `literal` escapes every "$" of text from data (so mathtext sees none)
BLUE, ORANGE, GREY = "#1f6fb2", "#e07b24", "#8a8a8a"
MAX_BUCKETS = 8  # bucket lines a plot draws: more are unreadable, and each costs the legend's layout

# Characters that no one sees but that change what is seen: C0 and C1 controls (tab and newline aside), lone
# surrogates, and the bidirectional controls that reorder the text around them (U+202E shows "exe.txt" as
# "txt.exe"). Text from data shows each as its visible escape, e.g. "\\u202e".
UNSEEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def visible(text: str) -> str:
    """Text from data (a report, a registry entry) with every character in UNSEEN shown as its escape: the one
    neutraliser of the plots and (through the templates' finalize, pages._shown) of every page."""
    return UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def literal(value: object) -> str:
    """Text from data as matplotlib draws it as itself: neutralised, and each "$" escaped, so that no bucket,
    label or title is read as mathtext (a bucket named "$$" made matplotlib raise; "$x$" drew an italic x)."""
    return visible(str(value)).replace("$", "\\$")


def bucket_counts(report: VerifyReport) -> dict[str, list[int]]:
    """[prompts, drafts] of each bucket the report's drift names, counted from its per-prompt rows (one pass)."""
    counts = {name: [0, 0] for name in report.drift.acceptance_per_position_by_bucket}
    for row in report.per_prompt:
        got = counts.get(row.bucket)
        if got is not None:
            got[0] += 1
            got[1] += len(row.accepted)
    return counts


def plotted_buckets(report: VerifyReport) -> tuple[list[str], int]:
    """(the buckets per_position draws, how many the report holds): all of them up to MAX_BUCKETS, else the
    MAX_BUCKETS with the most drafts (the first on a tie), in the report's order."""
    counts = bucket_counts(report)
    names = list(counts)
    if len(names) <= MAX_BUCKETS:
        return names, len(names)
    largest = sorted(range(len(names)), key=lambda i: (-counts[names[i]][1], i))[:MAX_BUCKETS]
    return [names[i] for i in sorted(largest)], len(names)


def legend(ax: Any, handles: list[Any]) -> None:  # matplotlib's Axes and artists (untyped)
    """A legend of these artists under their labels as given (matplotlib would drop a label that starts with "_")."""
    ax.legend(handles, [h.get_label() for h in handles], fontsize=7, frameon=False)


Report = TypeVar("Report")


def quietly(draw: Callable[[Report], str]) -> Callable[[Report], str]:
    """A plot drawn without the plotting library's warnings (a glyph missing from the font, a value it cannot
    place): they are not the user's to read, and the figure is drawn as well as it can be."""

    @functools.wraps(draw)
    def drawn(report: Report) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return draw(report)

    return drawn


def svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]  # inline: no XML prolog or doctype


def _axes(title: str, xlabel: str, ylabel: str, width: float = 5.2) -> tuple[Figure, Any]:
    fig = Figure(figsize=(width, 3.2))
    ax = fig.subplots()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    return fig, ax


@quietly
def per_position(report: VerifyReport) -> str:
    """Acceptance at each draft position (decoding path), with each prompt bucket overlaid."""
    rates = report.acceptance_per_position
    positions = range(1, len(rates) + 1)
    fig, ax = _axes("acceptance by draft position", "draft position", "acceptance rate")
    drawn = [ax.bar(positions, rates, color=BLUE, alpha=0.85, label="all prompts")]
    by_bucket = report.drift.acceptance_per_position_by_bucket
    for bucket in plotted_buckets(report)[0]:  # at most MAX_BUCKETS: the page says so, and lists them all
        values = by_bucket[bucket]
        drawn += ax.plot(range(1, len(values) + 1), values, marker="o", linewidth=1, label=literal(bucket))
    ax.set_ylim(0, 1)
    ax.set_xticks(list(positions))
    legend(ax, drawn)
    return svg(fig)


@quietly
def histogram(report: VerifyReport) -> str:
    counts = report.histogram
    fig, ax = _axes("accepted tokens per verify step", "accepted draft tokens", "verify steps")
    ax.bar(range(len(counts)), counts, color=ORANGE)
    ax.set_xticks(range(len(counts)))
    return svg(fig)


@quietly
def by_k(report: VerifyReport) -> str:
    table = report.acceptance_by_k
    assert table is not None  # noqa: S101 - drawn only for a report that has the table
    ks = [row.k for row in table.rows]
    fig, ax = _axes(
        f"acceptance length by K ({literal(table.basis.split(':')[0])})", "K (draft tokens)", "acceptance length"
    )
    ax.plot(ks, [row.mean_acceptance_length for row in table.rows], marker="o", color=BLUE)
    ax.set_xticks(ks)
    return svg(fig)


@quietly
def drift(report: VerifyReport) -> str:
    """The fed-back hidden state's RMS at each drafting depth: a drafter whose state drifts grows (or collapses)."""
    rms = report.drift.feedback_rms_per_depth or []
    fig, ax = _axes("drift by depth", "drafting depth", "fed-back hidden RMS")
    ax.plot(range(1, len(rms) + 1), rms, marker="o", color=ORANGE)
    ax.set_xticks(range(1, len(rms) + 1))
    ax.set_ylim(bottom=0)
    return svg(fig)


@quietly
def speedup(report: VerifyReport) -> str:
    """Output tokens/s with and without the drafter at each measured concurrency (verify --speedup)."""
    levels = report.speedup.levels if report.speedup else []
    xs = [lv.concurrency for lv in levels]
    fig, ax = _axes("output tokens/s by concurrency", "concurrency", "output tokens/s")
    ax.plot(
        xs,
        [lv.with_drafter.output_tokens_per_s for lv in levels],
        marker="o",
        color=BLUE,
        label="with the drafter",
    )
    ax.plot(
        xs,
        [lv.without_drafter.output_tokens_per_s for lv in levels],
        marker="o",
        color=GREY,
        linestyle="--",
        label="without",
    )
    for x, lv in zip(xs, levels, strict=True):
        ax.annotate(
            f"{lv.speedup:.2f}x",
            (x, lv.with_drafter.output_tokens_per_s),
            fontsize=7,
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.legend(fontsize=7, frameon=False)
    return svg(fig)


@quietly
def tune_throughput(report: TuneReport) -> str:
    """Output tokens/s against concurrency, one line per K; the recommended K at each load circled."""
    fig, ax = _axes("output tokens/s by load", "concurrency", "output tokens/s")
    for k in range(report.k_max + 1):
        cells = sorted((c for c in report.grid if c.k == k), key=lambda c: c.concurrency)
        ax.plot(
            [c.concurrency for c in cells],
            [c.output_tokens_per_s for c in cells],
            marker="o",
            color=GREY if k == 0 else None,
            linestyle="--" if k == 0 else "-",
            label="without the drafter" if k == 0 else f"K={k}",
        )
    chosen = report.decision
    ax.scatter(
        [d.concurrency for d in chosen],
        [d.output_tokens_per_s for d in chosen],
        s=160,
        facecolors="none",
        edgecolors="red",
        linewidths=1.5,
        label="recommended K",
        zorder=3,
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(report.concurrency, [str(c) for c in report.concurrency])
    ax.legend(fontsize=7, frameon=False)
    return svg(fig)


def plotted_rows(report: CompareReport) -> list[Row]:
    """The rows of a compare report that compare_buckets draws: every bucket up to MAX_BUCKETS, else the
    MAX_BUCKETS with the most prompts (in the report's order); the last row (all prompts) always."""
    buckets, every = report.rows[:-1], report.rows[-1:]
    if len(buckets) <= MAX_BUCKETS:
        return report.rows
    largest = sorted(range(len(buckets)), key=lambda i: (-buckets[i].prompts, i))[:MAX_BUCKETS]
    return [buckets[i] for i in sorted(largest)] + every


@quietly
def compare_buckets(report: CompareReport) -> str:
    """Acceptance length of A and B per bucket, side by side, the ratio B/A over each pair."""
    rows = plotted_rows(report)
    xs = range(len(rows))
    fig, ax = _axes("acceptance length per bucket", "bucket", "acceptance length", width=max(5.2, 1.1 * len(rows)))
    ax.bar([x - 0.2 for x in xs], [r.a for r in rows], width=0.4, color=GREY, label="A")
    ax.bar([x + 0.2 for x in xs], [r.b for r in rows], width=0.4, color=BLUE, label="B")
    for x, r in zip(xs, rows, strict=True):
        ax.annotate(f"{r.ratio:.2f}x", (x, max(r.a, r.b)), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(xs), [literal(r.bucket) for r in rows], rotation=20, fontsize=8)
    ax.legend(fontsize=7, frameon=False)
    return svg(fig)
