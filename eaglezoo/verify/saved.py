"""A saved verify report read back: `read_report`, the one strict reader every command that reads one uses
(`registry record`, `registry check`, `push --report`, `registry site`; `reports.read_saved` for any kind). It is
the model's own validation: the types and ranges of every field, and the cross-field checks `VerifyReport` states
(which run when verify builds a report too, so what verify writes, its readers read). A refusal is one line naming
the field and what was expected: the registry's statuses, the kept reports' file names and the pages are built from
these values."""

from __future__ import annotations

import math
import os
from pathlib import Path

from pydantic import ValidationError

from ..errors import BadInput
from ..fsutil import read_json
from ..limits import MAX_K, MAX_REPORT_BYTES
from ..report_versions import upgraded
from .report import VerifyReport

WRITTEN = ("engine", "sampling", "created", "eaglezoo_version")  # defaulted in the model, always in the file
REPORT_HINT = "give the file that eaglezoo verify --report FILE wrote"
JSON_KINDS = (
    (bool, "true/false"),
    (int, "a whole number"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
    (type(None), "null"),
)
EXPECTED = {
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "an object",
    "bool_type": "true or false",
    "missing": "present",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dataclass_type": "an object",
    "none_required": "null",
    "finite_number": "a finite number",
    "extra_forbidden": "absent (not a field this command writes)",
    "too_short": "more values",
    "too_long": "fewer values",
    "union_tag_invalid": "one of the kinds eaglezoo writes",
}


def read_report(path: Path, what: str = "report", needs: str = "eaglezoo") -> VerifyReport:
    """A saved verify report, refused (one BadInput naming the field and what was expected) unless it holds
    only what `eaglezoo verify --report` writes. `needs`: who reads it, for the message on missing keys."""
    if not os.path.lexists(path):
        raise BadInput(f"{what} {path}: no such file", hint=REPORT_HINT)
    return report_from(read_json(Path(path), what, MAX_REPORT_BYTES), f"{what} {path}", needs)


def report_from(data: dict, where: str, needs: str = "eaglezoo") -> VerifyReport:
    """`data` (a report's JSON) as a VerifyReport, or BadInput; `where` opens every message."""

    def refuse(what: str) -> BadInput:
        return BadInput(f"{where}: {what}", hint=REPORT_HINT)

    if not isinstance(data, dict):
        raise refuse(f"the report is {_shown(data)}; expected an object")
    data = upgraded(data, "verify", where)  # report_versions: the one upgrade, by kind and schema_version
    required = [
        name for name, f in VerifyReport.model_fields.items() if (f.is_required() or name in WRITTEN) and name != "kind"
    ]
    missing = [name for name in required if name not in data]
    if missing:
        raise refuse(f"not a verify report: the report lacks what {needs} needs ({', '.join(missing)})")
    k = data["num_spec_tokens"]
    if not _whole(k) or not 1 <= k <= MAX_K:  # first, and bounded: every list below is checked against it
        raise refuse(f"num_spec_tokens is {_shown(k)}; expected a whole number from 1 to {MAX_K}")
    rates = data["acceptance_per_position"]
    if not isinstance(rates, list) or len(rates) != k:
        got = f"{len(rates)} values" if isinstance(rates, list) else _shown(rates)
        raise refuse(f"acceptance_per_position holds {got}; expected a list of num_spec_tokens ({k}) rates")
    return validated(VerifyReport, data, refuse)


def validated(model, data: dict, refuse, needs: str = "its page"):
    """`data` as `model`, its JSON types taken as they are; else `refuse(what)` for the missing keys or the first
    field that is not what the model says (its own cross-field checks included)."""
    if not isinstance(data, dict):
        raise refuse(f"the report is {_shown(data)}; expected an object")
    missing = [name for name, f in model.model_fields.items() if f.is_required() and name not in data]
    if missing:
        raise refuse(f"the report lacks what {needs} needs ({', '.join(missing[:8])})")
    for name, bound in row_bounds(model).items():  # before the rows are read one by one: refused at once
        if isinstance(data.get(name), list) and len(data[name]) > bound:
            raise refuse(f"{name} holds {len(data[name]):,} rows; expected at most {bound:,}")
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        raise refuse(_worded(exc.errors()[0])) from None


def row_bounds(model) -> dict[str, int]:
    """The most items each of the model's list fields may hold, as the model states it (Field(max_length=...))."""
    return {
        name: bound
        for name, f in model.model_fields.items()
        for bound in [next((m.max_length for m in f.metadata if getattr(m, "max_length", None)), None)]
        if bound
    }


def _worded(e: dict) -> str:
    """One validation error as 'FIELD is VALUE; expected WHAT'."""
    field = _field(e["loc"])
    message = str(e.get("msg", "")).removeprefix("Value error, ")
    if e["type"] == "value_error" and not field:  # a model's own cross-field check says it all
        return message
    if e["type"] == "value_error" and isinstance(e.get("input"), dict):  # a part's own check names its field
        return f"{field}.{message}"
    if e["type"] == "value_error":
        return f"{field} is {_shown(e.get('input'))}; {message}"
    if e["type"] == "missing":
        return f"{field} is missing; expected it where the command writes it"
    ctx = e.get("ctx") or {}
    expected = EXPECTED.get(e["type"]) or _bound(e["type"], ctx) or "what eaglezoo writes"
    return f"{field or 'the report'} is {_shown(e.get('input'))}; expected {expected}"


def _bound(kind: str, ctx: dict) -> str | None:
    words = {
        "greater_than_equal": "at least {ge}",
        "less_than_equal": "at most {le}",
        "greater_than": "above {gt}",
        "less_than": "below {lt}",
        "literal_error": "one of {expected}",
    }
    return words[kind].format(**ctx) if kind in words else None


def _field(loc: tuple) -> str:
    """A location as a reader writes it: acceptance_per_position[0], drift.mean_acceptance_length_by_bucket['a']."""
    out = ""
    for part in loc:
        if part == "[key]":
            continue
        out += (
            f"[{part}]"
            if isinstance(part, int)
            else f"[{part!r}]"
            if out.endswith("_by_bucket")
            else (f".{part}" if out else str(part))
        )
    return out


def _whole(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _shown(x) -> str:
    """A value from the file, for a message: numbers and short printable strings as they are, else the kind."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return repr(x) if len(repr(x)) <= 24 else "a number of many digits"
    if isinstance(x, str) and len(x) <= 40 and x.isprintable():
        return repr(x)
    if isinstance(x, str) and not x.isprintable():
        return "a string holding a control character"
    return next((name for kind, name in JSON_KINDS if isinstance(x, kind)), "a value")
