"""Every report eaglezoo writes, as one typed union on `kind`: verify, tune and compare (docs/report.md is
generated from these models). `read_saved` is the one reader of a saved report of any kind: the model's own
validation (types, ranges, the cross-field checks each model states) plus, for tune and compare, the checks
of its figures against each other. A report written before reports carried `kind` is still read: its kind
is recognised by the fields only that command writes; every saved report is upgraded to this version's layout by
report_versions.upgraded, by its kind and `schema_version`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, TypeAlias

from pydantic import BaseModel, Field, TypeAdapter

from .compare import CompareReport, compare_from
from .doctor.report import DoctorReport, doctor_from
from .errors import BadInput
from .fsutil import read_json
from .limits import MAX_REPORT_BYTES
from .report_versions import upgraded
from .tune import TuneReport, tune_from
from .verify.report import VerifyReport
from .verify.saved import report_from

AnyReport: TypeAlias = VerifyReport | TuneReport | CompareReport | DoctorReport
Report = Annotated[AnyReport, Field(discriminator="kind")]
MODELS: dict[str, type[BaseModel]] = {
    "verify": VerifyReport,
    "tune": TuneReport,
    "compare": CompareReport,
    "doctor": DoctorReport,
}
HINT = "give a report written by verify, tune, compare or doctor --report"


def kind_of(data: object) -> str:
    """The report's kind: as it says, or for a report written before it said, by what only that command writes."""
    if not isinstance(data, dict):
        raise BadInput("the report is not a JSON object", hint=HINT)
    kind = data.get("kind")
    if kind is not None:
        if not isinstance(kind, str) or kind not in MODELS:
            raise BadInput(f"the report's kind is {str(kind)[:40]!r}; expected one of {', '.join(MODELS)}", hint=HINT)
        return str(kind)  # a key of MODELS: a str already
    if "grid" in data and "decision" in data:
        return "tune"
    if "rows" in data and "peers" in data:
        return "compare"
    if "acceptance_per_position" in data and "histogram" in data:
        return "verify"
    raise BadInput("the report is none of verify's, tune's or compare's", hint=HINT)


def read_saved(path: Path, what: str = "report", needs: str = "its page") -> AnyReport:
    """A saved report of any kind, read strictly by its kind's reader; one BadInput naming the field otherwise."""
    data = read_json(Path(path), what, MAX_REPORT_BYTES)
    kind = kind_of(data)
    return from_data(data, kind, f"{what} {path}", needs)


def from_data(data: dict[str, Any], kind: str, where: str, needs: str = "its page") -> AnyReport:
    data = upgraded(data, kind, where)  # report_versions: the one upgrade, by kind and schema_version
    if kind == "verify":
        return report_from(data, where, needs)
    if kind == "doctor":
        return doctor_from(data, where)
    return (tune_from if kind == "tune" else compare_from)(data, where)


def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind of report ("all": the union)."""
    if kind == "all":
        return TypeAdapter(Report).json_schema()
    return MODELS[kind].model_json_schema()


def schema_markdown() -> str:
    """docs/report.md: every report's fields with their types and meanings, from the models' own schemas."""
    lines = [
        "# Reports",
        "",
        "Generated from the report models (eaglezoo/reports.py) by `python -m scripts.docs.write_report_docs`; "
        "`eaglezoo report --schema KIND` prints each as JSON Schema. Every report says its `kind`; a field "
        "an engine cannot measure is `null`, never invented. Reports written before `kind` existed are "
        "still read: each report says its `schema_version`, and a saved one is upgraded to this version's "
        "(eaglezoo/report_versions.py).",
        "",
    ]
    for kind, model in MODELS.items():
        lines += _model_tables(f"`{kind}` report", model.model_json_schema())
    return "\n".join(lines).rstrip() + "\n"


def _model_tables(title: str, root: dict[str, Any]) -> list[str]:
    defs = root.get("$defs", {})
    out = [f"## The {title}", "", *_table(root), ""]
    for name in sorted(defs):
        about = defs[name].get("description", "").strip().replace("\n", " ")
        out += [f"### {name}", "", *([about, ""] if about else []), *_table(defs[name]), ""]
    return out


def _table(model: dict[str, Any]) -> list[str]:
    required = set(model.get("required", []))
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for name, prop in model.get("properties", {}).items():
        shown = json.dumps(prop["default"]) if "default" in prop else ""
        default = "" if name in required or not shown or len(shown) > 24 else f" (default {shown})"
        optional = "" if name in required else ", optional"
        about = prop.get("description", "").strip().replace("\n", " ").replace("|", "\\|")
        rows.append(f"| `{name}` | {_type(prop)}{optional}{default} | {about} |")
    return rows


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return f"[{prop['$ref'].rsplit('/', 1)[1]}]"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " or ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    kind: str = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop and isinstance(prop["additionalProperties"], dict):
        return f"map to {_type(prop['additionalProperties'])}"
    bounds = [
        f"{sym} {prop[key]}"
        for key, sym in (("minimum", "≥"), ("maximum", "≤"), ("exclusiveMinimum", ">"))
        if key in prop
    ]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")
