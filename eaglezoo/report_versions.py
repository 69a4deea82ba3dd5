"""Every report's `schema_version`, and the one upgrade of a saved report to it: each kind's steps, one per
version, in one place. A report says the version of the layout it was written in (absent: 0, written before
reports said it); a reader (reports.from_data, verify.saved.report_from) upgrades it step by step to this
version's before its model validates it, and refuses a report written by a newer eaglezoo in one line. What a report
written before a field existed means by its absence is said here, once, not by each reader: a verify report's
verdict (`gate`) and a verify or compare report's serving path (`serve`) are filled in from what it holds, so the
pages, the summaries and `registry record` read every report alike. It builds that path with serving.py's
builders, so it sits beside serving.py, above checkpoint/."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from .errors import BadInput
from .serving import vllm_serve_command, vllm_speculative_config

SCHEMA_VERSION = 1  # raise it with each kind's step that turns a report of the version before into this one's
SchemaVersion = Annotated[int, Field(ge=SCHEMA_VERSION, le=SCHEMA_VERSION)]  # a model holds the current one only
Step = Callable[[dict[str, Any]], dict[str, Any]]


def _kind_stated(kind: str) -> Step:
    """Version 0 to 1: `kind` stated (a report written before it said is recognised by reports.kind_of)."""
    return lambda data: {**data, "kind": kind}


def _tune_0(data: dict[str, Any]) -> dict[str, Any]:
    """Version 0 to 1 of a tune report: `kind` stated; its hardware not yet placed is null (it was {}); written
    before it kept a recommended command, the `vllm serve` command of the table it decided (its page's)."""
    data = _kind_stated("tune")(data)
    data = {**data, "hardware": None} if data.get("hardware") == {} else data
    target, config = data.get("target"), data.get("vllm_speculative_config")
    if (
        data.get("recommended_command")
        or data.get("llamacpp")
        or not (isinstance(target, str) and isinstance(config, dict))
    ):
        return data
    return {**data, "recommended_command": vllm_serve_command(target, config)}


def _served(data: dict[str, Any], drafter: str) -> dict[str, Any]:
    """A report without a serving path: the `vllm serve` command of the drafter as measured (its `drafter` field:
    verify's drafter, compare's B), at its K. Fields of the wrong type are left for the model to refuse."""
    target, named, k = data.get("target"), data.get(drafter), data.get("num_spec_tokens")
    if data.get("serve") or not (isinstance(target, str) and isinstance(named, str) and type(k) is int):
        return data
    return {**data, "serve": [vllm_serve_command(target, vllm_speculative_config(named, k))]}


def _verdict(data: dict[str, Any]) -> str:
    """A verify report's verdict from its failures and floors, as verify judged before it wrote `gate`."""
    floors = data.get("thresholds")
    return (
        "FAIL" if data.get("failures") else "PASS" if isinstance(floors, dict) and any(floors.values()) else "no floors"
    )


def _verify_0(data: dict[str, Any]) -> dict[str, Any]:
    """Version 0 to 1 of a verify report: `kind` stated; its verdict (`gate`, from its failures and floors) and its
    serving path (`serve`) filled in where it was written before it kept them."""
    data = _kind_stated("verify")(data)
    data = data if data.get("gate") is not None else {**data, "gate": {"verdict": _verdict(data)}}
    return _served(data, "drafter")


def _compare_0(data: dict[str, Any]) -> dict[str, Any]:
    """Version 0 to 1 of a compare report: `kind` stated; its serving path (B's) filled in where it kept none."""
    return _served(_kind_stated("compare")(data), "b")


# kind -> its steps: UPGRADES[kind][v] turns a report of version v into one of version v + 1
UPGRADES: dict[str, tuple[Step, ...]] = {
    "verify": (_verify_0,),
    "tune": (_tune_0,),
    "compare": (_compare_0,),
    "doctor": (_kind_stated("doctor"),),
}
assert all(len(steps) == SCHEMA_VERSION for steps in UPGRADES.values())  # noqa: S101 - one step per version


def upgraded(data: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """A saved report of `kind` as this version writes it; BadInput for a version this eaglezoo cannot read."""
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise BadInput(
            f"{where}: schema_version is {str(version)[:40]!r}; expected a whole number from 0 to {SCHEMA_VERSION}",
            hint="give the report as eaglezoo wrote it",
        )
    if version > SCHEMA_VERSION:
        raise BadInput(
            f"{where}: schema_version is {version}: written by a newer eaglezoo (this one reads reports up to "
            f"version {SCHEMA_VERSION})",
            hint="upgrade eaglezoo (pip install -U eaglezoo) to read it",
        )
    for step in UPGRADES[kind][version:]:
        data = step(data)
    return {**data, "schema_version": SCHEMA_VERSION}
