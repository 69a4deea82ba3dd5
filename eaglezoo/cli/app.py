"""The `eaglezoo` command line. Each command parses, calls one library function and renders the
result as rich text or `--json`.

The output contract (README): results on stdout; every error one line on stderr (with `--json`, a
JSON object on stdout) and an exit code: 0 ok, 1 checks found problems, 2 usage error or bad input,
130/143/129 on SIGINT/SIGTERM/SIGHUP. Errors are caught once, in `run()`, and worded by
`errors.describe`. Progress bars only on a terminal; piped output is never cut to 80 columns.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from .. import __version__
from ..errors import EXIT_FINDINGS, EXIT_USAGE, UsageError, describe, printable, raise_on_termination

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Convert, lint, verify and publish EAGLE-3 / EAGLE 3.1 drafters.")
PIPED_WIDTH = 100_000  # a pipe has no width: render at natural width instead of cutting at 80 columns


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich exits 1 here; a reader that stopped reading (| head) is not an error: run() exits 0."""
        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise BrokenPipeError


out = _Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else PIPED_WIDTH)
err = _Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else PIPED_WIDTH)
SHOW_PROGRESS = False  # set by run(): stderr is a terminal and --json was not asked for


# --------------------------------------------------------------------------------------------
# shared options: one name, one help text and one metavar everywhere

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result (or the error) as JSON on stdout.")]
RegistryOpt = Annotated[Optional[Path], typer.Option(
    "--registry", metavar="DIR", help="Registry directory for registry ids (default: $EAGLEZOO_REGISTRY, else the "
    "repository's registry/).")]
RevisionOpt = Annotated[Optional[str], typer.Option(help="Drafter revision when it comes from the Hub "
                                                         "(branch, tag or commit; default: the registry's pin, else main).")]
FromOpt = Annotated[Optional[str], typer.Option("--from", metavar="DIALECT", help="Source dialect (default: detected).")]
AuxLayersOpt = Annotated[Optional[str], typer.Option(
    metavar="IDS", help="Aux-layer ids, e.g. 2,3,4, when the checkpoint has none (needs --aux-convention).")]
AuxConventionOpt = Annotated[Optional[str], typer.Option(
    metavar="CONVENTION", help="Convention of --aux-layers: boundary (vLLM, HF hidden_states[i]) or layer-output "
    "(SGLang, ModelOpt).")]
FlagOpt = Annotated[Optional[list[str]], typer.Option(
    metavar="NAME=BOOL", help="State an ambiguous flag, e.g. norm_output=true (repeatable).")]
DrafterArg = Annotated[str, typer.Argument(
    metavar="DRAFTER", help="Drafter directory, registry id (or its YAML file) or Hub repo id, in any dialect.")]
NumSpecTokensOpt = Annotated[int, typer.Option("--num-spec-tokens", "-k", min=1, max=64, help="Draft depth K.")]


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def emit(data, as_json: bool, render) -> None:
    """The one output sink: JSON on stdout, or the command's rich rendering."""
    if as_json:
        print_json(data)
    else:
        render()


@contextlib.contextmanager
def byte_progress(description: str, total: int):
    """A progress bar on stderr for work measured in bytes (large inputs only)."""
    if not SHOW_PROGRESS or total < 32 * 1024 * 1024:
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
        raise UsageError(f"--aux-layers must be comma-separated integers, got {text!r}") from None
    if not ids:
        raise UsageError("--aux-layers is empty")
    return ids


def parse_flags(items: list[str] | None) -> dict[str, bool]:
    from ..checkpoint.formats.base import FLAGS

    flags = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if name not in FLAGS or value.lower() not in ("true", "false"):
            raise UsageError(f"--flag takes NAME=true|false with NAME one of {', '.join(FLAGS)}; got {item!r}")
        flags[name] = value.lower() == "true"
    return flags


def read_options(aux_layers: str | None, aux_convention: str | None, flag: list[str] | None):
    from ..checkpoint.formats.base import ReadOptions, detect_convention

    return ReadOptions(aux_layers=parse_ids(aux_layers), aux_convention=detect_convention(aux_convention),
                       flags=parse_flags(flag))


def parse_floors(text: str | None, k: int) -> list[float] | None:
    """--min-acceptance: at most K finite numbers in [0, 1]."""
    if text is None:
        return None
    try:
        floors = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        floors = []
    if not floors or any(not 0 <= x <= 1 for x in floors):  # NaN fails both comparisons
        raise UsageError(f"--min-acceptance must be comma-separated numbers in [0, 1], got {text!r}")
    if len(floors) > k:
        raise UsageError(f"--min-acceptance has {len(floors)} floors but K is {k}", hint="give at most K values")
    return floors


# --------------------------------------------------------------------------------------------
# convert


