"""The verify report, by job: `models` (VerifyReport and its parts, with their cross-field checks), `build`
(measurements -> the report, built once), `gate` (the floors and their check), `timing` (`--speedup`'s figures).
The report's shape and its floors are re-exported here, so `from eaglezoo.verify.report import X` names them
wherever X lives. Building one (`build`, `timing`) is imported from its module: it pulls in the serving paths and the
workload, which a reader of reports or of the registry (`registry list` reads the floors) need not import."""

from .gate import NO_GATE, Basis, Floors, Gate, gated, not_like_with_like
from .models import PassTiming, Speedup, VerifyReport

__all__ = [
    "NO_GATE",
    "Basis",
    "Floors",
    "Gate",
    "PassTiming",
    "Speedup",
    "VerifyReport",
    "gated",
    "not_like_with_like",
]
