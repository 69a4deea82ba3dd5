"""What every command shares: the app object, the consoles, the option aliases (one name, one help
text and one metavar everywhere), the one output sink and the parsers. No command lives here."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from .. import __version__
from ..errors import UsageError, printable, terminal_text
from ..limits import GPU_MEMORY_UTILIZATION, MAX_K, MAX_MODEL_LEN, MIN_MODEL_LEN

# add_completion: --install-completion and --show-completion on the root (cli/app.run answers the shell's requests)
app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Convert, lint, verify and publish EAGLE-3 / EAGLE 3.1 drafters.",
)


PIPED_WIDTH = 100_000  # a pipe has no width: render at natural width instead of cutting at 80 columns


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich exits 1 here; a reader that stopped reading (| head) is not an error: run() exits 0."""
        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise BrokenPipeError

    def _render_buffer(self, buffer) -> str:
        """The one guard of the terminal: whatever text reaches it (a report's field, a server's answer, a path),
        no character of it acts on the terminal; rich's own styles and cursor moves (its control segments, and the
        styles it renders around text) are kept. rich 13-15 turn segments into output here (rich/console.py
        `Console._render_buffer`)."""
        return super()._render_buffer(
            segment if segment.control else segment._replace(text=terminal_text(segment.text)) for segment in buffer
        )


out = _Console(highlight=False, emoji=False, soft_wrap=True, width=None if sys.stdout.isatty() else PIPED_WIDTH)


err = _Console(
    stderr=True, highlight=False, emoji=False, soft_wrap=True, width=None if sys.stderr.isatty() else PIPED_WIDTH
)


SHOW_PROGRESS = False  # set by run(): stderr is a terminal and --json was not asked for


JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result (or the error) as JSON on stdout.")]


RegistryOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--registry",
        metavar="DIR",
        help="Your own registry folder, laid over the shipped one (default: $EAGLEZOO_REGISTRY).",
    ),
]


RevisionOpt = Annotated[
    Optional[str],
    typer.Option(
        metavar="REV", help="The drafter's Hub branch, tag or commit (default: the registry's pin, else main)."
    ),
]


FromOpt = Annotated[
    Optional[str], typer.Option("--from", metavar="DIALECT", help="Source dialect (default: detected).")
]


AuxLayersOpt = Annotated[
    Optional[str],
    typer.Option(
        metavar="IDS", help="Aux-layer ids, e.g. 2,3,4, where the checkpoint has none (with --aux-convention)."
    ),
]


AuxConventionOpt = Annotated[
    Optional[str],
    typer.Option(
        metavar="CONVENTION",
        help="Of --aux-layers: boundary (vLLM, HF hidden_states) or layer-output (SGLang, ModelOpt).",
    ),
]


FlagOpt = Annotated[
    Optional[list[str]],
    typer.Option(metavar="NAME=BOOL", help="State an ambiguous flag, e.g. norm_output=true (repeatable)."),
]


DrafterArg = Annotated[
    str,
    typer.Argument(
        metavar="DRAFTER", help="Drafter directory, registry id (or its YAML file) or Hub repo id, in any dialect."
    ),
]


NumSpecTokensOpt = Annotated[
    int, typer.Option("--num-spec-tokens", "-k", min=1, max=MAX_K, metavar="K", help="Draft depth K.")
]
ReportOpt = Annotated[Optional[Path], typer.Option(metavar="FILE", help="Write the JSON report to this file.")]


# The vLLM options verify, tune, compare and doctor share, declared once and bounded by limits.py (as
# vllm_engine.EngineOptions bounds them); each command files them under its own help panel and may add a line of
# help: `max_model_len: Annotated[Optional[int], max_model_len_option(ENGINE)] = None`.
def max_model_len_option(panel: str, help: str | None = None) -> Any:
    """Its upper bound is checked by a callback, not shown in the help (a range of 8 digits squeezes the flag names
    of an 80-column help out of their column)."""
    return typer.Option(
        min=MIN_MODEL_LEN, metavar="N", rich_help_panel=panel, help=help, callback=_at_most(MAX_MODEL_LEN)
    )


