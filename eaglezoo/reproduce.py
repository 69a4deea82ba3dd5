"""What it takes to run a report's result again: the command as run, the versions that measured, the prompt
set's hash, the seeds and the machine. One typed value, built once by each report's builder (verify, tune,
compare); optional when a report is read, so reports written before it still read."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from . import __version__
from .errors import printable

try:  # the parsed command (`command_line`); typer without its vendored click: the report says the command is unknown
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context
except ImportError:
    ParameterSource = get_current_context = None

NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")  # the driver's own file per GPU: no subprocess, no torch import


class Machine(BaseModel):
    """Where it ran: the CPU, the GPUs this process could see (none: an empty list), the operating system."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu: str
    gpus: list[str] = []
    os: str


class Reproduction(BaseModel):
    """The command as run and what it ran on: enough to run it again and to tell a different result's cause."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    command: list[str] | None = None
    """The command as parsed: `eaglezoo`, the command and every option given (secrets redacted); null when the
    report was built by a library call, not the command line."""
    eaglezoo: str = __version__
    """eaglezoo's version."""
    python: str = platform.python_version()
    """The Python that ran eaglezoo."""
    torch: str | None = None
    """torch's version (null where it is not installed)."""
    transformers: str | None = None
    """transformers' version."""
    engine: str | None = None
    """The engine that measured, with its version where one ran (`vllm 0.32.0`; `native` is eaglezoo's own)."""
    prompt_set: str | None = None
    """The prompt set by name: a file, `suite:NAME`, or `default` (the shipped set)."""
    prompts_sha256: str | None = None
    """The prompt set's sha256 (of its bytes as read)."""
    seed: int | None = None
    """The sampling seed (request i is seeded with seed + i); null: greedy or unseeded."""
    bootstrap_seed: int | None = None
    """The seed of the bootstrap intervals."""
    machine: Machine | None = None
    """CPU model, GPU names and OS."""

    def versions(self) -> str:
        """The versions it ran with, those it knows: "eaglezoo X, python Y, torch Z, transformers W"."""
        named = (
            ("eaglezoo", self.eaglezoo),
            ("python", self.python),
            ("torch", self.torch),
            ("transformers", self.transformers),
        )
        return ", ".join(f"{name} {value}" for name, value in named if value)

    def lines(self) -> list[str]:
        """The terminal's reproduction lines (verify, tune, compare and `eaglezoo report`)."""
        m = self.machine
        versions = self.versions()
        said = [
            f"rerun: {' '.join(self.command)}" if self.command else "rerun: (built by a library call)",
            f"versions: {versions}" + (f"; engine {self.engine}" if self.engine else ""),
        ]
        if self.prompt_set:
            said.append(
                f"prompts: {self.prompt_set}" + (f" (sha256 {self.prompts_sha256[:12]})" if self.prompts_sha256 else "")
            )
        seeds = ([f"sampling {self.seed}"] if self.seed is not None else []) + (
            [f"bootstrap {self.bootstrap_seed}"] if self.bootstrap_seed is not None else []
        )
        if seeds:
            said.append("seeds: " + ", ".join(seeds))
        if m is not None:
            said.append(f"machine: {m.cpu}; {', '.join(m.gpus) if m.gpus else 'no GPU'}; {m.os}")
        return said


def reproduction(
    *,
    engine: str | None = None,
    prompt_set: str | None = None,
    prompts_sha256: str | None = None,
    seed: int | None = None,
    bootstrap_seed: int | None = None,
) -> Reproduction:
    """This run's reproduction: the command from the command line that is running, the versions installed, this
    machine."""
    return Reproduction(
        command=command_line(),
        torch=_version("torch"),
        transformers=_version("transformers"),
        engine=engine,
        prompt_set=prompt_set and printable(prompt_set),
        prompts_sha256=prompts_sha256,
        seed=seed,
        bootstrap_seed=bootstrap_seed,
        machine=machine(),
    )


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine() -> Machine:
    return Machine(cpu=cpu_model(), gpus=gpu_names(), os=printable(platform.platform()) or "unknown")


def cpu_model() -> str:
    """The CPU's model name as the kernel states it, else what the platform says, and the core count."""
    name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    name = printable(name or platform.processor() or platform.machine() or "unknown")
    return f"{name} ({os.cpu_count() or '?'} cores)"


def gpu_names() -> list[str]:
    """The GPUs this machine has: the NVIDIA driver's files, else torch's count where the run imported torch."""
    names = []
    try:
        for info in sorted(NVIDIA_GPUS.glob("*/information")):
            model = next(
                (
                    line.split(":", 1)[1]
                    for line in info.read_text(errors="replace").splitlines()
                    if line.startswith("Model:")
                ),
                "",
            )
            names.append(printable(model) or "NVIDIA GPU")
    except OSError:
        names = []
    torch = sys.modules.get("torch")  # never imported here only to ask: a verify on vLLM needs no torch in eaglezoo
    if not names and torch is not None:
        try:
            if torch.cuda.is_available():
                names = [printable(torch.cuda.get_device_name(i)) for i in range(torch.cuda.device_count())]
        except Exception:  # noqa: BLE001 - a broken CUDA setup names no GPU; the run itself says why
            names = []
    return names


def command_line() -> list[str] | None:
    """The command being run, rebuilt from its parsed options (what was given on the command line, in the
    command's own order and spelling; defaults left out), each word redacted. None outside a command."""
    if get_current_context is None:
        return None
    ctx = get_current_context(silent=True)
    if ctx is None:
        return None
    words = ctx.command_path.split()
    for param in ctx.command.params:
        if ctx.get_parameter_source(param.name) not in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            continue
        words += _words(param, ctx.params.get(param.name))
    return [printable(w) if w.strip() else repr(w) for w in words]


def _words(param, value) -> list[str]:
    if value is None:
        return []
    if not getattr(param, "opts", None) or param.param_type_name == "argument":
        return [str(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    if getattr(param, "is_flag", False) and isinstance(value, bool):
        if value:
            return [param.opts[0]]
        return [param.secondary_opts[0]] if param.secondary_opts else []
    values = value if isinstance(value, (list, tuple)) else [value]
    return [w for v in values for w in (param.opts[0], str(v))]
