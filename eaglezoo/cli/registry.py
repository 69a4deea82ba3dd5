"""`eaglezoo registry …`: list, show, check, sync, plan, record. Parses and renders, nothing more."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..errors import EXIT_FINDINGS, UsageError
from .common import JsonOpt, RegistryOpt, app, emit, err, out, shown

registry_app = typer.Typer(no_args_is_help=True, help="The registry of published drafters (registry/*.yaml).")
app.add_typer(registry_app, name="registry")
EntriesArg = Annotated[
    Optional[list[str]], typer.Argument(metavar="[ID|FILE]...", help="Only these entries (default: all).")
]


@registry_app.command("list")
def registry_list(
    target: Annotated[
        Optional[str],
        typer.Option(metavar="TARGET", help="Only drafters for this target (substring, case-insensitive)."),
    ] = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Which drafter for my target? Each entry's best reported figure, and how engines serve it.

    Example: eaglezoo registry list --target meta-llama/Llama-3.3-70B-Instruct

    A target no entry names gets the nearest targets that some do.
    A file that does not load is named on stderr; the others still list."""
    from ..registry import load as registry
    from ..registry.listing import compared, for_target, nearest_targets

    reg = registry.layered(registry_dir)
    entries = for_target(list(reg.entries.values()), target)
    warn_skipped(reg)
    note_overridden(reg.overridden, reg.mine)
    if target and not entries:
        note_nearest(target, nearest_targets(list(reg.entries.values()), target))
    rows = compared(entries)

    def render() -> None:
        render_registry(entries, rows)
        if target:
            render_compared(rows)

    emit([listed_json(e, rows) for e in entries], as_json, render)


def note_nearest(asked: str, nearest: list[str]) -> None:
    """No entry's target contains `asked`: the nearest targets that have drafters, said on stderr."""
    guess = (
        f"; did you mean {' or '.join(shown(t) for t in nearest)}? (eaglezoo registry list --target NAME)"
        if nearest
        else "; eaglezoo registry list shows every target"
    )
    err.print(f"note: no drafter in the registry names a target containing {shown(asked)}{guess}")


def listed_json(entry, rows) -> dict:
    """The entry as its file states it, and what the listing says of it: the figure shown, each engine's path,
    and each of its figures beside the others of its target (those it compares with, else what differs)."""
    from ..registry.listing import serving, shown_figure

    figure = shown_figure(entry)
    return {
        **entry.model_dump(mode="json"),
        "shown_reported": {**figure.model_dump(mode="json"), "label": figure.label()} if figure else None,
        "serving": [s.to_json() for s in serving(entry)],
        "figures": [r.to_json() for r in rows if r.figure.entry_id == entry.id],
    }


def comparable_ids(row) -> str:
    """The entries a figure can be compared with, by id: `none` when it can be compared with no other."""
    ids = list(
        dict.fromkeys(f"{f.entry_id}" + (" (measured)" if f.origin == "measured" else "") for f in row.comparable)
    )
    return ", ".join(ids) if ids else "none"


def render_compared(rows) -> None:
    """The target's figures: those taken under the same conditions side by side, each group with the conditions
    it shares; then every other, apart, with what differs from the nearest figure of its metric."""
    from ..registry.listing import side_by_side

    for group in side_by_side(rows):
        first = group[0].figure
        out.print(f"comparable: {first.metric} ({first.definition}), {first.where()}", markup=False)
        table = Table("entry", "origin", "value", "source")
        for row in group:
            f = row.figure
            table.add_row(shown(f.entry_id), f.origin, shown(f.shown_value()), shown(f.conditions.source))
        out.print(table)
    apart = [r for r in rows if not r.comparable and not r.figure.broken]
    if apart:
        out.print("not comparable with any other figure of this target:", markup=False)
    for row in apart:
        f = row.figure
        why = (
            f"; differs from {row.nearest.entry_id} ({row.nearest.origin}) in {'; '.join(row.differs)}"
            if row.nearest
            else "; no other figure of its metric for this target"
        )
        out.print(f"  {f.entry_id} ({f.origin}) {f.metric} {f.label()}{why}", markup=False)


