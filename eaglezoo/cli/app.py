"""The `eaglezoo` command line: the one error boundary, and the command modules registered on the app.
Each command parses, calls one library function and renders the result as rich text or `--json`.

The output contract (README): results on stdout; every error one line on stderr (with `--json`, a
JSON object on stdout) and an exit code: 0 ok, 1 checks found problems, 2 usage error or bad input,
130/143/129 on SIGINT/SIGTERM/SIGHUP. Errors are caught once, in `run()`, and worded by
`errors.describe`. Progress bars only on a terminal; piped output is never cut to 80 columns.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback

import typer

from ..errors import EXIT_USAGE, describe, printable, raise_on_termination
from . import common, compare, convert, doctor, hub, lint, registry, report, serve, tune, verify, watch  # noqa: F401 - each registers its commands
from .common import app, err, out, print_json

COMPLETE_VAR = "_EAGLEZOO_COMPLETE"  # set by the script `eaglezoo --show-completion` prints, when the shell asks


def json_requested(argv: list[str]) -> bool:
    return "--json" in (argv[: argv.index("--")] if "--" in argv else argv)


def run(argv: list[str] | None = None) -> None:
    """Parses, runs one command, and turns every failure into one line (or one JSON object) and an exit code."""
    argv = sys.argv[1:] if argv is None else argv
    as_json = json_requested(argv)
    common.SHOW_PROGRESS = err.is_terminal and not as_json
    raise_on_termination()
    command = click_command()
    if os.environ.get(COMPLETE_VAR):
        command.main(args=argv, prog_name="eaglezoo")  # the shell asks for completions: typer answers, then exits
    try:
        from ..hub.client import configure

        configure(show_progress=common.SHOW_PROGRESS)  # before anything imports huggingface_hub
        with command.make_context("eaglezoo", list(argv)) as ctx:
            command.invoke(ctx)
        code = 0
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.TyperException as exc:  # the parser's usage errors
        if type(exc).__name__ == "NoArgsIsHelpError":
            if exc.format_message():  # rich help was printed as the error was built; plain help is its message
                out.print(exc.format_message(), markup=False)
            code = EXIT_USAGE
        else:
            code = report_error(exc.format_message(), usage_hint(exc), "usage", EXIT_USAGE, as_json)
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


@functools.cache
def click_command():
    """The app as click runs it, built once per process: typer reads every command's signature to build it (about
    50 ms), which a process that runs several commands in turn (the tests' in-process runs) would otherwise repeat."""
    return typer.main.get_command(app)


def usage_hint(exc: typer.TyperException) -> str:
    ctx = getattr(exc, "ctx", None)
    return f"see {ctx.command_path if ctx else 'eaglezoo'} --help"


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


if __name__ == "__main__":
    run()
