"""`eaglezoo watch`: its options and its lines (one per interval, or a JSON object per line). Registered on the app
by cli/app.py; the watching itself is eaglezoo/watch.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import EXIT_FINDINGS, Terminated, UsageError, describe, printable
from .common import JsonOpt, RegistryOpt, app, out
from .sources import classify

if TYPE_CHECKING:
    from ..verify.report.gate import FloorTable
    from ..watch import Interval, Watch


@app.command()
def watch(
    url: Annotated[
        str, typer.Argument(metavar="URL", help="The vLLM, llama.cpp or SGLang server, e.g. http://127.0.0.1:8000.")
    ],
    drafter: Annotated[
        str | None,
        typer.Argument(
            metavar="[DRAFTER]",
            help="The registry id (or entry file) of the drafter it serves: its acceptance floors are the bar.",
        ),
    ] = None,
    interval: Annotated[
        float, typer.Option(min=0.1, max=86400.0, metavar="SECONDS", help="Seconds between two scrapes.")
    ] = 60.0,
    once: Annotated[
        bool, typer.Option("--once", help="One interval (two scrapes --interval apart), then exit 0 or 1: for cron/CI.")
    ] = False,
    fail_after: Annotated[
        int, typer.Option(min=1, max=10_000, metavar="N", help="Exit 1 after N failing intervals in a row.")
    ] = 3,
    baseline: Annotated[
        int,
        typer.Option(min=1, max=10_000, metavar="N", help="The server's baseline: its first N intervals that drafted."),
    ] = 3,
    drift: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, metavar="FRACTION", help="A drop below the baseline AL by more than this share of AL-1."
        ),
    ] = 0.1,
    temperature: Annotated[
        float, typer.Option(min=0.0, max=2.0, help="The temperature whose floors apply (the traffic's).")
    ] = 0.0,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Acceptance health over time, from the server's /metrics deltas: one line per interval.

    Example: eaglezoo watch http://127.0.0.1:8000 tiny-example-eagle31 --once --interval 300

    Each interval is healthy, low (below the drafter's floors), drift (below the server's own baseline), idle, reset
    (the server restarted) or unreachable. Exit 1 after --fail-after failing intervals in a row (--once: one
    interval), 2 bad input."""
    from ..watch import Rules, al_floor, connect, follow, start, summary

    floors = floor_table(drafter, temperature, registry_dir)
    server = connect(url)
    rules = Rules(floors=floors, k=server.k or 0, drift=drift, baseline=baseline, fail_after=fail_after)
    state = start(server, rules, once)
    k = len(state.last.num_accepted_tokens_per_pos) or rules.k
    header = {
        "watching": printable(server.base),
        "engine": server.engine,
        "k": k or None,
        "interval_s": interval,
        "floors": {
            "per_position": floors.covering(k) if state.last.num_accepted_tokens_per_pos else None,
            "mean_acceptance_length": al_floor(rules, k, bool(state.last.num_accepted_tokens_per_pos))[0],
        },
        "baseline": "the server's counts before the first scrape"
        if state.baseline is not None
        else f"the first {baseline} intervals that draft",
        "fail_after": state.rules.fail_after,
    }
    line(header, as_json, describe_header(header, drafter))
    try:
        follow(server, state, interval, once, lambda i: line(i.as_dict(), as_json, describe_interval(i)))
    except (KeyboardInterrupt, Terminated) as exc:  # the way a watch ends: its summary, the signal's exit code
        line({"summary": summary(state), "stopped": True}, as_json, describe_summary(state, stopped=True))
        raise typer.Exit(describe(exc).exit_code) from None
    line({"summary": summary(state)}, as_json, describe_summary(state, stopped=False))
    if state.failing:
        raise typer.Exit(EXIT_FINDINGS)


def floor_table(drafter: str | None, temperature: float, registry_dir: Path | None) -> FloorTable:
    from ..verify.report.gate import FloorTable

    """The drafter's floors at this temperature, from its registry entry (none without a drafter)."""
    if drafter is None:
        return FloorTable()
    if classify(drafter) != "registry":
        raise UsageError(
            f"{drafter}: watch reads a drafter's floors from its registry entry, and this is not a registry id",
            hint="give its registry id or entry file (eaglezoo registry list), or no DRAFTER for the baseline alone",
        )
    from ..registry.load import lookup

    entry, _ = lookup(drafter, registry_dir)
    return entry.floor_table(temperature)


def line(data: dict[str, object], as_json: bool, text: str) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data) + "\n")
        sys.stdout.flush()
    else:
        out.print(text, markup=False)


def rates(values: object) -> str:
    return " ".join(f"{r:.2f}" for r in values) if isinstance(values, list) else "-"


def describe_header(h: dict[str, object], drafter: str | None) -> str:
    floors = h["floors"]
    assert isinstance(floors, dict)
    bars = [f"AL {floors['mean_acceptance_length']:.2f}"] if floors["mean_acceptance_length"] is not None else []
    bars += [f"per position {rates(floors['per_position'])}"] if floors["per_position"] else []
    bar = f"floors of {drafter}: {', '.join(bars)}" if bars else f"no floors{' of ' + drafter if drafter else ''}"
    return (
        f"watching {h['engine']} at {h['watching']} (K={h['k'] or '?'}) every {h['interval_s']:g} s; {bar}; "
        f"baseline: {h['baseline']}; failing after {h['fail_after']} interval(s) in a row"
    )


def describe_interval(i: Interval) -> str:
    d = i.as_dict()
    head = f"{d['time']}  {i.status:<11}"
    if i.status in ("healthy", "low", "drift"):
        building = f" ({i.building} intervals pooled so far)" if i.building else ""
        base = f"  baseline {i.baseline_al:.2f}{building}" if i.baseline_al is not None else ""
        figures = f"AL {d['mean_acceptance_length']:.2f}  per position {rates(d['acceptance_per_position'])}"
        body = f"{figures}  {d['drafts']} drafts{base}"
        return f"{head} {body}" + (f"  ({'; '.join(i.reasons)})" if i.reasons else "")
    if i.status == "idle":
        return f"{head} no drafts in {i.seconds:.3g} s"
    return f"{head} {'; '.join(printable(r) for r in i.reasons)}"


def describe_summary(state: Watch, stopped: bool) -> str:
    from ..watch import summary

    s = summary(state)
    al = s["mean_acceptance_length"]
    worst = s["worst_mean_acceptance_length"]
    figures = (
        f"AL {al:.2f} over {s['drafts']} drafts, worst interval {worst:.2f}" if isinstance(al, float) else "no drafts"
    )
    by = ", ".join(f"{n} {k}" for k, n in s["by_status"].items()) if isinstance(s["by_status"], dict) else ""
    verdict = "FAILING" if s["failing"] else "stopped" if stopped else "ok"
    return f"{verdict}: {s['intervals']} interval(s) ({by or 'none'}); {figures}"