@app.command()
def convert(
    src: DrafterArg,
    dst: Annotated[Path, typer.Argument(metavar="OUT", help="Output directory (must not exist unless --force).")],
    to: Annotated[str, typer.Option("--to", metavar="FORMAT", help="Output format: eagle31 or speculators.")] = "eagle31",
    from_: FromOpt = None,
    target: Annotated[Optional[str], typer.Option(metavar="TARGET", help="Target model directory (or Hub id) to check against.")] = None,
    aux_layers: AuxLayersOpt = None,
    aux_convention: AuxConventionOpt = None,
    flag: FlagOpt = None,
    dtype: Annotated[Optional[str], typer.Option(metavar="DTYPE", help="Cast floating tensors (float32, float16, bfloat16); ints and bools never.")] = None,
    verifier: Annotated[Optional[str], typer.Option(metavar="REPO", help="Target repo id written into speculators_config.verifier.")] = None,
    revision: RevisionOpt = None,
    registry_dir: RegistryOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan; write nothing.")] = False,
    force: Annotated[bool, typer.Option(help="Replace OUT if it exists.")] = False,
    as_json: JsonOpt = False,
):
    """Convert a drafter to the canonical EAGLE 3.1 schema (or the speculators format), losslessly."""
    from ..convert import apply, check_destination, plan
    from .sources import convert_request

    req = convert_request(src, target, read_options(aux_layers, aux_convention, flag), revision=revision,
                      registry_dir=registry_dir, to=to, dialect=from_, dtype=dtype, verifier=verifier)
    if not dry_run:
        check_destination(req.source, dst, force)
    prepared = plan(req)
    p = prepared.plan
    if dry_run:
        emit({"dry_run": True, "plan": p.model_dump(mode="json"), "config": prepared.config}, as_json,
             lambda: render_plan(p, "[dim]dry run: nothing written[/dim]"))
        return
    with byte_progress("converting", p.num_bytes) as advance:
        record = apply(prepared, dst, force=force, progress=advance)
    emit({"dry_run": False, "out": str(dst), "plan": p.model_dump(mode="json"), "record": record}, as_json,
         lambda: render_plan(p, f"[green]wrote[/green] {dst} ({p.num_tensors} tensors, {human_bytes(p.num_bytes)}; "
                                "conversion.json records every decision)"))


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render_plan(p, outcome: str) -> None:
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
    out.print(outcome)


# --------------------------------------------------------------------------------------------
# lint


SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "blue"}


@app.command()
def lint(
    drafter: DrafterArg,
    target: Annotated[Optional[str], typer.Option(metavar="TARGET", help="Target directory or Hub repo id (default: the registry's).")] = None,
    from_: FromOpt = None,
    aux_layers: AuxLayersOpt = None,
    aux_convention: AuxConventionOpt = None,
    flag: FlagOpt = None,
    revision: RevisionOpt = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """Static checks: shapes, flags, aux ids, vocab maps, norm and embedding values, engine support."""
    from ..lint import lint_source

    report = lint_source(drafter, target, revision=revision, dialect=from_, registry_dir=registry_dir,
                         opts=read_options(aux_layers, aux_convention, flag))
    emit(report.model_dump(mode="json"), as_json, lambda: render_lint(report))
    if report.errors:
        raise typer.Exit(EXIT_FINDINGS)


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
# serve-config


@app.command("serve-config")
def serve_config_cmd(
    drafter: Annotated[str, typer.Argument(metavar="DRAFTER", help="Registry id (or its YAML file) or drafter directory.")],
    engine: Annotated[str, typer.Option(help="vllm or sglang.")] = "vllm",
    num_spec_tokens: NumSpecTokensOpt = 3,
    target: Annotated[Optional[str], typer.Option(metavar="TARGET", help="Target to serve (default: the registry's).")] = None,
    registry_dir: RegistryOpt = None,
    as_json: JsonOpt = False,
):
    """The exact serving command and --speculative-config JSON, version floor and warnings."""
    from ..serving import serve_config_for

    result = serve_config_for(drafter, engine, num_spec_tokens, target, registry_dir)

    def render():
        out.print(result.command, markup=False, soft_wrap=True)
        if result.speculative_config:
            out.print("# --speculative-config: " + json.dumps(result.speculative_config), markup=False)
        out.print(f"# aux layers the engine captures ({result.aux_convention}): {result.aux_layers_captured}", markup=False)
        out.print(f"# minimum {engine} version: {result.min_version or 'unknown'}", markup=False)
        for w in result.warnings:
            err.print(f"warning: {w}", markup=False)
    emit(result.model_dump(mode="json"), as_json, render)


# --------------------------------------------------------------------------------------------
# the one error boundary


def json_requested(argv: list[str]) -> bool:
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def run(argv: list[str] | None = None) -> None:
    """Parses, runs one command, and turns every failure into one line (or one JSON object) and an exit code."""
    global SHOW_PROGRESS
    argv = sys.argv[1:] if argv is None else argv
    as_json = json_requested(argv)
    SHOW_PROGRESS = err.is_terminal and not as_json
    raise_on_termination()
    command = typer.main.get_command(app)
    try:
        from ..hub.client import configure

        configure(show_progress=SHOW_PROGRESS)  # before anything imports huggingface_hub
        with command.make_context("eaglezoo", list(argv)) as ctx:
            command.invoke(ctx)
        code = 0
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.TyperException as exc:  # the parser's usage errors
        if type(exc).__name__ == "NoArgsIsHelpError":
            out.print(exc.ctx.get_help(), markup=False)
            code = EXIT_USAGE
        else:
            code = report_error(exc.format_message(), None, "usage", EXIT_USAGE, as_json)
    except BrokenPipeError:
        code = 0  # the reader stopped reading (| head): not an error
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the one place every failure is worded
        failure = describe(exc.__cause__ if isinstance(exc, typer.Abort) and exc.__cause__ else exc)
        if os.environ.get("EAGLEZOO_DEBUG"):
            traceback.print_exc()
        code = report_error(failure.message, failure.hint, failure.code, failure.exit_code, as_json)
    _exit(code)


def report_error(message: str, hint: str | None, code: str, exit_code: int, as_json: bool) -> int:
    message, hint = printable(message), printable(hint) if hint else hint  # one line, whatever the source
    if as_json:
        print_json({"error": message, "hint": hint, "code": code, "exit_code": exit_code})
    else:
        err.print(f"error: {message}" + (f" (hint: {hint})" if hint else ""), markup=False)
    return exit_code


def _exit(code: int) -> None:
    """Exit with `code`; a stdout closed by the reader is silenced, not reported."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)


from . import hub, registry, verify  # noqa: E402,F401 - register their commands on the app

if __name__ == "__main__":
    run()
