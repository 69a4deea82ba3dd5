"""Self-contained HTML pages of verify, tune and compare reports: the headline, the plots (inline SVG from
`plots.py`), the engine and hardware they ran on, and the exact serving command. No script, no stylesheet
link and no network fetch: the page is one file that opens anywhere. Built from a report's JSON, so a saved
report (`eaglezoo report REPORT.json --html FILE`, read once by reports.read_saved) renders as a fresh one does:
each page takes its report's model, never its JSON. The markup is in the jinja2 templates of eaglezoo/templates/
(autoescaped: a report is data, never markup); this module chooses what they show."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from jinja2 import Environment, PackageLoader
from jinja2.ext import Extension
from markupsafe import Markup

from . import plots
from .compare import CompareReport
from .doctor.report import DoctorReport
from .hub.card import CardAcceptance
from .reports import AnyReport
from .reproduce import Reproduction
from .serving import shown_path
from .tune.cost import Simulated, simulations
from .tune.model import Cell, Choice, Cost, Latency, TuneReport
from .verify.report import VerifyReport


class _Joined(Extension):
    """A template's lines joined with nothing, each without its indentation: templates are written one element a
    line for reading, and a page is the one line it always was (a space where two lines meet is `{{ " " }}`).
    The stylesheet and the script (not .html) keep their lines."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        if not (name or "").endswith(".html"):
            return source
        return "".join(line.strip() for line in source.splitlines())


def _shown(value: object) -> object:
    """Every value a template prints, as text with no control or bidi character left raw (plots.visible), which
    autoescape then HTML-escapes, on every page and on the zoo site; markup (a plot, a macro's output) as is."""
    return value if isinstance(value, Markup) else plots.visible(str(value))


def _fixed(value: Any, spec: str = ".3f") -> str:
    """A number formatted (the templates' `fmt` filter)."""
    return format(value, spec)


ENV = Environment(loader=PackageLoader("eaglezoo", "templates"), autoescape=True, finalize=_shown, extensions=[_Joined])
ENV.filters["fmt"] = _fixed


def render(template: str, **context: Any) -> str:
    """A page from its template (each extends base.html, the one skeleton of every page eaglezoo writes)."""
    return ENV.get_template(template).render(context) + "\n"


def figures(svgs: list[str]) -> list[Markup]:
    """The plots' SVG, as markup: plots.py draws it, with every text from data neutralised (plots.literal)."""
    return [Markup(svg) for svg in svgs]  # noqa: S704 - plots.py's own SVG, not data


class BucketRow(NamedTuple):
    name: str
    prompts: int
    drafts: int
    length: str
    per_position: str


def bucket_rows(r: VerifyReport) -> tuple[list[BucketRow], int]:
    """A verify report's buckets, every one: prompts, drafts and acceptance (one pass over the report), and how
    many the plot draws."""
    lengths, rates = r.drift.mean_acceptance_length_by_bucket, r.drift.acceptance_per_position_by_bucket
    if not rates:
        return [], 0
    counts, intervals = plots.bucket_counts(r), r.drift.mean_acceptance_length_interval_by_bucket
    rows = []
    for name, (prompts, drafts) in counts.items():
        low_high = intervals.get(name)
        shown = f" [{format(low_high[0], '.2f')}, {format(low_high[1], '.2f')}]" if low_high else ""
        length = f"{format(lengths[name], '.3f')}{shown}" if name in lengths else ""
        rows.append(BucketRow(name, prompts, drafts, length, ", ".join(format(x, ".2f") for x in rates[name])))
    return rows, len(plots.plotted_buckets(r)[0])


def _serve(steps: list[str]) -> str:
    return shown_path(steps) if steps else ""


def reproduction_facts(rep: Reproduction | None) -> list[tuple[str, str]]:
    """The facts a report's reproduction adds to its page (none for a report written before it kept one)."""
    if rep is None:
        return []
    versions = rep.versions()
    facts = [
        ("rerun", " ".join(rep.command) if rep.command else "(built by a library call)"),
        ("versions", versions + (f"; engine {rep.engine}" if rep.engine else "")),
    ]
    if rep.prompt_set:
        facts.append(("prompts", f"{rep.prompt_set} (sha256 {rep.prompts_sha256 or 'unknown'})"))
    seeds = [
        f"{name} {value}"
        for name, value in (("sampling", rep.seed), ("bootstrap", rep.bootstrap_seed))
        if value is not None
    ]
    facts += [("seeds", ", ".join(seeds))] if seeds else []
    if rep.machine:
        gpus = ", ".join(rep.machine.gpus) or "no GPU"
        facts.append(("machine", f"{rep.machine.cpu}; {gpus}; {rep.machine.os}"))
    return facts


def verify_page(r: VerifyReport) -> str:
    svgs = [plots.per_position(r), plots.histogram(r)]
    svgs += [plots.by_k(r)] if r.acceptance_by_k else []
    svgs += [plots.drift(r)] if r.drift.feedback_rms_per_depth else []
    svgs += [plots.speedup(r)] if r.speedup else []
    facts = [
        ("drafter", r.drafter),
        ("target", r.target),
        ("engine", f"{r.engine.name} {r.engine.version or ''}".strip()),
        ("device", r.device),
        ("dtype", r.dtype),
        ("temperature", str(r.sampling.temperature)),
        ("eaglezoo", r.eaglezoo_version),
        ("created", r.created),
        *reproduction_facts(r.reproduction),
    ]
    buckets, plotted = bucket_rows(r)
    return render(
        "verify.html",
        title=f"verify: {r.drafter}",
        r=r,
        verdict=r.gate.verdict,
        gate=r.gate,
        figures=figures(svgs),
        facts=facts,
        serve=_serve(r.serve),
        buckets=buckets,
        buckets_plotted=plotted,
    )


