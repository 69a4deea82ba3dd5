"""Self-contained HTML pages of verify, tune and compare reports: the headline, the plots (inline SVG from
`plots.py`), the engine and hardware they ran on, and the exact serving command. No script, no stylesheet
link and no network fetch: the page is one file that opens anywhere. Built from a report's JSON, so a saved
report (`eaglezoo report REPORT.json --html FILE`) renders as a fresh one does."""

from __future__ import annotations

import json
from html import escape as _escape

from . import plots
from .serving import shown_path, vllm_serve_command, vllm_speculative_config
from .tune.cost import simulations
from .tune.model import Cost

STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}.plots{display:flex;flex-wrap:wrap;gap:1rem}
.plot{flex:0 1 28rem;max-width:28rem}.plot svg{width:100%;height:auto}table{border-collapse:collapse}
td,th{border-bottom:1px solid #ddd;padding:.25rem .6rem;text-align:left}a,td{overflow-wrap:anywhere}\
code,pre{background:#f4f4f4}
pre{padding:.6rem;white-space:pre-wrap;word-break:break-all}.headline{font-size:1.2rem}"""


def escape(value) -> str:
    """Any value as HTML text: every interpolated value goes through here (a report is data, never markup), on
    every page and on the zoo site: HTML-escaped, and no control or bidi character left raw (plots.visible)."""
    return _escape(plots.visible(str(value)))


def plotted_note(total: int, shown: int, what: str = "the most drafts", table: bool = True) -> str:
    """The sentence a page says where a plot draws fewer buckets than the report holds, else ""."""
    if total <= shown:
        return ""
    return f"<p>{total} buckets; the plot shows the {shown} with {what}" + (
        ", the table lists all</p>" if table else "</p>"
    )


def bucket_table(r: dict) -> list[str]:
    """A verify report's buckets, every one: prompts, drafts and acceptance (one pass over the report)."""
    drift = r.get("drift") or {}
    lengths, rates = (
        drift.get("mean_acceptance_length_by_bucket") or {},
        drift.get("acceptance_per_position_by_bucket") or {},
    )
    if not rates:
        return []
    counts, intervals = plots.bucket_counts(r), drift.get("mean_acceptance_length_interval_by_bucket") or {}
    body = []
    for name, (prompts, drafts) in counts.items():
        low_high = intervals.get(name) if isinstance(intervals, dict) else None
        shown = (
            f" [{fixed(low_high[0], '.2f')}, {fixed(low_high[1], '.2f')}]"
            if isinstance(low_high, list) and len(low_high) == 2 and all(isinstance(x, (int, float)) for x in low_high)
            else ""
        )
        length = f"{fixed(lengths[name])}{shown}" if name in lengths else ""
        body.append(
            f"<tr><td>{escape(name)}</td><td>{prompts}</td><td>{drafts}</td><td>{length}</td>"
            f"<td>{escape(', '.join(format(x, '.2f') for x in rates[name]))}</td></tr>"
        )
    shown = len(plots.plotted_buckets(r)[0])
    head = "<tr><th>bucket</th><th>prompts</th><th>drafts</th><th>acceptance length</th><th>per position</th></tr>"
    return [f"<h2>Per bucket</h2>{plotted_note(len(counts), shown)}<table>{head}{''.join(body)}</table>"]


def fixed(value, spec: str = ".3f") -> str:
    """A number formatted, as HTML text."""
    return escape(format(value, spec))


def document(title: str, body: str) -> str:
    """The one skeleton of every page eaglezoo writes (reports and the zoo site): self-contained, no script."""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>{body}</body></html>\n"
    )


def page(
    title: str,
    headline: str,
    plots_svg: list[str],
    facts: list[tuple[str, str]],
    steps: list[str],
    tables: list[str] = (),
) -> str:
    figures = "".join(f'<div class="plot">{s}</div>' for s in plots_svg)
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    serve = f"<h2>Serve it</h2><pre><code>{escape(shown_path(steps))}</code></pre>" if steps else ""
    return document(
        title,
        f"<h1>{escape(title)}</h1>"
        f'<p class="headline">{headline}</p><div class="plots">{figures}</div>{"".join(tables)}'
        f"<h2>Where it ran</h2><table>{rows}</table>{serve}",
    )


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


def gate_section(r: dict) -> list[str]:
    """The verdict, why a registry's floors were compared and not gated, every floor with the figure and the
    difference, and every failure."""
    gate, verdict = r.get("gate") or {}, verdict_of(r)
    parts = [f"<h2>Verdict: {escape(verdict)}</h2>"]
    if gate.get("entry_floors") == "compared":
        why = "".join(f"<li>{escape(w)}</li>" for w in gate.get("why_compared") or [])
        parts.append(
            f"<p>The registry's floors (measured on {escape(gate.get('measured_on') or 'another basis')}) "
            f"are compared, not gated: exit 0.</p><ul>{why}</ul>"
        )
    rows = "".join(
        f"<tr><td>{escape(c['what'])}</td><td>{escape(c['source'])}</td><td>{fixed(c['floor'], 'g')}</td>"
        f"<td>{'-' if c['measured'] is None else fixed(c['measured'])}</td>"
        f"<td>{'-' if c['difference'] is None else fixed(c['difference'], '+.3f')}</td>"
        f"<td>{'met' if c['met'] else 'below' if c['met'] is False else 'not measured'}"
        f"{'' if c['gated'] else ' (compared)'}</td></tr>"
        for c in gate.get("checks") or []
    )
    if rows:
        parts.append(
            "<table><tr><th>floor</th><th>source</th><th>floor</th><th>measured</th><th>difference</th>"
            f"<th></th></tr>{rows}</table>"
        )
    failures = "".join(f"<li>FAIL {escape(f)}</li>" for f in r.get("failures") or [])
    return parts + ([f"<ul>{failures}</ul>"] if failures else [])


def skipped_section(r: dict) -> list[str]:
    rows = "".join(
        f"<tr><td>{escape(s['index'])}</td><td>{escape(s['bucket'])}</td><td>{escape(s['reason'])}</td></tr>"
        for s in r.get("skipped_prompts") or []
    )
    head = "<tr><th>row</th><th>condition</th><th>reason</th></tr>"
    return (
        [f"<h2>Skipped prompts</h2><p>Never measured as something else.</p><table>{head}{rows}</table>"] if rows else []
    )


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
    prompt_set = r.get("prompt_set")
    taken = f"; prompts: {escape(prompt_set['name'])}, {escape(prompt_set['selection'])}" if prompt_set else ""
    headline = (
        f"<b>{escape(verdict_of(r))}</b>: mean acceptance length <b>{fixed(r['mean_acceptance_length'])}</b> "
        f"at K={escape(r['num_spec_tokens'])} over {escape(r['num_drafts'])} drafts "
        f"({escape(r['num_prompts'])} prompts &times; {escape(r['max_new_tokens'])} tokens{taken})"
    )
    figures = [plots.per_position(r), plots.histogram(r)]
    figures += [plots.by_k(r)] if r.get("acceptance_by_k") else []
    figures += [plots.drift(r)] if r["drift"].get("feedback_rms_per_depth") else []
    figures += [plots.speedup(r)] if r.get("speedup") else []
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
    return page(
        f"verify: {r['drafter']}",
        headline,
        figures,
        facts,
        serving_steps(r, r["drafter"]),
        gate_section(r) + bucket_table(r) + skipped_section(r),
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
        ("engine", f"vLLM {r['engine']['version']}"),
        ("device", r["engine"]["device"]),
        ("dtype", r["engine"]["dtype"]),
        ("basis", r["basis"]),
        ("eaglezoo", r["eaglezoo_version"]),
    ]
    notes = "".join(f"<li>{escape(n)}</li>" for n in r["notes"])
    failures = "".join(f"<li>{escape(n)}</li>" for n in r.get("failures") or [])
    steps = [
        *([r["convert_command"]] if r.get("convert_command") else []),
        r.get("recommended_command") or vllm_serve_command(r["target"], r["vllm_speculative_config"]),
    ]
    tables = [
        tune_grid(r),
        *tune_confirmation(r),
        *tune_commands(r),
        *([f"<h2>Failures</h2><ul>{failures}</ul>"] if failures else []),
        *([f"<h2>Notes</h2><ul>{notes}</ul>"] if notes else []),
    ]
    headline = f"Recommended: {escape(choices)}" + (
        f" &mdash; serve <b>{escape(r['recommended'])}</b>" if r.get("recommended") else ""
    )
    return page(f"tune: {r['drafter']}", headline, [plots.tune_throughput(r)], facts, steps, tables)


def tune_grid(r: dict) -> str:
    """Every cell: median [interval] over its repeats, spread, latencies, acceptance; the decision per load."""
    head = (
        "<tr><th>load</th><th>K</th><th>tokens/s (median)</th><th>interval</th><th>repeats</th><th>spread</th>"
        "<th>TTFT p50 / p90 ms</th><th>TPOT p50 / p90 ms</th><th>acceptance length</th><th>decision</th></tr>"
    )
    chosen = {d["concurrency"]: d for d in r["decision"]}
    body = []
    for x in sorted(r["grid"], key=lambda x: (x["concurrency"], x["k"])):
        d, lat = chosen[x["concurrency"]], x.get("latency") or {}
        said = ("too close to call: chosen" if d.get("too_close") else "chosen") if d["k"] == x["k"] else ""
        body.append(
            f"<tr><td>{escape(x['concurrency'])}</td><td>{escape(x['k'])}</td>"
            f"<td>{fixed(x['output_tokens_per_s'], '.1f')}</td><td>{_pair(x.get('interval'), '.1f')}</td>"
            f"<td>{escape(', '.join(format(v, '.1f') for v in x.get('repeats') or []))}</td>"
            f"<td>{_maybe(x.get('spread_pct'), '.1f', '%')}</td>"
            f"<td>{_pair((lat.get('ttft_p50_ms'), lat.get('ttft_p90_ms')), '.1f')}</td>"
            f"<td>{_pair((lat.get('tpot_p50_ms'), lat.get('tpot_p90_ms')), '.2f')}</td>"
            f"<td>{_maybe(x.get('acceptance_length'), '.2f')}</td><td>{escape(said)}</td></tr>"
        )
    return f"<h2>Every cell</h2><table>{head}{''.join(body)}</table>"


def tune_confirmation(r: dict) -> list[str]:
    """The confirmation and its verdict, the no-speculation column, the adaptive column."""
    conf = r.get("confirmation") or {}
    rows = "".join(
        f"<tr><td>{escape(p['concurrency'])}</td><td>{fixed(p['output_tokens_per_s'], '.1f')}</td>"
        f"<td>{_pair(p.get('interval'), '.1f')}</td><td>{escape(p.get('against_no_speculation') or '')}</td>"
        f"<td>{escape(p.get('against_best_static') or '')}</td></tr>"
        for p in conf.get("schedule") or []
    )
    if not rows:
        return []
    verdict = f": <b>{escape(conf['verdict'])}</b>" if conf.get("verdict") else ""
    out = [
        (
            f"<h2>Confirmation{verdict}</h2><table><tr><th>load</th><th>tokens/s</th><th>interval</th>"
            f"<th>against no speculation</th><th>against static K={escape(conf['best_static_k'])}</th></tr>"
            f"{rows}</table>"
        )
    ]
    nospec = "".join(
        f"<tr><td>{escape(x['concurrency'])}</td><td>{escape(x['table_k'])}</td>"
        f"<td>{fixed(x['table_tokens_per_s'], '.1f')}</td><td>{fixed(x['no_speculation_tokens_per_s'], '.1f')}"
        f"</td><td>{fixed(x['ratio'], '.2f')}</td><td>{escape(x['verdict'])}</td></tr>"
        for x in r.get("no_speculation") or []
    )
    if nospec:
        out.append(
            "<h2>Against no speculation</h2><table><tr><th>load</th><th>table K</th><th>table tokens/s</th>"
            f"<th>no speculation tokens/s</th><th>ratio</th><th>verdict</th></tr>{nospec}</table>"
        )
    adaptive = (r.get("adaptive") or {}).get("levels") or []
    if adaptive:
        out.append(
            "<h2>vLLM adaptive verification</h2><table><tr><th>load</th><th>tokens/s</th><th>interval</th>"
            "<th>against no speculation</th></tr>"
            + "".join(
                f"<tr><td>{escape(x['concurrency'])}</td><td>{fixed(x['output_tokens_per_s'], '.1f')}</td>"
                f"<td>{_pair(x['interval'], '.1f')}</td><td>{escape(x['against_no_speculation'])}</td></tr>"
                for x in adaptive
            )
            + "</table>"
        )
    if r.get("cost"):
        out.append(tune_cost(r["cost"]))
    return out


def tune_cost(c: dict) -> str:
    """Where tune's time went, beside one pass per cell, and the same counts simulated at GPU-scale start costs."""
    if c.get("engine_starts") is None or c.get("wall_s") is None:  # a report from before the counts
        return (
            f"<p>Engine time {fixed(c['engine_s'], '.0f')} s for {escape(c['repeats'])} repeats; one pass per "
            f"cell would have cost about {fixed(c['single_pass_s'], '.0f')} s.</p>"
        )
    rows = [
        ("engine starts", c["engine_starts"], fixed(c["start_s"], ".0f")),
        ("measuring (warm-ups, repeats, confirmation)", c["repeats"], fixed(c["measure_s"], ".0f")),
        ("wall time", "", fixed(c["wall_s"], ".0f")),
        ("one pass per cell", c.get("one_pass_starts") or "", _maybe(c.get("one_pass_s"), ".0f")),
    ]
    body = "".join(f"<tr><td>{escape(a)}</td><td>{escape(b)}</td><td>{v}</td></tr>" for a, b, v in rows)
    sims = "".join(
        f"<tr><td>{fixed(x.start_s, '.0f')}</td><td>{fixed(x.tune_s / 60, '.1f')}</td>"
        f"<td>{fixed(x.one_pass_s / 60, '.1f')}</td><td>{fixed(x.ratio, '.1f')}</td></tr>"
        for x in simulations(Cost.model_validate(c))
    )
    per_cell = ", ".join(f"K={x['k']} c={x['concurrency']}: {x['repeats']}" for x in c.get("repeats_per_cell") or [])
    return (
        "<h2>Where the time went</h2><table><tr><th></th><th>count</th><th>seconds</th></tr>"
        f"{body}</table><p>Repeats per cell: {escape(per_cell)}</p>"
        "<h3>Simulated, not measured: the same counts at GPU-scale start costs</h3><table><tr><th>s per start</th>"
        f"<th>tune (min)</th><th>one pass per cell (min)</th><th>ratio</th></tr>{sims}</table>"
    )


def tune_commands(r: dict) -> list[str]:
    """Each engine's own config of the decision: vLLM's table, SGLang's static K and adaptive config."""
    zeros = (
        ""
        if "--speculative-config" in (r.get("vllm_command") or "--speculative-config")
        else ": every K is 0, so no speculative config"
    )  # (vLLM #49986: a K=0 entry still costs throughput)
    out = (
        [f"<h2>vLLM's table{zeros}</h2><pre><code>{escape(r['vllm_command'])}</code></pre>"]
        if r.get("vllm_command")
        else []
    )
    if r.get("sglang_command"):
        out.append(f"<h2>SGLang, static K</h2><pre><code>{escape(r['sglang_command'])}</code></pre>")
    if r.get("sglang_adaptive_config"):
        out.append(
            f"<h2>SGLang adaptive</h2><p>sglang-adaptive.json:</p><pre><code>"
            f"{escape(json.dumps(r['sglang_adaptive_config']))}</code></pre><pre><code>"
            f"{escape(r['sglang_adaptive_command'])}</code></pre>"
        )
    return out


def _pair(values, spec: str) -> str:
    return (
        ""
        if not values or any(v is None for v in values)
        else f"{fixed(values[0], spec)} &ndash; {fixed(values[1], spec)}"
    )


def _maybe(value, spec: str, unit: str = "") -> str:
    return "" if value is None else fixed(value, spec) + unit


def compare_page(r: dict) -> str:
    every = r["rows"][-1]
    low, high = every["interval"][0], every["interval"][1]
    headline = (
        f"B/A = <b>{fixed(every['ratio'])}</b> [{fixed(low)}, {fixed(high)}] "
        f"over {escape(every['prompts'])} prompts ({escape(every['bucket'])}): "
        f"<b>{escape(every.get('verdict') or '')}</b> at 95%"
    )
    body = "".join(
        f"<tr><td>{escape(x['bucket'])}</td><td>{escape(x['prompts'])}</td><td>{fixed(x['a'])}</td>"
        f"<td>{fixed(x['b'])}</td><td>{fixed(x['ratio'])}</td><td>[{fixed(x['interval'][0])}, "
        f"{fixed(x['interval'][1])}]</td><td>{escape(x['verdict'])}</td></tr>"
        for x in r["rows"]
    )
    note = plotted_note(len(r["rows"]) - 1, len(plots.plotted_rows(r)) - 1, "the most prompts")
    table = (
        f"<h2>Per bucket</h2>{note}<table><tr><th>bucket</th><th>prompts</th><th>AL A</th><th>AL B</th>"
        f"<th>B / A</th><th>95% interval</th><th>verdict</th></tr>{body}</table>"
    )
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
    return page("compare: A against B", headline, [plots.compare_buckets(r)], facts, serving_steps(r, r["b"]), [table])


def doctor_page(r: dict) -> str:
    title = f"eaglezoo doctor: {r['verdict']}"
    findings = "".join(
        f"<h2>{escape(f['cause'])} ({escape(f['verdict'])}, "
        f"{'confirmed' if f['confirmed'] else 'not confirmed by a trial'})"
        f"</h2><p>{escape(f['what'])}</p><ul>{''.join(f'<li>{escape(e)}</li>' for e in f['evidence'])}</ul>"
        f"<p><b>Fix</b>: <code>{escape(f['fix'])}</code></p>"
        for f in r["findings"]
    )
    rows = "".join(
        f"<tr><td>{escape(a['source'])}</td><td>{fixed(a['mean_acceptance_length'])}</td>"
        f"<td>{fixed(a['interval'][0])}-{fixed(a['interval'][1])}</td>"
        f"<td>{escape(', '.join(fixed(x) for x in a['per_position']))}</td><td>{a['prompts']}</td></tr>"
        for a in r["measured"]
    )
    measured = (
        "<h2>Acceptance</h2><table><tr><th>measured</th><th>length</th><th>95% interval</th>"
        f"<th>per position</th><th>prompts</th></tr>{rows}</table>"
    )
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
    table = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    notes = "".join(f"<li>{escape(n)}</li>" for n in r["notes"])
    return document(
        title,
        f'<h1>{escape(title)}</h1><p class="headline">{escape(r["summary"])}</p>{findings}'
        f"{measured}<h2>What was diagnosed</h2><table>{table}</table>"
        + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""),
    )


PAGES = {
    "verify": lambda r: verify_page(r),
    "tune": lambda r: tune_page(r),
    "compare": lambda r: compare_page(r),
    "doctor": lambda r: doctor_page(r),
}


def page_for(report: dict) -> str:
    """The page of a report (a typed report's JSON: `kind` says which)."""
    return PAGES[report["kind"]](report)
