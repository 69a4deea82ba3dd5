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
    drafter: Annotated[str, typer.Argument(help="Drafter directory or Hub repo id (any dialect).")],
    target: Annotated[str, typer.Option(help="Target model directory or Hub repo id.")],
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
    drafter_dir = local_dir(drafter, revision)
    target_dir = local_dir(target, None, what="target")
    floors, = (parse_floats(min_acceptance, "--min-acceptance"),)
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


def run():
    app()


if __name__ == "__main__":
    run()