def warn_skipped(reg) -> None:
    """Each registry file that does not load, named on stderr: the others still list, plan and build."""
    for message in reg.broken.values():
        err.print(f"warning: skipped {message}", markup=False)


def note_overridden(ids, mine) -> None:
    """Said once: the user's entries that replace the base copy's of the same id."""
    if ids:
        shown_ids = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        err.print(
            f"note: {len(ids)} entries of {mine} replace the shipped ones of the same id: {shown_ids}", markup=False
        )


LEVEL_SHORT = {
    "hub-file": "hub",
    "repo-file": "repo",
    "publisher-template": "template",
    "model-card": "card",
    "public-quote": "quote",
    "estimate": "estimate",
}


def render_registry(entries, rows) -> None:
    if not entries:
        out.print("0 entries")
        return
    from ..registry.listing import serving_summary, shown_figure

    table = Table(
        "id",
        "target",
        "family",
        "dialect",
        "EAGLE",
        "aux ids",
        "facts by evidence",
        "reported AL",
        "comparable",
        "serves",
        "status",
    )
    for e in entries:
        figure = shown_figure(e)
        rep = shown(figure.label()) if figure else ""
        row = next((r for r in rows if figure and r.figure == figure.figure(e.id)), None)
        aux = e.evidence.get("aux_layers")
        ids = (
            f"{e.aux_layers.ids} {e.aux_layers.convention} [dim]({LEVEL_SHORT[aux.level]})[/dim]"
            if e.aux_layers.ids
            else "[red]unknown[/red]"
        )
        table.add_row(
            e.id,
            e.target.repo or e.target.path or "",
            e.family,
            e.dialect or "?",
            e.eagle_version or "-",
            ids,
            _levels(e),
            rep,
            shown(comparable_ids(row)) if row else "",
            serving_summary(e),
            e.status.state,
        )
    out.print(table)
    out.print(f"{len(entries)} entries")


def _levels(entry) -> str:
    """How many of the entry's facts rest on each evidence level, strongest first."""
    from ..registry.schema import EVIDENCE_LEVELS

    counts = [(level, sum(e.level == level for e in entry.evidence.values())) for level in EVIDENCE_LEVELS]
    return " ".join(f"{n} {LEVEL_SHORT[level]}" for level, n in counts if n)


