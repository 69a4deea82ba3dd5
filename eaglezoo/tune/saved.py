"""A saved tune report, read strictly: a whole grid, decisions that follow it, and the serving command its own
speculative config gives (the page prints it)."""

from __future__ import annotations

import math
import shlex

from ..errors import BadInput
from ..limits import MAX_CONCURRENCY, MAX_LEVELS, MAX_TUNE_K
from ..serving import diagnose_command, vllm_serve_command
from .model import TuneReport
from .report import speculative_config, table_command


def tune_from(data: dict, where: str) -> TuneReport:
    """A saved tune report, refused (one BadInput naming the field) unless it holds what tune writes: a whole grid,
    decisions that follow it, and the serving command its own speculative config gives (the page prints it)."""
    from ..verify.saved import number, validated

    def refuse(what: str) -> BadInput:
        return BadInput(f"{where}: {what}", hint="give the file that eaglezoo tune --report FILE wrote")

    r = validated(TuneReport, data, refuse)
    levels = r.concurrency
    if (not 1 <= r.k_max <= MAX_TUNE_K or not 1 <= len(levels) <= MAX_LEVELS or levels != sorted(set(levels))
            or not 1 <= levels[0] <= levels[-1] <= MAX_CONCURRENCY):
        raise refuse(f"k_max {r.k_max} or concurrency {levels[:8]}; expected K from 1 to {MAX_TUNE_K} and distinct "
                     "rising levels")
    grid = {(c.k, c.concurrency): c for c in r.grid}
    if len(grid) != len(r.grid) or set(grid) != {(k, c) for k in range(r.k_max + 1) for c in levels}:
        raise refuse("grid is not one cell per K (0 to k_max) and concurrency; expected the whole grid")
    if not all(number(c.output_tokens_per_s) and c.output_tokens_per_s > 0 for c in r.grid):
        raise refuse("grid holds an output_tokens_per_s that is not a positive number")
    if [d.concurrency for d in r.decision] != levels:
        raise refuse("decision is not one choice per concurrency, in order")
    for d in r.decision:
        cell, base = grid.get((d.k, d.concurrency)), grid[(0, d.concurrency)]
        if cell is None or d.output_tokens_per_s != cell.output_tokens_per_s or not math.isclose(
                d.speedup, cell.output_tokens_per_s / base.output_tokens_per_s, rel_tol=1e-6):
            raise refuse(f"decision at concurrency {d.concurrency} (K={d.k}) is not the grid's; expected a K from 0 "
                         f"to {r.k_max}, its cell's tokens/s and its speedup over K=0")
    served = shlex.split(r.convert_command)[3] if r.convert_command and len(shlex.split(r.convert_command)) > 3 \
        else r.drafter  # the folder the convert step writes, else the drafter as tuned
    config = speculative_config(served, r.k_max, r.schedule)
    written = table_command(r.target, config)  # older reports: the table as it is, in dev mode (diagnose_command)
    if r.vllm_speculative_config != config or r.vllm_command not in (
            written, vllm_serve_command(r.target, config), diagnose_command(vllm_serve_command(r.target, config))):
        raise refuse("vllm_command is not the command its target, drafter and schedule give")
    return r
