"""A saved tune report, read strictly: a whole grid, decisions that follow it, and the serving command its own
speculative config gives (the page prints it)."""

from __future__ import annotations

import shlex

from ..errors import BadInput
from ..serving import vllm_serve_command
from .model import TuneReport
from .report import speculative_config


def tune_from(data: dict, where: str) -> TuneReport:
    """A saved tune report, refused (one BadInput naming the field) unless it holds what tune writes: a whole grid,
    decisions that follow it, and the serving command its own speculative config gives (the page prints it)."""
    from ..verify.saved import validated

    def refuse(what: str) -> BadInput:
        return BadInput(f"{where}: {what}", hint="give the file that eaglezoo tune --report FILE wrote")

    r = validated(TuneReport, data, refuse)  # the model's own checks: the grid whole, decisions that follow it
    config = speculative_config(r.drafter, r.k_max, r.schedule)
    if r.vllm_speculative_config != config or r.vllm_command not in (vllm_serve_command(r.target, config),
                                                                      _unmeasured_command(r.target, config)):
        raise refuse("vllm_command is not the command its target, drafter and schedule give")
    return r


def _unmeasured_command(target: str, config: dict) -> str:
    """The command tune wrote before it added what eaglezoo's measurements of the server need: still read."""
    return f"vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(_json(config))}"


def _json(value) -> str:
    import json

    return json.dumps(value, separators=(", ", ": "))
