"""Self-contained HTML pages of verify, tune and compare reports: the headline, the plots (inline SVG from
`plots.py`), the engine and hardware they ran on, and the exact serving command. No script, no stylesheet
link and no network fetch: the page is one file that opens anywhere. Built from a report's JSON, so a saved
report (`eaglezoo report REPORT.json --html FILE`) renders as a fresh one does. The markup is in the jinja2
templates of eaglezoo/templates/ (autoescaped: a report is data, never markup); this module chooses what they
show."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from jinja2 import Environment, PackageLoader
from jinja2.ext import Extension
from markupsafe import Markup

from . import plots
from .serving import shown_path, vllm_serve_command, vllm_speculative_config
from .tune.cost import Simulated, simulations
from .tune.model import Cost


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


def bucket_rows(r: dict) -> tuple[list[BucketRow], int]:
    """A verify report's buckets, every one: prompts, drafts and acceptance (one pass over the report), and how
    many the plot draws."""
    drift = r.get("drift") or {}
    lengths, rates = (
        drift.get("mean_acceptance_length_by_bucket") or {},
        drift.get("acceptance_per_position_by_bucket") or {},
    )
    if not rates:
        return [], 0
    counts, intervals = plots.bucket_counts(r), drift.get("mean_acceptance_length_interval_by_bucket") or {}
    rows = []
    for name, (prompts, drafts) in counts.items():
        low_high = intervals.get(name) if isinstance(intervals, dict) else None
        shown = (
            f" [{format(low_high[0], '.2f')}, {format(low_high[1], '.2f')}]"
            if isinstance(low_high, list) and len(low_high) == 2 and all(isinstance(x, (int, float)) for x in low_high)
            else ""
        )
        length = f"{format(lengths[name], '.3f')}{shown}" if name in lengths else ""
        rows.append(BucketRow(name, prompts, drafts, length, ", ".join(format(x, ".2f") for x in rates[name])))
    return rows, len(plots.plotted_buckets(r)[0])


def _serve(steps: list[str]) -> str:
    return shown_path(steps) if steps else ""


def serving_steps(r: dict, drafter: str) -> list[str]:
    """The report's own serving path (what serve-config prints); for a report written before it kept one, the
    `vllm serve` command of the drafter as measured."""
    return r.get("serve") or [vllm_serve_command(r["target"], vllm_speculative_config(drafter, r["num_spec_tokens"]))]


def verdict_of(r: dict) -> str:
    """A verify report's verdict: its gate's (PASS, FAIL, compared, not gated, no floors), or for a report written
    before it kept one, from its failures and floors."""
    gate = r.get("gate")
    if gate:
        return gate["verdict"]
    floors = r.get("thresholds") or {}
    return "FAIL" if r.get("failures") else "PASS" if any(floors.values()) else "no floors"


def reproduction_facts(r: dict) -> list[tuple[str, str]]:
    """The facts a report's reproduction adds to its page (none for a report written before it kept one)."""
    rep = r.get("reproduction")
    if not rep:
        return []
    machine = rep.get("machine") or {}
    versions = ", ".join(
        f"{name} {rep[name]}" for name in ("eaglezoo", "python", "torch", "transformers") if rep.get(name)
    )
    facts = [
        ("rerun", " ".join(rep["command"]) if rep.get("command") else "(built by a library call)"),
        ("versions", versions + (f"; engine {rep['engine']}" if rep.get("engine") else "")),
    ]
    if rep.get("prompt_set"):
        facts.append(("prompts", f"{rep['prompt_set']} (sha256 {rep.get('prompts_sha256') or 'unknown'})"))
    seeds = [
        f"{name} {rep[key]}"
        for name, key in (("sampling", "seed"), ("bootstrap", "bootstrap_seed"))
        if rep.get(key) is not None
    ]
    facts += [("seeds", ", ".join(seeds))] if seeds else []
    if machine:
        gpus = ", ".join(machine.get("gpus") or []) or "no GPU"
        facts.append(("machine", f"{machine.get('cpu')}; {gpus}; {machine.get('os')}"))
    return facts


def verify_page(r: dict) -> str:
    engine = r["engine"].get("name", "native")
    svgs = [plots.per_position(r), plots.histogram(r)]
    svgs += [plots.by_k(r)] if r.get("acceptance_by_k") else []
    svgs += [plots.drift(r)] if r["drift"].get("feedback_rms_per_depth") else []
    svgs += [plots.speedup(r)] if r.get("speedup") else []
    facts = [
        ("drafter", r["drafter"]),
        ("target", r["target"]),
        ("engine", f"{engine} {r['engine'].get('version') or ''}".strip()),
        ("device", r["device"]),
        ("dtype", r["dtype"]),
        ("temperature", str(r["sampling"]["temperature"])),
        ("eaglezoo", r["eaglezoo_version"]),
        ("created", r["created"]),
        *reproduction_facts(r),
    ]
    buckets, plotted = bucket_rows(r)
    return render(
        "verify.html",
        title=f"verify: {r['drafter']}",
        r=r,
        verdict=verdict_of(r),
        gate=r.get("gate") or {},
        figures=figures(svgs),
        facts=facts,
        serve=_serve(serving_steps(r, r["drafter"])),
        buckets=buckets,
        buckets_plotted=plotted,
    )


