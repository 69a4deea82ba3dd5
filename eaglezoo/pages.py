"""Self-contained HTML pages of verify, tune and compare reports: the headline, the plots (inline SVG from
`plots.py`), the engine and hardware they ran on, and the exact serving command. No script, no stylesheet
link and no network fetch: the page is one file that opens anywhere. Built from a report's JSON, so a saved
report (`eaglezoo report REPORT.json --html FILE`) renders as a fresh one does."""

from __future__ import annotations

from html import escape as _escape

from . import plots
from .serving import shown_path, vllm_serve_command, vllm_speculative_config

STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}.plots{display:flex;flex-wrap:wrap;gap:1rem}
.plot{flex:0 1 28rem;max-width:28rem}.plot svg{width:100%;height:auto}table{border-collapse:collapse}
td,th{border-bottom:1px solid #ddd;padding:.25rem .6rem;text-align:left}code,pre{background:#f4f4f4}
pre{padding:.6rem;white-space:pre-wrap;word-break:break-all}.headline{font-size:1.2rem}"""


def escape(value) -> str:
    """Any value as HTML text: every interpolated value goes through here (a report is data, never markup), on
    every page and on the zoo site: HTML-escaped, and no control or bidi character left raw (plots.visible)."""
    return _escape(plots.visible(str(value)))


def plotted_note(total: int, shown: int, what: str = "the most drafts", table: bool = True) -> str:
    """The sentence a page says where a plot draws fewer buckets than the report holds, else ""."""
    if total <= shown:
        return ""
    return (f"<p>{total} buckets; the plot shows the {shown} with {what}"
            + (", the table lists all</p>" if table else "</p>"))


def bucket_table(r: dict) -> list[str]:
    """A verify report's buckets, every one: prompts, drafts and acceptance (one pass over the report)."""
    drift = r.get("drift") or {}
    lengths, rates = drift.get("mean_acceptance_length_by_bucket") or {}, drift.get("acceptance_per_position_by_bucket") or {}
    if not rates:
        return []
    counts, intervals = plots.bucket_counts(r), drift.get("mean_acceptance_length_interval_by_bucket") or {}
    body = []
    for name, (prompts, drafts) in counts.items():
        low_high = intervals.get(name) if isinstance(intervals, dict) else None
        shown = (f" [{fixed(low_high[0], '.2f')}, {fixed(low_high[1], '.2f')}]" if isinstance(low_high, list)
                 and len(low_high) == 2 and all(isinstance(x, (int, float)) for x in low_high) else "")
        length = f"{fixed(lengths[name])}{shown}" if name in lengths else ""
        body.append(f"<tr><td>{escape(name)}</td><td>{prompts}</td><td>{drafts}</td><td>{length}</td>"
                    f"<td>{escape(', '.join(format(x, '.2f') for x in rates[name]))}</td></tr>")
    shown = len(plots.plotted_buckets(r)[0])
    head = ("<tr><th>bucket</th><th>prompts</th><th>drafts</th><th>acceptance length</th><th>per position</th>"
            "</tr>")
    return [f"<h2>Per bucket</h2>{plotted_note(len(counts), shown)}<table>{head}{''.join(body)}</table>"]


def fixed(value, spec: str = ".3f") -> str:
    """A number formatted, as HTML text."""
    return escape(format(value, spec))


def document(title: str, body: str) -> str:
    """The one skeleton of every page eaglezoo writes (reports and the zoo site): self-contained, no script."""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>\n")


def page(title: str, headline: str, plots_svg: list[str], facts: list[tuple[str, str]], steps: list[str],
         tables: list[str] = ()) -> str:
    figures = "".join(f'<div class="plot">{s}</div>' for s in plots_svg)
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    serve = f"<h2>Serve it</h2><pre><code>{escape(shown_path(steps))}</code></pre>" if steps else ""
    return document(title, f"<h1>{escape(title)}</h1>"
                           f'<p class="headline">{headline}</p><div class="plots">{figures}</div>{"".join(tables)}'
                           f"<h2>Where it ran</h2><table>{rows}</table>{serve}")


def serving_steps(r: dict, drafter: str) -> list[str]:
    """The report's own serving path (what serve-config prints); for a report written before it kept one, the
    `vllm serve` command of the drafter as measured."""
    return r.get("serve") or [vllm_serve_command(r["target"], vllm_speculative_config(drafter, r["num_spec_tokens"]))]


def verify_page(r: dict) -> str:
    engine = r["engine"].get("name", "native")
    headline = (f"Mean acceptance length <b>{fixed(r['mean_acceptance_length'])}</b> at "
                f"K={escape(r['num_spec_tokens'])} over {escape(r['num_drafts'])} drafts ({escape(r['num_prompts'])} "
                f"prompts &times; {escape(r['max_new_tokens'])} tokens)")
    figures = [plots.per_position(r), plots.histogram(r)]
    figures += [plots.by_k(r)] if r.get("acceptance_by_k") else []
    figures += [plots.drift(r)] if r["drift"].get("feedback_rms_per_depth") else []
    figures += [plots.speedup(r)] if r.get("speedup") else []
    facts = [("drafter", r["drafter"]), ("target", r["target"]),
             ("engine", f"{engine} {r['engine'].get('version') or ''}".strip()), ("device", r["device"]),
             ("dtype", r["dtype"]), ("temperature", str(r["sampling"]["temperature"])),
             ("eaglezoo", r["eaglezoo_version"]), ("created", r["created"])]
    return page(f"verify: {r['drafter']}", headline, figures, facts, serving_steps(r, r["drafter"]), bucket_table(r))


def tune_page(r: dict) -> str:
    choices = ", ".join(f"concurrency {d['concurrency']}: K={d['k']} ({d['speedup']:.2f}x)" for d in r["decision"])
    facts = [("drafter", r["drafter"]), ("target", r["target"]),
             ("engine", f"vLLM {r['engine']['version']}"), ("device", r["engine"]["device"]),
             ("dtype", r["engine"]["dtype"]), ("basis", r["basis"]), ("eaglezoo", r["eaglezoo_version"])]
    notes = "".join(f"<li>{escape(n)}</li>" for n in r["notes"])
    return page(f"tune: {r['drafter']}", f"Recommended: {escape(choices)}", [plots.tune_throughput(r)], facts,
                [vllm_serve_command(r["target"], r["vllm_speculative_config"])],
                [f"<h2>Notes</h2><ul>{notes}</ul>"] if notes else [])


def compare_page(r: dict) -> str:
    every = r["rows"][-1]
    low, high = every["interval"][0], every["interval"][1]
    headline = (f"B/A = <b>{fixed(every['ratio'])}</b> [{fixed(low)}, {fixed(high)}] "
                f"over {escape(every['prompts'])} prompts ({escape(every['bucket'])})")
    body = "".join(f"<tr><td>{escape(x['bucket'])}</td><td>{escape(x['prompts'])}</td><td>{fixed(x['a'])}</td>"
                   f"<td>{fixed(x['b'])}</td><td>{fixed(x['ratio'])}</td><td>[{fixed(x['interval'][0])}, "
                   f"{fixed(x['interval'][1])}]</td><td>{escape(x['verdict'])}</td></tr>" for x in r["rows"])
    note = plotted_note(len(r["rows"]) - 1, len(plots.plotted_rows(r)) - 1, "the most prompts")
    table = (f"<h2>Per bucket</h2>{note}<table><tr><th>bucket</th><th>prompts</th><th>AL A</th><th>AL B</th>"
             f"<th>B / A</th><th>95% interval</th><th>verdict</th></tr>{body}</table>")
    facts = [("A", r["a"]), ("B", r["b"]), ("target", r["target"]), ("engine", r["engine"]),
             *([("engine B", r["engine_b"])] if r.get("engine_b", r["engine"]) != r["engine"] else []),
             ("interval", r["interval"]), ("eaglezoo", r["eaglezoo_version"])]
    return page("compare: A against B", headline, [plots.compare_buckets(r)], facts, serving_steps(r, r["b"]), [table])


PAGES = {"verify": lambda r: verify_page(r), "tune": lambda r: tune_page(r), "compare": lambda r: compare_page(r)}


def page_for(report: dict) -> str:
    """The page of a report (a typed report's JSON: `kind` says which)."""
    return PAGES[report["kind"]](report)
