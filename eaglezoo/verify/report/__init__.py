"""The verify report, by job: `models` (VerifyReport and its parts, with their cross-field checks), `build`
(measurements -> the report, built once), `gate` (the floors and their check), `timing` (`--speedup`'s figures).
The names other modules use are re-exported here, so `from eaglezoo.verify.report import X` names the report's
public face wherever X lives."""

from .build import NO_ORIGIN, Origin, built, compare_engines, report_for, serving_path
from .gate import NO_GATE, Basis, Floors, Gate, gated, not_like_with_like
from .models import PassTiming, Speedup, VerifyReport
from .timing import pass_timing, speedup_report

__all__ = [
    "NO_GATE",
    "NO_ORIGIN",
    "Basis",
    "Floors",
    "Gate",
    "Origin",
    "PassTiming",
    "Speedup",
    "VerifyReport",
    "built",
    "compare_engines",
    "gated",
    "not_like_with_like",
    "pass_timing",
    "report_for",
    "serving_path",
    "speedup_report",
]
