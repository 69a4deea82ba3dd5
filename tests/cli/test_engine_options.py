"""The vLLM options verify, tune, compare and doctor share are declared once (cli/common.py), bounded by limits.py:
each command takes the same values and refuses the same ones, in one line, before anything runs."""

from __future__ import annotations

import pytest
import typer
from conftest import assert_clean_failure, run_inprocess

from eaglezoo.cli.app import app
from eaglezoo.limits import GPU_MEMORY_UTILIZATION, MAX_MODEL_LEN, MIN_MODEL_LEN

SHARED = {  # option -> (its bounds, the commands that take it)
    "--max-model-len": ((MIN_MODEL_LEN, MAX_MODEL_LEN), ("verify", "tune", "compare", "doctor")),
    "--gpu-memory-utilization": (GPU_MEMORY_UTILIZATION, ("verify", "tune", "doctor")),
    "--tensor-parallel-size": ((1, None), ("verify", "tune", "doctor")),
}
RUNS = {  # what each command needs besides the option, to reach it (doctor: a server that is never contacted)
    "verify": ["tiny-example-eagle31", "--engine", "vllm"],
    "tune": ["tiny-example-eagle31"],
    "compare": ["tiny-example-eagle3", "tiny-example-eagle31", "--engine", "vllm"],
    "doctor": ["--endpoint", "http://127.0.0.1:9"],
}


def _option(command: str, name: str):
    """The parsed option (typer's own click: duck-typed, as tests/cli/test_help.py reads it)."""
    found = typer.main.get_command(app).commands[command]
    return next(p for p in found.params if p.param_type_name == "option" and name in p.opts)


@pytest.mark.parametrize("name", SHARED)
def test_every_command_bounds_a_shared_option_as_limits_says(name):
    (low, high), commands = SHARED[name]
    for command in commands:
        option = _option(command, name)
        assert option.min == low and option.max in (high, None), (command, name)  # max_model_len's: a callback
    declared = {
        command: (o.min, o.max, getattr(o.callback, "__qualname__", None))
        for command in commands
        for o in [_option(command, name)]
    }
    assert len(set(declared.values())) == 1, declared  # one declaration, whatever the command


CASES = [
    (command, name, value)
    for name, ((low, high), commands) in SHARED.items()
    for command in commands
    for value in ([str(low - 1) if isinstance(low, int) else "0"] + ([str(high * 2)] if high else []))
]


@pytest.mark.parametrize("command,name,value", CASES, ids=[f"{c} {n} {v}" for c, n, v in CASES])
def test_a_value_out_of_bounds_is_refused_in_one_line_before_anything_runs(command, name, value):
    r = run_inprocess(command, *RUNS[command], name, value)
    assert_clean_failure(r, None, contains=name)
