"""A saved tune report, read strictly: a whole grid, decisions that follow it, and the serving command its own
speculative config gives (the page prints it)."""

from __future__ import annotations

import shlex

from ..errors import BadInput
from ..serving import diagnose_command, vllm_serve_command
from ..verify.saved import validated
from .model import TuneReport
from .report import speculative_config, table_command


def tune_from(data: dict, where: str) -> TuneReport:
    """A saved tune report, refused (one BadInput naming the field) unless it holds what tune writes: a whole grid,
    decisions that follow it, and the serving command its own speculative config gives (the page prints it)."""

    def refuse(what: str) -> BadInput:
        return BadInput(f"{where}: {what}", hint="give the file that eaglezoo tune --report FILE wrote")

    r = validated(TuneReport, data, refuse)  # the model's own checks: the grid whole, decisions that follow it
    served = (
        shlex.split(r.convert_command)[3]
        if r.convert_command and len(shlex.split(r.convert_command)) > 3
        else r.drafter
    )  # the folder the convert step writes, else the drafter as tuned
    config = speculative_config(served, r.k_max, r.schedule)
    written = table_command(r.target, config)  # older reports: the table as it is, in dev mode (diagnose_command)
    if r.vllm_speculative_config != config or r.vllm_command not in (
        written,
        vllm_serve_command(r.target, config),
        diagnose_command(vllm_serve_command(r.target, config)),
    ):
        raise refuse("vllm_command is not the command its target, drafter and schedule give")
    return r
