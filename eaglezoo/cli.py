"""The `eaglezoo` command line. Each command parses, calls one library function and renders the
result as rich text or `--json`. Every error becomes one line on stderr and an exit code
(0 ok, 1 checks found problems, 2 usage error or bad input)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from . import __version__
from .errors import EXIT_USAGE, EaglezooError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Convert, lint, verify and publish EAGLE-3 / EAGLE 3.1 drafters.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, hint: str | None = None, code: int = EXIT_USAGE):
    line = f"error: {message}" + (f" (hint: {hint})" if hint else "")
    err.print(line, markup=False)
    raise typer.Exit(code)


def guarded(fn):
    """Turns every failure into a one-line error. EAGLEZOO_DEBUG=1 shows tracebacks instead."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except EaglezooError as exc:
            fail(exc.message, exc.hint, exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", code=130)
        except Exception as exc:  # noqa: BLE001 - never a traceback for users
            if os.environ.get("EAGLEZOO_DEBUG"):
                raise
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            fail(f"unexpected {type(exc).__name__}: {detail}", "rerun with EAGLEZOO_DEBUG=1 and report it")
    return wrapper


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


@contextlib.contextmanager
def byte_progress(description: str, total: int, enabled: bool):
    """A progress bar on stderr for work measured in bytes; silent when not a terminal or with --json."""
    if not enabled or not err.is_terminal or total < 32 * 1024 * 1024:
        yield lambda n: None
        return
    columns = [TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


def version_callback(value: bool):
    if value:
        out.print(f"eaglezoo {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option("--version", callback=version_callback, is_eager=True,
                                               help="Show the version and exit.")] = False):
    pass


def parse_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        ids = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        fail(f"--aux-layers must be comma-separated integers, got {text!r}")
    if not ids:
        fail("--aux-layers is empty")
    return ids


def parse_flags(items: list[str] | None) -> dict[str, bool]:
    from .formats.base import FLAGS

    flags = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if name not in FLAGS or value.lower() not in ("true", "false"):
            fail(f"--flag takes NAME=true|false with NAME one of {', '.join(FLAGS)}; got {item!r}")
        flags[name] = value.lower() == "true"
    return flags


# --------------------------------------------------------------------------------------------
# convert