def _at_most(high: int) -> Any:
    def check(value: int | None) -> int | None:
        if value is not None and value > high:
            raise typer.BadParameter(f"{value} is not in the range x<={high}.")
        return value

    return check


def gpu_memory_option(panel: str, help: str | None = None) -> Any:
    low, high = GPU_MEMORY_UTILIZATION
    return typer.Option(min=low, max=high, metavar="F", rich_help_panel=panel, help=help)


def tensor_parallel_option(panel: str, help: str | None = None) -> Any:
    return typer.Option("--tensor-parallel-size", "-tp", min=1, metavar="N", rich_help_panel=panel, help=help)


def enforce_eager_option(panel: str) -> Any:
    return typer.Option("--enforce-eager", rich_help_panel=panel)


EnginePythonOpt = Annotated[
    Optional[str],
    typer.Option(
        metavar="PATH", rich_help_panel="Engine (vLLM)", help="Python interpreter that has vLLM (default: this one)."
    ),
]
SuiteOpt = Annotated[
    Optional[str],
    typer.Option(
        metavar="NAME",
        help=(
            "A shipped prompt suite instead of --prompts: standard (MT-bench, HumanEval) or robustness (a bucket "
            "per condition); eaglezoo/data/suites."
        ),
    ),
]


def prompts_or_suite(prompts: Path | None, suite: str | None) -> Path | None:
    """The prompt file a command measures: the one given, or a shipped suite's."""
    if suite is None:
        return prompts
    if prompts is not None:
        raise UsageError("--prompts and --suite name two prompt sets", hint="give one of them")
    from ..verify.workload import suite_path

    return suite_path(suite)


def shown(text) -> str:
    """Text from a file, a path or a server, for rich: markup escaped, control characters blanked (one line)."""
    return escape(printable(str(text)))


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
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


def version_callback(value: bool):
    if value:
        from ..registry.shipped import base_copy

        copy = base_copy()
        out.print(f"eaglezoo {__version__}", markup=False)
        out.print(f"registry: {copy.describe() if copy else 'none (this package holds no registry)'}", markup=False)
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Show the version and exit.")
    ] = False,
):
    pass


def parse_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        ids = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(
            f"--aux-layers must be comma-separated integers, got {text!r}", hint="give ids such as --aux-layers 2,3,4"
        ) from None
    if not ids:
        raise UsageError("--aux-layers is empty", hint="give ids such as --aux-layers 2,3,4")
    return ids


def parse_flags(items: list[str] | None) -> dict[str, bool]:
    from ..checkpoint.formats.base import FLAGS

    flags = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if name not in FLAGS or value.lower() not in ("true", "false"):
            raise UsageError(
                f"--flag takes NAME=true|false with NAME one of {', '.join(FLAGS)}; got {item!r}",
                hint="e.g. --flag norm_output=true",
            )
        flags[name] = value.lower() == "true"
    return flags


def read_options(aux_layers: str | None, aux_convention: str | None, flag: list[str] | None):
    from ..checkpoint.formats.base import ReadOptions, detect_convention

    ids = parse_ids(aux_layers)
    return ReadOptions(
        aux_layers=tuple(ids) if ids is not None else None,
        aux_convention=detect_convention(aux_convention),
        flags=parse_flags(flag),
    )


def parse_json_object(text: str, flag: str, example: str) -> dict:
    """An option whose value is a JSON object (`--engine-args`, `--speculative-config`), or one line saying so."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object, got {text[:60]!r}", hint=f"e.g. {flag} '{example}'")
    return value


def parse_floors(text: str | None, k: int) -> list[float] | None:
    """--min-acceptance: at most K finite numbers in [0, 1]."""
    if text is None:
        return None
    try:
        floors = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        floors = []
    if not floors or any(not 0 <= x <= 1 for x in floors):  # NaN fails both comparisons
        raise UsageError(
            f"--min-acceptance must be comma-separated numbers in [0, 1], got {text!r}",
            hint="e.g. --min-acceptance 0.6,0.4,0.3 (one floor per position, at most K)",
        )
    if len(floors) > k:
        raise UsageError(f"--min-acceptance has {len(floors)} floors but K is {k}", hint="give at most K values")
    return floors


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