def tune_page(r: TuneReport) -> str:
    choices = ", ".join(
        f"concurrency {d.concurrency}: K={d.k} ({d.speedup:.2f}x{', too close to call' if d.too_close else ''})"
        for d in r.decision
    )
    facts = [
        ("drafter", r.drafter),
        ("target", r.target),
        ("engine", f"{'llama.cpp' if r.llamacpp else 'vLLM'} {r.engine.version}"),
        ("device", r.engine.device),
        ("dtype", r.engine.dtype),
        ("basis", r.basis),
        ("eaglezoo", r.eaglezoo_version),
    ]
    steps = (
        [*r.llamacpp.steps, *(x.command for x in r.llamacpp.levels)]
        if r.llamacpp
        else [
            *([r.convert_command] if r.convert_command else []),
            *([r.recommended_command] if r.recommended_command else []),
        ]
    )
    zeros = (
        ""
        if "--speculative-config" in (r.vllm_command or "--speculative-config")
        else ": every K is 0, so no speculative config"
    )  # (vLLM #49986: a K=0 entry still costs throughput)
    adaptive = r.sglang_adaptive_config
    return render(
        "tune.html",
        title=f"tune: {r.drafter}",
        r=r,
        choices=choices,
        figures=figures([plots.tune_throughput(r)]),
        facts=facts,
        serve=_serve(steps),
        cells=tune_cells(r),
        zeros=zeros,
        adaptive_config=json.dumps(adaptive) if adaptive else "",
        simulated=simulated_costs(r.cost),
    )


def simulated_costs(cost: Cost | None) -> list[Simulated]:
    """tune's counts at GPU-scale start costs (tune/cost.py), for a report that has them."""
    if cost is None or cost.engine_starts is None or cost.wall_s is None:
        return []
    return simulations(cost)


def tune_cells(r: TuneReport) -> list[tuple[Cell, Latency | None, str]]:
    """Every cell in load and K order, with its latencies and what the decision said of it."""
    chosen: dict[int, Choice] = {d.concurrency: d for d in r.decision}
    cells = []
    for x in sorted(r.grid, key=lambda x: (x.concurrency, x.k)):
        d = chosen[x.concurrency]
        said = ("too close to call: chosen" if d.too_close else "chosen") if d.k == x.k else ""
        cells.append((x, x.latency, said))
    return cells


def compare_page(r: CompareReport) -> str:
    facts = [
        ("A", r.a),
        ("B", r.b),
        ("target", r.target),
        ("engine", r.engine),
        *([("engine B", r.engine_b)] if r.engine_b != r.engine else []),
        ("interval", r.interval),
        ("eaglezoo", r.eaglezoo_version),
        *reproduction_facts(r.reproduction),
    ]
    return render(
        "compare.html",
        title="compare: A against B",
        r=r,
        figures=figures([plots.compare_buckets(r)]),
        plotted=len(plots.plotted_rows(r)),
        facts=facts,
        serve=_serve(r.serve),
    )


def doctor_page(r: DoctorReport) -> str:
    s = r.server
    facts = [
        ("server", s.url or s.engine),
        ("vLLM", s.version or "?"),
        ("served target", s.target),
        ("served drafter", s.drafter or "not said"),
        ("K", str(s.k)),
        ("K table", str(s.k_table) if s.k_table else "none"),
        ("drafter named", r.drafter),
        ("target named", r.target),
        ("prompts", f"{r.prompts} x {r.max_new_tokens} tokens"),
    ]
    return render("doctor.html", title=f"eaglezoo doctor: {r.verdict}", r=r, facts=facts)


def card_acceptance(r: VerifyReport) -> CardAcceptance:
    """What a model card shows of a verify report, its plot drawn (hub/card.py writes the card)."""
    shown, total = plots.plotted_buckets(r)
    return CardAcceptance(
        target=r.target,
        engine=f"{r.engine.name} {r.engine.version or ''}".strip(),
        device=r.device,
        dtype=r.dtype,
        k=r.num_spec_tokens,
        prompts=r.num_prompts,
        max_new_tokens=r.max_new_tokens,
        temperature=r.sampling.temperature,
        per_position=tuple(r.acceptance_per_position),
        mean_acceptance_length=r.mean_acceptance_length,
        num_drafts=r.num_drafts,
        figure=plots.per_position(r),
        buckets_shown=len(shown),
        buckets_total=total,
    )


def page_for(report: AnyReport) -> str:
    """The page of a report, from its validated model (`kind` says which)."""
    if isinstance(report, VerifyReport):
        return verify_page(report)
    if isinstance(report, TuneReport):
        return tune_page(report)
    if isinstance(report, CompareReport):
        return compare_page(report)
    return doctor_page(report)
