"""`eaglezoo tune`: which K at which load, as the engine's own config (`run.tune`), measured until the decision
is settled (`measure.py`), decided (`decide.py`), reported (`report.py`, `model.py`) and read back (`saved.py`).

The names below are imported when first asked for (PEP 562): `eaglezoo.cli` imports `tune.rule` for its options'
defaults, and every command would otherwise pay for the report models at start-up (tests/cli/test_startup.py).
`decide` and `report` name their submodules here (a lazy name cannot shadow a submodule once that is imported):
import the functions from `tune.decide` and `tune.report`."""

from __future__ import annotations

from importlib import import_module

_HOME = {
    "contenders": "decide",
    "judge": "decide",
    "recommendation": "decide",
    "schedule_of": "decide",
    "sglang_adaptive_config": "decide",
    "static_best": "decide",
    "Cell": "model",
    "Choice": "model",
    "TuneReport": "model",
    "Measured": "report",
    "speculative_config": "report",
    "SamplingRule": "rule",
    "TuneRequest": "run",
    "check_grid": "run",
    "tune": "run",
    "tune_from": "saved",
}

__all__ = [
    "Cell",
    "Choice",
    "Measured",
    "SamplingRule",
    "TuneReport",
    "TuneRequest",
    "check_grid",
    "contenders",
    "judge",
    "recommendation",
    "schedule_of",
    "sglang_adaptive_config",
    "speculative_config",
    "static_best",
    "tune",
    "tune_from",
]


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_HOME[name]}", __name__), name)