@app.command()
@guarded
def convert(
    src: Annotated[str, typer.Argument(help="Drafter directory (or Hub repo id) in any EAGLE-3 dialect.")],
    dst: Annotated[Path, typer.Argument(metavar="OUT", help="Output directory (must not exist unless --force).")],
    to: Annotated[str, typer.Option("--to", help="Output format: eagle31 or speculators.")] = "eagle31",
    from_: Annotated[Optional[str], typer.Option("--from", help="Source dialect (default: detected).")] = None,
    target: Annotated[Optional[str], typer.Option(help="Target model directory (or Hub id) to check against.")] = None,
    aux_layers: Annotated[Optional[str], typer.Option(help="Aux-layer ids, e.g. 1,2,3 (needs --aux-convention).")] = None,
    aux_convention: Annotated[Optional[str], typer.Option(help="boundary (vLLM, HF hidden_states[i]) or layer-output (SGLang/ModelOpt).")] = None,
    flag: Annotated[Optional[list[str]], typer.Option(help="State an ambiguous flag: NAME=true|false (repeatable).")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="Cast floating tensors (float32, float16, bfloat16); ints and bools never.")] = None,
    verifier: Annotated[Optional[str], typer.Option(help="Target repo id written into speculators_config.verifier.")] = None,
    revision: Annotated[Optional[str], typer.Option(help="Revision when SRC is a Hub repo id.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan; write nothing.")] = False,
    force: Annotated[bool, typer.Option(help="Replace OUT if it exists.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan or result as JSON.")] = False,
):
    """Convert a drafter to the canonical EAGLE 3.1 schema (or the speculators format), losslessly."""
    from .convert import ConvertRequest, apply, check_destination, plan
    from .formats.base import detect_convention
    from .sources import local_dir

    source = local_dir(src, revision)
    target_dir = local_dir(target, None, what="target") if target else None
    req = ConvertRequest(source=source, to=to, dialect=from_, target=target_dir, aux_layers=parse_ids(aux_layers),
                         aux_convention=detect_convention(aux_convention), flags=parse_flags(flag),
                         dtype=dtype, verifier=verifier)
    if not dry_run:
        check_destination(source, dst, force)
    prepared = plan(req)
    if dry_run:
        if as_json:
            print_json({"dry_run": True, "plan": prepared.plan.model_dump(mode="json"), "config": prepared.config})
        else:
            render_plan(prepared.plan)
            out.print("[dim]dry run: nothing written[/dim]")
        return
    with byte_progress("converting", prepared.plan.num_bytes, not as_json) as advance:
        record = apply(prepared, dst, force=force, progress=advance)
    if as_json:
        print_json({"dry_run": False, "out": str(dst), "plan": prepared.plan.model_dump(mode="json"), "record": record})
    else:
        render_plan(prepared.plan)
        out.print(f"[green]wrote[/green] {dst} ({prepared.plan.num_tensors} tensors, "
                  f"{human_bytes(prepared.plan.num_bytes)}; conversion.json records every decision)")


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render_plan(p) -> None:
    s = p.spec
    out.print(f"[bold]{p.source}[/bold]: dialect [cyan]{p.dialect}[/cyan] -> [cyan]{p.to}[/cyan]  "
              f"(EAGLE {s.eagle_version}, {s.arch}, k={s.num_aux}, aux boundary {s.aux.boundary() if s.aux else None}, "
              f"vocab {s.vocab_size}/{s.draft_vocab_size})")
    out.print(f"tensors: {p.num_tensors} kept ({human_bytes(p.num_bytes)}), {len(p.renames)} renamed, "
              f"{len(p.drops)} dropped" + (f", cast to {p.dtype}" if p.dtype else ", bytes unchanged"))
    for r in p.renames[:6]:
        out.print(f"  rename {r.source} -> {r.output}", markup=False)
    if len(p.renames) > 6:
        out.print(f"  ... and {len(p.renames) - 6} more renames")
    for d in p.drops:
        out.print(f"  drop   {d.name}: {d.reason}", markup=False)
    if p.config_diff:
        table = Table("config key", "before", "after", title="config changes", title_justify="left")
        for c in p.config_diff:
            table.add_row(c.key, json.dumps(c.before), json.dumps(c.after))
        out.print(table)
    for dec in p.decisions:
        out.print(f"[blue]decision[/blue] {dec}")
    for w in p.warnings:
        out.print(f"[yellow]warning[/yellow] {w}")


# --------------------------------------------------------------------------------------------
# lint


SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "blue"}