def tune_page(r: dict) -> str:
    choices = ", ".join(
        f"concurrency {d['concurrency']}: K={d['k']} ({d['speedup']:.2f}x"
        f"{', too close to call' if d.get('too_close') else ''})"
        for d in r["decision"]
    )
    facts = [
        ("drafter", r["drafter"]),
        ("target", r["target"]),
        ("engine", f"{'llama.cpp' if r.get('llamacpp') else 'vLLM'} {r['engine']['version']}"),
        ("device", r["engine"]["device"]),
        ("dtype", r["engine"]["dtype"]),
        ("basis", r["basis"]),
        ("eaglezoo", r["eaglezoo_version"]),
    ]
    steps = (
        [*r["llamacpp"]["steps"], *(x["command"] for x in r["llamacpp"]["levels"])]
        if r.get("llamacpp")
        else [
            *([r["convert_command"]] if r.get("convert_command") else []),
            r.get("recommended_command") or vllm_serve_command(r["target"], r["vllm_speculative_config"]),
        ]
    )
    zeros = (
        ""
        if "--speculative-config" in (r.get("vllm_command") or "--speculative-config")
        else ": every K is 0, so no speculative config"
    )  # (vLLM #49986: a K=0 entry still costs throughput)
    adaptive = r.get("sglang_adaptive_config")
    return render(
        "tune.html",
        title=f"tune: {r['drafter']}",
        r=r,
        choices=choices,
        figures=figures([plots.tune_throughput(r)]),
        facts=facts,
        serve=_serve(steps),
        cells=tune_cells(r),
        zeros=zeros,
        adaptive_config=json.dumps(adaptive) if adaptive else "",
        simulated=simulated_costs(r.get("cost")),
    )


def simulated_costs(cost: dict | None) -> list[Simulated]:
    """tune's counts at GPU-scale start costs (tune/cost.py), for a report that has them."""
    if not cost or cost.get("engine_starts") is None or cost.get("wall_s") is None:
        return []
    return simulations(Cost.model_validate(cost))


def tune_cells(r: dict) -> list[tuple[dict, dict, str]]:
    """Every cell in load and K order, with its latencies and what the decision said of it."""
    chosen = {d["concurrency"]: d for d in r["decision"]}
    cells = []
    for x in sorted(r["grid"], key=lambda x: (x["concurrency"], x["k"])):
        d = chosen[x["concurrency"]]
        said = ("too close to call: chosen" if d.get("too_close") else "chosen") if d["k"] == x["k"] else ""
        cells.append((x, x.get("latency") or {}, said))
    return cells


def compare_page(r: dict) -> str:
    facts = [
        ("A", r["a"]),
        ("B", r["b"]),
        ("target", r["target"]),
        ("engine", r["engine"]),
        *([("engine B", r["engine_b"])] if r.get("engine_b", r["engine"]) != r["engine"] else []),
        ("interval", r["interval"]),
        ("eaglezoo", r["eaglezoo_version"]),
        *reproduction_facts(r),
    ]
    return render(
        "compare.html",
        title="compare: A against B",
        r=r,
        figures=figures([plots.compare_buckets(r)]),
        plotted=len(plots.plotted_rows(r)),
        facts=facts,
        serve=_serve(serving_steps(r, r["b"])),
    )


def doctor_page(r: dict) -> str:
    s = r["server"]
    facts = [
        ("server", s["url"] or s["engine"]),
        ("vLLM", s["version"] or "?"),
        ("served target", s["target"]),
        ("served drafter", s["drafter"] or "not said"),
        ("K", str(s["k"])),
        ("K table", str(s["k_table"]) if s["k_table"] else "none"),
        ("drafter named", r["drafter"]),
        ("target named", r["target"]),
        ("prompts", f"{r['prompts']} x {r['max_new_tokens']} tokens"),
    ]
    return render("doctor.html", title=f"eaglezoo doctor: {r['verdict']}", r=r, facts=facts)


PAGES = {
    "verify": verify_page,
    "tune": tune_page,
    "compare": compare_page,
    "doctor": doctor_page,
}


def page_for(report: dict) -> str:
    """The page of a report (a typed report's JSON: `kind` says which)."""
    return PAGES[report["kind"]](report)