@registry_app.command("show")
def registry_show(
    entry_id: Annotated[str, typer.Argument(metavar="ID", help="Registry id, or the path of its YAML file.")],
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Show one registry entry: its facts with their evidence, then the rest.

    Example: eaglezoo registry show nvidia-llama-3.3-70b-instruct-eagle3"""
    from ..registry import load as registry
    from ..registry.listing import compared, target_name

    entry, reg = registry.lookup(entry_id, registry_dir)
    if registry.replaces_base(entry.id, reg):
        note_overridden((entry.id,), reg.directory)
    rivals = [e for e in registry.layered(registry_dir).entries.values() if target_name(e) == target_name(entry)]
    rows = [r for r in compared([entry, *(e for e in rivals if e.id != entry.id)]) if r.figure.entry_id == entry.id]

    def render():
        import yaml

        from ..registry.schema import FACTS

        out.print(
            f"family: {entry.family}" + (f", EAGLE {entry.eagle_version}" if entry.eagle_version else ""), markup=False
        )
        facts = Table("fact", "value", "evidence", "source")
        for name in FACTS:
            value, evidence = entry.fact(name), entry.evidence.get(name)
            if value is None and name in entry.null_reasons:
                facts.add_row(name, "[red]unknown[/red]", "", shown(entry.null_reasons[name]))
            elif value is not None:
                facts.add_row(name, shown(_short(value)), evidence.level, shown(evidence.source))
        out.print(facts)
        if rows:
            render_figures(rows)
        rest = entry.model_dump(mode="json", exclude_none=True, exclude={"evidence"})
        out.print(yaml.safe_dump(rest, sort_keys=False), markup=False)

    emit({**entry.model_dump(mode="json"), "figures": [r.to_json() for r in rows]}, as_json, render)


def render_figures(rows) -> None:
    """Each figure of the entry with the figures of its target's other entries taken under the same conditions,
    or what differs from the nearest."""
    table = Table("origin", "metric", "figure", "comparable with", "differs from the nearest")
    for row in rows:
        f = row.figure
        differs = f"{row.nearest.entry_id}: {'; '.join(row.differs)}" if row.nearest else ""
        label = f.label() + (" BROKEN SETUP" if f.broken else "")
        table.add_row(f.origin, f.metric, shown(label), shown(comparable_ids(row)), shown(differs))
    out.print(table)


@registry_app.command("site")
def registry_site(
    out_dir: Annotated[
        Path, typer.Argument(metavar="OUT", help="The folder to write the site into (must not exist unless --force).")
    ],
    force: Annotated[bool, typer.Option(help="Replace OUT if it exists.")] = False,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """The zoo as a static site: a filterable index and a page per entry.

    Example: eaglezoo registry site zoo-site"""
    from ..registry import load as registry
    from ..registry.site import build, check_out

    reg = registry.load(registry_dir)
    check_out(reg, out_dir, force)  # before the warnings: a refused OUT is the one line said
    warn_skipped(reg)
    pages = build(reg, out_dir, force)
    emit(
        {"out": str(out_dir), "pages": pages},
        as_json,
        lambda: out.print(f"wrote {len(pages)} pages to {shown(str(out_dir))} (open {shown(str(out_dir))}/index.html)"),
    )


@registry_app.command("check")
def registry_check(
    entries: Annotated[
        Optional[list[str]], typer.Argument(metavar="[ID|FILE]...", help="Only these entries (default: all).")
    ] = None,
    online: Annotated[
        bool, typer.Option(help="Also fetch configs and safetensors headers from the Hub and lint remotely.")
    ] = False,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Validate every entry: schema, consistency, and (--online) the Hub files.

    Example: eaglezoo registry check tiny-example-eagle3

    Schema errors name file:line. Exit 1 when an entry has problems."""
    from ..registry.check import check_selected

    results = check_selected(entries or [], registry_dir, online)
    bad = {k: v for k, v in results.items() if v["problems"]}

    def render():
        for entry_id, r in results.items():
            mark = "[red]FAIL[/red]" if r["problems"] else "[green]ok[/green]"
            out.print(f"{mark} {entry_id}" + "".join(f"\n     {p}" for p in r["problems"]))
        out.print(f"{len(results)} checked, {len(bad)} with problems")

    emit({"checked": len(results), "failed": len(bad), "entries": results}, as_json, render)
    if bad:
        raise typer.Exit(EXIT_FINDINGS)


@registry_app.command("sync")
def registry_sync(
    entries: EntriesArg = None,
    write: Annotated[
        bool, typer.Option("--write", help="Record the files' values (with their evidence) in the YAML files.")
    ] = False,
    template: Annotated[
        Optional[Path],
        typer.Option(
            metavar="CONFIG", help="Read this trainer template (a drafter config alone) instead of the Hub; one entry."
        ),
    ] = None,
    source: Annotated[
        Optional[str],
        typer.Option(metavar="URL", help="With --template: the template's original URL, cited as its evidence."),
    ] = None,
    level: Annotated[
        str, typer.Option(metavar="LEVEL", help="With --template: publisher-template, model-card or public-quote.")
    ] = "publisher-template",
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Compare entries with the Hub (or a trainer template); --write records.

    Example: eaglezoo registry sync nvidia-gpt-oss-120b-eagle3-v3 --write

    Reads each entry's drafter and target from the Hub (revisions, sha256s, configs, safetensors headers).
    With --template, one entry's trainer template instead.
    Every difference from the YAML is reported; exit 1 on any left unrecorded. Nothing changes without --write."""
    from ..registry.sync import sync_selected

    results = sync_selected(entries or [], registry_dir, write, template_request(entries, template, source, level))
    drift = [
        r
        for r in results
        if r.error or (r.differences and not r.written) or any(d.kind == "disagrees" for d in r.differences)
    ]  # --write leaves none but these

    def render():
        for r in results:
            mark = "[red]error[/red]" if r.error else "[yellow]drift[/yellow]" if r.differences else "[green]ok[/green]"
            out.print(f"{mark} {shown(r.entry_id)}" + (" (written)" if r.written else ""))
            if r.error:
                out.print(f"     {shown(r.error)}")
            for d in r.differences:
                out.print(
                    f"     {d.kind:8} {shown(d.field)}: {shown(_short(d.registry))} -> {shown(_short(d.hub))}"
                    f"  [dim]({d.level}: {shown(d.source)})[/dim]"
                )
        out.print(f"{len(results)} synced, {len(drift)} with differences" + (", written" if write else ""))

    emit(
        {"synced": len(results), "drifted": len(drift), "written": write, "entries": [_sync_json(r) for r in results]},
        as_json,
        render,
    )
    if drift:
        raise typer.Exit(EXIT_FINDINGS)


TEMPLATE_LEVELS = ("publisher-template", "model-card", "public-quote")


def template_request(entries: list[str] | None, template: Path | None, source: str | None, level: str):
    if template is None:
        if source is not None:
            raise UsageError("--source goes with --template", hint="name the template: --template CONFIG --source URL")
        return None
    if not entries or len(entries) != 1:
        raise UsageError(
            "--template syncs one entry", hint="name the entry: eaglezoo registry sync ID --template CONFIG"
        )
    if not source or not source.startswith("https://"):
        raise UsageError(
            "--template needs --source: the template's original https URL",
            hint="cite where the publisher keeps it, e.g. https://github.com/ORG/REPO/blob/COMMIT/PATH",
        )
    if level not in TEMPLATE_LEVELS:
        raise UsageError(
            f"--level {level!r}: a template is {', '.join(TEMPLATE_LEVELS)}",
            hint="hub-file is for what registry sync reads from the Hub itself",
        )
    return template, source, level


def _short(value) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _sync_json(r) -> dict:
    return {"id": r.entry_id, "error": r.error, "written": r.written, "differences": [vars(d) for d in r.differences]}


@registry_app.command("plan")
def registry_plan(
    runner: Annotated[
        Optional[str], typer.Option(metavar="LABEL", help="Only the jobs of this runner class, e.g. gpu-4x80g.")
    ] = None,
    commands: Annotated[
        bool,
        typer.Option(
            "--commands",
            help=(
                "Print only the verify command lines, one per line (with --json: the plan's JSON, whose "
                '"commands" lists them).'
            ),
        ),
    ] = False,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """The CI matrix: entries by hardware class, with each verify command.

    Example: eaglezoo registry plan --runner gpu-4x80g --commands

    An entry whose class is not known yet waits on `registry sync ID --write` (class waiting-on-sync)."""
    from ..registry import load as registry
    from ..registry.ci import RUNNERS, plan, sync_command

    if runner is not None and runner not in RUNNERS:
        raise UsageError(f"no runner class {runner!r}", hint=f"runner classes: {', '.join(RUNNERS)}")
    reg = registry.load(registry_dir)
    warn_skipped(reg)  # a file that does not load is in no job: said, not silently dropped
    registry_arg = str(registry_dir) if registry_dir is not None else None
    result = plan(reg, runner, registry_arg)
    runnable = [j for r in result.runners for j in result.classes[r]]  # what --commands prints: none waiting
    data = {
        "classes": [
            {
                "runner": r,
                "jobs": [
                    {
                        "id": j.entry_id,
                        "k": j.k,
                        "temperature": j.temperature,
                        "report": j.report,
                        "command": j.shell,
                        **({"after": shlex.join(j.after)} if j.after else {}),
                    }
                    for j in jobs
                ],
            }
            for r, jobs in result.classes.items()
        ],
        "runners": result.runners,  # the runner labels (the workflow's matrix): every class but waiting-on-sync
        "waiting": {
            i: {"sync": shlex.join(sync_command(reg.entries[i], registry_arg)), "why": why}
            for i, why in result.waiting.items()
        },
        "unplanned": dict(result.waiting),  # earlier plans' key: the entries not in a runner class yet
        "estimated": result.estimated,
        "unrunnable": result.unrunnable,
        "unverifiable": result.unverifiable,
        "commands": [j.shell for j in runnable],
    }
    if commands and not as_json:
        for j in runnable:
            print(j.shell)
    else:
        emit(data, as_json, lambda: _render_plan(result))
    if result.unrunnable:
        raise typer.Exit(EXIT_FINDINGS)


def _render_plan(result) -> None:
    from ..registry.ci import WAITING

    for runner, jobs in result.classes.items():
        if runner == WAITING:
            out.print(
                f"[bold yellow]{WAITING}[/bold yellow] ({len(jobs)} jobs of {len(result.waiting)} entries: "
                "the sync records the target's weight bytes and config, and with them the runner class; the "
                "next plan lists the verify there, with its parallel sizes)"
            )
        else:
            out.print(f"[bold]{runner}[/bold] ({len(jobs)} jobs)")
        for j in jobs:
            if j.after:
                out.print(
                    f"  waits on: {shown(shlex.join(j.after))}  [dim]({shown(result.waiting[j.entry_id])})[/dim]",
                    soft_wrap=True,
                )
            out.print(f"  {'then: ' if j.after else ''}{shown(j.shell)}", soft_wrap=True)
    for entry_id, source in result.estimated.items():
        out.print(f"[dim]class computed[/dim] {shown(entry_id)}: {shown(source)}", soft_wrap=True)
    for entry_id, why in result.unrunnable.items():
        out.print(f"[red]no runner[/red] {shown(entry_id)}: {shown(why)}")
    for entry_id, why in result.unverifiable.items():
        out.print(f"[dim]not verified[/dim] {shown(entry_id)}: {shown(why)}", soft_wrap=True)


@registry_app.command("record")
def registry_record(
    report: Annotated[
        Path, typer.Argument(metavar="REPORT.json", help="A report written by `eaglezoo verify ID --report`.")
    ],
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Record a verify report's measurement in its registry entry.

    Example: eaglezoo registry record verify.json

    The report is kept under registry/reports/.
    The status becomes verified only when it passed the entry's floors (exit 1 when it failed them)."""
    from ..registry import load as registry
    from ..registry.ci import record

    result = record(report, registry.load(registry_dir))

    def render():
        colour = {"verified": "green", "failed": "red"}.get(result.state, "yellow")
        m = result.measured
        out.print(
            f"[{colour}]{result.state}[/{colour}] {shown(result.entry_id)}: K={m.k} T={m.temperature:g} "
            f"AL {m.mean_acceptance_length:.3f} on {shown(m.engine)} ({shown(m.hardware)}) -> {shown(m.report)}"
        )
        for why in result.why:
            out.print(f"     {shown(why)}")

    emit(
        {
            "id": result.entry_id,
            "state": result.state,
            "why": result.why,
            "measured": result.measured.model_dump(mode="json"),
        },
        as_json,
        render,
    )
    if result.measured.passed is False:
        raise typer.Exit(EXIT_FINDINGS)


@registry_app.command("update")
def registry_update(
    repo: Annotated[
        Optional[str],
        typer.Option(
            metavar="REPO",
            help=(
                "The Hub dataset the registry is published to (default: $EAGLEZOO_REGISTRY_REPO, else "
                "eaglezoo/registry)."
            ),
        ),
    ] = None,
    revision: Annotated[
        Optional[str],
        typer.Option(
            metavar="REV",
            help="Branch, tag or commit of that dataset (default: main); the commit it resolves to is recorded.",
        ),
    ] = None,
    as_json: JsonOpt = False,
):
    """Fetch a newer registry from the Hub and read it from now on.

    Example: eaglezoo registry update --revision main

    Checked as `registry check` does; your own --registry still lies over it. A bad snapshot changes nothing."""
    from ..registry.shipped import snapshot_home
    from ..registry.update import update

    snapshot = update(repo, revision)
    emit(
        {**snapshot.to_json(), "path": str(snapshot_home())},
        as_json,
        lambda: out.print(
            f"registry updated from {shown(snapshot.repo)} at {snapshot.commit} "
            f"({shown(snapshot.revision)}) -> {shown(str(snapshot_home()))}"
        ),
    )