@app.command()
@guarded
def lint(
    drafter: Annotated[str, typer.Argument(help="Drafter directory or Hub repo id.")],
    target: Annotated[Optional[str], typer.Option(help="Target directory or Hub repo id.")] = None,
    from_: Annotated[Optional[str], typer.Option("--from", help="Source dialect (default: detected).")] = None,
    aux_layers: Annotated[Optional[str], typer.Option(help="Aux-layer ids, when the checkpoint has none.")] = None,
    aux_convention: Annotated[Optional[str], typer.Option(help="boundary or layer-output.")] = None,
    flag: Annotated[Optional[list[str]], typer.Option(help="State an ambiguous flag: NAME=true|false.")] = None,
    revision: Annotated[Optional[str], typer.Option(help="Drafter revision (Hub).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
):
    """Static checks: shapes, flags, aux ids, vocab maps, norm and embedding values, engine support."""
    from .formats.base import ReadOptions, detect_convention
    from .sources import is_repo_id, local_dir

    opts = ReadOptions(aux_layers=parse_ids(aux_layers), aux_convention=detect_convention(aux_convention),
                       flags=parse_flags(flag))
    if is_repo_id(drafter):
        from .remote import remote_lint
        report = remote_lint(drafter, target, revision=revision, dialect=from_, opts=opts)
    else:
        from .lint import lint as run_lint
        target_dir = local_dir(target, None, what="target") if target else None
        report = run_lint(local_dir(drafter, revision), target_dir, from_, opts)
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        render_lint(report)
    if report.errors:
        raise typer.Exit(1)


def render_lint(report) -> None:
    head = f"[bold]{report.drafter}[/bold]"
    if report.dialect:
        head += f": dialect [cyan]{report.dialect}[/cyan], EAGLE {report.eagle_version}"
    if report.target:
        head += f", target {report.target}"
    out.print(head)
    for f in report.findings:
        style = SEVERITY_STYLE[f.severity]
        out.print(f"[{style}]{f.severity:7}[/{style}] [dim]{f.code}[/dim] {f.message}")
        if f.hint and f.severity != "info":
            out.print(f"          [dim]hint: {f.hint}[/dim]")
    for e in report.engines:
        status = "ok" if e.faithful else "[red]cannot serve faithfully[/red]"
        floor = f">= {e.min_version}" if e.min_version else "version unknown"
        out.print(f"[dim]engine[/dim]  {e.engine}: {floor}, {status}")
    if report.bytes_read is not None:
        share = 100 * report.bytes_read / max(1, report.weights_bytes or 1)
        out.print(f"remote: downloaded {human_bytes(report.bytes_read)} of {human_bytes(report.weights_bytes or 0)} "
                  f"of weights ({share:.3f}%)")
    n_err, n_warn = len(report.errors), sum(f.severity == "warning" for f in report.findings)
    colour = "red" if n_err else "green"
    out.print(f"[{colour}]{n_err} error(s)[/{colour}], {n_warn} warning(s)")


# --------------------------------------------------------------------------------------------
# verify


def parse_floats(text: str | None, what: str) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{what} must be comma-separated numbers, got {text!r}")


@app.command()
@guarded
def verify(
    drafter: Annotated[str, typer.Argument(help="Drafter directory, Hub repo id, or registry id (any dialect).")],
    target: Annotated[Optional[str], typer.Option(help="Target model directory or Hub repo id (default: the registry's).")] = None,
    num_spec_tokens: Annotated[int, typer.Option("--num-spec-tokens", "-k", help="Draft depth K.")] = 3,
    max_new_tokens: Annotated[int, typer.Option(help="Greedy tokens generated per prompt.")] = 64,
    prompts: Annotated[Optional[Path], typer.Option(help="JSONL prompts ({\"prompt\", \"bucket\"}); default: shipped set.")] = None,
    max_prompts: Annotated[Optional[int], typer.Option(help="Use only the first N prompts.")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto (fp32 on CPU, bf16 on CUDA), float32, bfloat16, float16.")] = "auto",
    aux_layers: Annotated[Optional[str], typer.Option(help="Aux-layer ids, when the checkpoint has none.")] = None,
    aux_convention: Annotated[Optional[str], typer.Option(help="boundary or layer-output.")] = None,
    flag: Annotated[Optional[list[str]], typer.Option(help="State an ambiguous flag: NAME=true|false.")] = None,
    min_acceptance: Annotated[Optional[str], typer.Option(help="Per-position floors, e.g. 0.5,0.3,0.2.")] = None,
    min_al: Annotated[Optional[float], typer.Option(help="Floor on the mean acceptance length.")] = None,
    report: Annotated[Optional[Path], typer.Option(help="Write the JSON report to this file.")] = None,
    revision: Annotated[Optional[str], typer.Option(help="Drafter revision (Hub).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
):
    """Run the drafter against its target: per-position acceptance, acceptance length, drift."""
    from .formats.base import ReadOptions, detect_convention
    from .sources import local_dir
    from .verify import verify as run_verify

    opts = ReadOptions(aux_layers=parse_ids(aux_layers), aux_convention=detect_convention(aux_convention),
                       flags=parse_flags(flag))
    floors = parse_floats(min_acceptance, "--min-acceptance")
    target_revision = None
    if "/" not in drafter and not Path(drafter).exists():  # a registry id: pinned drafter, target, floors
        from . import registry
        entry = registry.get(drafter)
        if not entry.drafter.repo and not entry.drafter.path:
            fail(f"registry entry {drafter} has no drafter location")
        root = registry.default_dir().parent  # paths in entries are relative to the repository
        drafter = str(root / entry.drafter.path) if entry.drafter.path else entry.drafter.repo
        revision = revision or entry.drafter.revision
        if target is None:
            target = str(root / entry.target.path) if entry.target.path else entry.target.repo
            target_revision = entry.target.revision
        floors = floors or entry.acceptance_floors
        if opts.aux_layers is None and entry.aux_layers.ids:  # the registry knows what SafeAILab configs omit
            opts.aux_layers, opts.aux_convention = list(entry.aux_layers.ids), entry.aux_layers.convention
    if target is None:
        fail("--target is required (or give a registry id)")
    drafter_dir = local_dir(drafter, revision)
    target_dir = local_dir(target, target_revision, what="target")
    with prompt_progress(not as_json) as advance:
        result = run_verify(drafter_dir, target_dir, device=device, dtype=dtype, k=num_spec_tokens,
                            max_new_tokens=max_new_tokens, prompts_file=prompts, max_prompts=max_prompts, opts=opts,
                            min_acceptance=floors, min_al=min_al, progress=advance)
    data = result.model_dump(mode="json")
    if report:
        from .fsutil import atomic_write_text
        atomic_write_text(report, json.dumps(data, indent=2) + "\n")
    if as_json:
        print_json(data)
    else:
        render_verify(result)
    if result.failures:
        raise typer.Exit(1)


@contextlib.contextmanager
def prompt_progress(enabled: bool):
    if not enabled or not err.is_terminal:
        yield lambda i, n: None
        return
    with Progress(TextColumn("verifying"), BarColumn(), TextColumn("{task.completed}/{task.total} prompts"),
                  TimeRemainingColumn(), console=err, transient=True) as progress:
        task = progress.add_task("verify", total=None)
        yield lambda i, n: progress.update(task, completed=i, total=n)


def render_verify(r) -> None:
    out.print(f"[bold]{r.drafter}[/bold] against [bold]{r.target}[/bold] on {r.device} ({r.dtype}), "
              f"K={r.num_spec_tokens}, {r.num_prompts} prompts x {r.max_new_tokens} tokens")
    table = Table("position", "acceptance (decoding path)", "acceptance (all positions)", title_justify="left",
                  title="per-position acceptance")
    for i, (a, b) in enumerate(zip(r.acceptance_per_position, r.all_positions["acceptance_per_position"]), 1):
        table.add_row(str(i), f"{a:.3f}", f"{b:.3f}")
    out.print(table)
    out.print(f"mean acceptance length: [bold]{r.mean_acceptance_length:.3f}[/bold] (vLLM: 1 + accepted/drafts over "
              f"{r.num_drafts} drafts); mean of per-prompt values {r.mean_acceptance_length_per_prompt:.3f}; "
              f"all positions {r.all_positions['mean_acceptance_length']:.3f}")
    out.print("accepted-length histogram: " + ", ".join(f"{j}: {c}" for j, c in enumerate(r.histogram)))
    rms = ", ".join(f"{x:.2f}" for x in r.drift["feedback_rms_per_depth"])
    out.print(f"drift: fed-back hidden RMS per depth [{rms}]")
    for bucket, al in r.drift["mean_acceptance_length_by_bucket"].items():
        per = ", ".join(f"{x:.2f}" for x in r.drift["acceptance_per_position_by_bucket"][bucket])
        out.print(f"  bucket {bucket}: acceptance length {al:.3f}, per position [{per}]")
    out.print(f"target output diversity: {r.target_distinct_token_ratio:.2f} distinct-token ratio")
    errors = [f for f in r.lint if f.severity == "error"]
    warns = [f for f in r.lint if f.severity == "warning"]
    out.print(f"lint: {len(errors)} error(s), {len(warns)} warning(s)" + "".join(f"\n  [red]{f.code}[/red] {f.message}" for f in errors))
    t = r.timing
    out.print(f"time: {t['total_s']:.1f}s (load {t['load_s']:.1f}s, target {t['target_generate_s']:.1f}s, "
              f"drafter {t['drafter_s']:.1f}s)")
    for f in r.failures:
        out.print(f"[red]FAIL[/red] {f}")
    if not r.failures and (r.thresholds.get("min_acceptance") or r.thresholds.get("min_al")):
        out.print("[green]PASS[/green] all floors met")


# --------------------------------------------------------------------------------------------
# registry


registry_app = typer.Typer(no_args_is_help=True, help="The registry of published drafters (registry/*.yaml).")
app.add_typer(registry_app, name="registry")
RegistryDir = Annotated[Optional[Path], typer.Option("--registry", help="Registry directory (default: the repo's registry/ or $EAGLEZOO_REGISTRY).")]


@registry_app.command("list")
@guarded
def registry_list(
    target: Annotated[Optional[str], typer.Option(help="Only drafters for this target (substring, case-insensitive).")] = None,
    registry_dir: RegistryDir = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
):
    """List registry entries."""
    from . import registry

    entries = [e for e in registry.load(registry_dir).values()
               if not target or target.lower() in (e.target.repo or e.target.path or "").lower()]
    if as_json:
        print_json([e.model_dump(mode="json") for e in entries])
        return
    table = Table("id", "target", "dialect", "EAGLE", "aux ids", "reported", "status")
    for e in entries:
        rep = next((f"AL {x.value}" for x in e.reported if x.metric == "acceptance_length" and not isinstance(x.value, list)), "")
        ids = f"{e.aux_layers.ids} {e.aux_layers.convention}" if e.aux_layers.ids else "[red]unknown[/red]"
        table.add_row(e.id, e.target.repo or e.target.path or "", e.dialect or "?", e.eagle_version, ids, rep, e.status.state)
    out.print(table)
    out.print(f"{len(entries)} entries")


@registry_app.command("show")
@guarded
def registry_show(entry_id: Annotated[str, typer.Argument(metavar="ID")], registry_dir: RegistryDir = None,
                  as_json: Annotated[bool, typer.Option("--json")] = False):
    """Show one registry entry."""
    from . import registry

    entry = registry.get(entry_id, registry_dir)
    if as_json:
        print_json(entry.model_dump(mode="json"))
    else:
        import yaml
        out.print(yaml.safe_dump(entry.model_dump(mode="json", exclude_none=True), sort_keys=False), markup=False)


@registry_app.command("check")
@guarded
def registry_check(
    entries: Annotated[Optional[list[str]], typer.Argument(metavar="[ID|FILE]...", help="Only these entries (default: all).")] = None,
    online: Annotated[bool, typer.Option(help="Also fetch configs and safetensors headers from the Hub and lint remotely.")] = False,
    registry_dir: RegistryDir = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
):
    """Validate every entry: schema (file:line errors), consistency, and with --online the published files."""
    from . import registry

    only = [Path(x).stem for x in entries] if entries else None
    results = {k: {"problems": v} for k, v in registry.check_all(registry_dir, only).items()}
    if only and (missing := set(only) - results.keys()):
        fail(f"no registry entry {sorted(missing)[0]!r}")
    if online:
        from .remote import check_online
        entries_map = registry.load(registry_dir)
        for entry_id in results:
            results[entry_id]["online"] = check_online(entries_map[entry_id])
            results[entry_id]["problems"] += results[entry_id]["online"]["problems"]
    bad = {k: v for k, v in results.items() if v["problems"]}
    if as_json:
        print_json({"checked": len(results), "failed": len(bad), "entries": results})
    else:
        for entry_id, r in results.items():
            mark = "[red]FAIL[/red]" if r["problems"] else "[green]ok[/green]"
            out.print(f"{mark} {entry_id}" + "".join(f"\n     {p}" for p in r["problems"]))
        out.print(f"{len(results)} checked, {len(bad)} with problems")
    if bad:
        raise typer.Exit(1)


# --------------------------------------------------------------------------------------------
# serve-config


@app.command("serve-config")
@guarded
def serve_config_cmd(
    drafter: Annotated[str, typer.Argument(metavar="ID|DIR", help="Registry id or drafter directory.")],
    engine: Annotated[str, typer.Option(help="vllm or sglang.")] = "vllm",
    num_spec_tokens: Annotated[int, typer.Option("--num-spec-tokens", "-k")] = 3,
    target: Annotated[Optional[str], typer.Option(help="Target to serve (default: the registry's).")] = None,
    registry_dir: RegistryDir = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
):
    """The exact serving command and --speculative-config JSON, version floor and warnings."""
    from .engines import serve_config

    path = Path(drafter)
    if path.is_dir():
        from .convert import read_drafter, read_json
        from .formats.base import ReadOptions
        reading, _, cfg = read_drafter(path, None, ReadOptions(allow_missing_aux=True), strict=False)
        if target is None:
            fail("--target is needed when serving a drafter directory")
        fmt = "speculators" if reading.dialect == "speculators" else "eagle31"
        result = serve_config(reading.spec, engine, str(path), target, num_spec_tokens, None, fmt,
                              has_top_level_ids="eagle_aux_hidden_state_layer_ids" in cfg)
        if reading.dialect not in ("eagle31", "speculators"):
            result.warnings.append(f"{reading.dialect} dialect: convert it first (eaglezoo convert) so that every "
                                   "engine finds the ids and flags where it reads them")
    else:
        from . import registry
        entry = registry.get(drafter, registry_dir)
        fmt = "speculators" if entry.dialect == "speculators" else "eagle31"
        result = serve_config(entry.spec(), engine, entry.drafter.repo or entry.drafter.path, target or entry.target.repo,
                              num_spec_tokens, entry.drafter.revision, fmt,
                              has_top_level_ids=entry.aux_layers.ids is not None and entry.dialect in ("eagle31", "speculators"))
        if entry.aux_layers.ids is None:
            result.warnings.append("the registry does not know this drafter's aux ids: run eaglezoo lint on it first")
        elif entry.dialect not in ("eagle31", "speculators"):
            result.warnings.append(f"published in the {entry.dialect} dialect: convert it so that the engine reads the "
                                   "ids where it looks (eaglezoo convert; then serve the converted folder)")
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    out.print(result.command, markup=False, soft_wrap=True)
    if result.speculative_config:
        out.print("# --speculative-config: " + json.dumps(result.speculative_config), markup=False)
    out.print(f"# aux layers the engine captures ({result.aux_convention}): {result.aux_layers_captured}", markup=False)
    out.print(f"# minimum {engine} version: {result.min_version or 'unknown'}", markup=False)
    for w in result.warnings:
        err.print(f"warning: {w}", markup=False)


# --------------------------------------------------------------------------------------------
# Hub


@app.command()
@guarded
def pull(
    source: Annotated[str, typer.Argument(metavar="ID|REPO", help="Registry id (pinned revision) or Hub repo id.")],
    revision: Annotated[Optional[str], typer.Option(help="Branch, tag or commit sha (default: the registry's pin, else main).")] = None,
    local_dir: Annotated[Optional[Path], typer.Option(help="Download here instead of the cache.")] = None,
    registry_dir: RegistryDir = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
):
    """Download a drafter, checking files against the registry's or conversion.json's sha256."""
    from .hub import pull as hub_pull

    result = hub_pull(source, revision=revision, local_dir=local_dir, registry_dir=registry_dir)
    data = {"repo": result.repo, "revision": result.revision, "commit": result.commit, "path": str(result.path),
            "registry_id": result.registry_id, "sha256_verified": result.verified}
    if as_json:
        print_json(data)
        return
    out.print(f"{result.repo}@{result.revision or 'main'}" + (f" ({result.commit})" if result.commit else ""))
    out.print(str(result.path), markup=False)
    if result.verified:
        out.print(f"[green]sha256 verified[/green]: {', '.join(result.verified)}")
    else:
        out.print("[yellow]no sha256 to verify against[/yellow] (no registry hashes, no conversion.json)")


@app.command()
@guarded
def push(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A converted drafter folder.")],
    repo: Annotated[str, typer.Argument(help="Hub repo id (owner/name).")],
    revision: Annotated[str, typer.Option(help="Branch to push to (created when missing).")] = "main",
    private: Annotated[bool, typer.Option(help="Create the repo private.")] = False,
    create_pr: Annotated[bool, typer.Option("--create-pr", help="Open a pull request instead of committing.")] = False,
    report: Annotated[Optional[Path], typer.Option(help="A verify JSON report for the card's acceptance table.")] = None,
    target: Annotated[Optional[str], typer.Option(help="Target repo id for the card (base_model).")] = None,
    tag: Annotated[Optional[str], typer.Option(help="Tag the pushed commit.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
):
    """Upload a drafter folder with a generated model card; unchanged content makes no new commit."""
    from .hub import push as hub_push
    from .hub import tag as hub_tag

    result = hub_push(folder, repo, revision=revision, private=private, create_pr=create_pr, report=report, target=target)
    if tag:
        hub_tag(repo, tag, result.commit or revision)
    data = {"repo": result.repo, "revision": result.revision, "commit": result.commit,
            "created_commit": result.created_commit, "pull_request": result.pull_request, "files": result.files, "tag": tag}
    if as_json:
        print_json(data)
        return
    if result.created_commit:
        out.print(f"[green]pushed[/green] {len(result.files)} files to {repo}@{revision} ({result.commit})")
    else:
        out.print(f"{repo}@{revision} already holds this content: no new commit")
    if result.pull_request:
        out.print(f"pull request: {result.pull_request}")
    if tag:
        out.print(f"tagged {tag}")


def run():
    app()


if __name__ == "__main__":
    run()
