"""`eaglezoo tune`: which K at which load, as the engine's own config (`run.tune`), measured until the decision
is settled (`measure.py`), decided (`decide.py`), reported (`report.py`, `model.py`) and read back (`saved.py`)."""

from .decide import contenders, decide, judge, recommendation, schedule_of, sglang_adaptive_config, static_best
from .model import Cell, Choice, TuneReport
from .report import Measured, report, speculative_config
from .rule import SamplingRule
from .run import TuneRequest, check_grid, tune
from .saved import tune_from

__all__ = ["Cell", "Choice", "Measured", "SamplingRule", "TuneReport", "TuneRequest", "check_grid", "contenders",
           "decide", "judge", "recommendation", "report", "schedule_of", "sglang_adaptive_config",
           "speculative_config", "static_best", "tune", "tune_from"]
