"""The doctor's page: the verdict first, each finding with its evidence and fix, then every trial's acceptance."""

from __future__ import annotations

from ..pages import document, escape, fixed


def doctor_page(r: dict) -> str:
    title = f"eaglezoo doctor: {r['verdict']}"
    findings = "".join(
        f"<h2>{escape(f['cause'])} ({escape(f['verdict'])}, {'confirmed' if f['confirmed'] else 'not confirmed by a trial'})"
        f"</h2><p>{escape(f['what'])}</p><ul>{''.join(f'<li>{escape(e)}</li>' for e in f['evidence'])}</ul>"
        f"<p><b>Fix</b>: <code>{escape(f['fix'])}</code></p>" for f in r["findings"])
    rows = "".join(f"<tr><td>{escape(a['source'])}</td><td>{fixed(a['mean_acceptance_length'])}</td>"
                   f"<td>{fixed(a['interval'][0])}-{fixed(a['interval'][1])}</td>"
                   f"<td>{escape(', '.join(fixed(x) for x in a['per_position']))}</td><td>{a['prompts']}</td></tr>"
                   for a in r["measured"])
    measured = ("<h2>Acceptance</h2><table><tr><th>measured</th><th>length</th><th>95% interval</th>"
                f"<th>per position</th><th>prompts</th></tr>{rows}</table>")
    s = r["server"]
    facts = [("server", s["url"] or s["engine"]), ("vLLM", s["version"] or "?"), ("served target", s["target"]),
             ("served drafter", s["drafter"] or "not said"), ("K", str(s["k"])),
             ("K table", str(s["k_table"]) if s["k_table"] else "none"), ("drafter named", r["drafter"]),
             ("target named", r["target"]), ("prompts", f"{r['prompts']} x {r['max_new_tokens']} tokens")]
    table = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    notes = "".join(f"<li>{escape(n)}</li>" for n in r["notes"])
    return document(title, f"<h1>{escape(title)}</h1><p class=\"headline\">{escape(r['summary'])}</p>{findings}"
                           f"{measured}<h2>What was diagnosed</h2><table>{table}</table>"
                           + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""))
