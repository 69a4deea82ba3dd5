"""A saved verify report read back: `read_report`, the one strict reader every command that reads one uses
(`registry record`, `report --html`, `push --report`, `registry site`). It refuses, in one line naming the
field and what was expected, whatever `eaglezoo verify --report` never writes: the registry's statuses, the
kept reports' file names and the pages are built from these values."""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path

from pydantic import ValidationError

from ..errors import BadInput
from ..fsutil import read_json
from ..limits import MAX_K, MAX_LEVELS, MAX_NEW_TOKENS, MAX_TEMPERATURE
from .report import VerifyReport
from .workload import bucket_problem

ENGINE_NAMES = ("native", "vllm", "endpoint")  # what native.py, vllm_engine.py and endpoint.py write
WRITTEN = ("engine", "sampling", "created", "eaglezoo_version")  # defaulted in the model, always in the file
TOLERANCE = 1e-6  # floats written by json round-trip exactly; sums of K rates differ by a few ulps
FUTURE_SLACK = dt.timedelta(days=1)  # another machine's clock
REPORT_HINT = "give the file that eaglezoo verify --report FILE wrote"
JSON_KINDS = ((bool, "true/false"), (int, "a whole number"), (float, "a number"), (str, "a string"),
              (list, "a list"), (dict, "an object"), (type(None), "null"))
EXPECTED = {"int_type": "a whole number", "int_from_float": "a whole number", "float_type": "a number",
            "string_type": "a string", "list_type": "a list", "dict_type": "an object", "bool_type": "true or false",
            "literal_error": "one of error, warning, info", "missing": "present", "model_type": "an object",
            "dataclass_type": "an object", "none_required": "null"}


def read_report(path: Path, what: str = "report", needs: str = "eaglezoo") -> VerifyReport:
    """A saved verify report, refused (one BadInput naming the field and what was expected) unless it holds
    only what `eaglezoo verify --report` writes. `needs`: who reads it, for the message on missing keys."""
    if not os.path.lexists(path):
        raise BadInput(f"{what} {path}: no such file", hint=REPORT_HINT)
    return report_from(read_json(Path(path), what), f"{what} {path}", needs)


def report_from(data: dict, where: str, needs: str = "eaglezoo") -> VerifyReport:
    """`data` (a report's JSON) as a VerifyReport, or BadInput; `where` opens every message."""
    def refuse(what: str) -> BadInput:
        return BadInput(f"{where}: {what}", hint=REPORT_HINT)

    required = [name for name, f in VerifyReport.model_fields.items() if f.is_required() or name in WRITTEN]
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
    report = validated(VerifyReport, data, refuse)
    problem = report_problem(report)
    if problem:
        raise refuse(problem)
    return report


def validated(model, data: dict, refuse, needs: str = "its page"):
    """`data` as `model`, its JSON types taken as they are; else `refuse(what)` for the missing keys or the first
    field that is not."""
    if not isinstance(data, dict):
        raise refuse(f"the report is {_shown(data)}; expected an object")
    missing = [name for name, f in model.model_fields.items() if f.is_required() and name not in data]
    if missing:
        raise refuse(f"the report lacks what {needs} needs ({', '.join(missing[:8])})")
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        e = exc.errors()[0]
        field = ".".join(str(x) for x in e["loc"]) or "the report"
        raise refuse(f"{field} is {_shown(e.get('input'))}; expected {EXPECTED.get(e['type'], 'what eaglezoo writes')}") from None


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


def _text(x) -> bool:
    return isinstance(x, str) and x.isprintable()


def report_problem(r: VerifyReport) -> str | None:
    """What a saved report holds that verify never writes, as 'FIELD is ...; expected ...', or None."""
    k = r.num_spec_tokens
    for name in ("drafter", "target", "device", "dtype", "eaglezoo_version", "created", "registry_id",
                 "drafter_revision", "target_revision"):
        value = getattr(r, name)
        if value is not None and not (_text(value) and value.strip()):
            return f"{name} is {_shown(value)}; expected one line of printable text"
    rates = r.acceptance_per_position
    bad = next((i for i, x in enumerate(rates) if not (number(x) and 0 <= x <= 1)), None)
    if bad is not None:
        return f"acceptance_per_position[{bad}] is {_shown(rates[bad])}; expected a rate from 0 to 1"
    al = r.mean_acceptance_length
    if not (number(al) and 1 <= al <= k + 1):
        return f"mean_acceptance_length is {_shown(al)}; expected a number from 1 to K+1 ({k + 1})"
    # vLLM and an endpoint report counters: a server without the per-position counter leaves the rates at 0
    uncounted = r.engine.get("name") in ("vllm", "endpoint") and not any(rates)
    if abs(al - 1 - sum(rates)) > TOLERANCE * k and not uncounted:
        return (f"mean_acceptance_length is {al:g} but 1 + the sum of acceptance_per_position is "
                f"{1 + sum(rates):g}; expected them equal")
    for name, value, low, high in (("max_new_tokens", r.max_new_tokens, 1, MAX_NEW_TOKENS),
                                   ("num_prompts", r.num_prompts, 0, None), ("num_drafts", r.num_drafts, 0, None),
                                   ("num_accepted", r.num_accepted, 0, k * r.num_drafts)):
        if value < low or (high is not None and value > high):
            return f"{name} is {_shown(value)}; expected a whole number from {low}" + (f" to {high}" if high is not None else " up")
    expected_al = 1 + r.num_accepted / r.num_drafts if r.num_drafts else 1.0
    if abs(al - expected_al) > TOLERANCE:
        return (f"mean_acceptance_length is {al:g} but 1 + num_accepted / num_drafts is {expected_al:g}; "
                "expected them equal")
    if r.histogram and (len(r.histogram) != k + 1 or min(r.histogram) < 0):
        return f"histogram holds {len(r.histogram)} counts; expected K+1 ({k + 1}) counts of at least 0, or none"
    for name, value in (("mean_acceptance_length_per_prompt", r.mean_acceptance_length_per_prompt),):
        if value is not None and not (number(value) and 1 <= value <= k + 1):
            return f"{name} is {_shown(value)}; expected a number from 1 to K+1 ({k + 1}) or null"
    if r.mean_acceptance_length_interval is not None and not (
            len(r.mean_acceptance_length_interval) == 2 and all(map(number, r.mean_acceptance_length_interval))):
        return "mean_acceptance_length_interval is not two numbers; expected [low, high] or null"
    ratio = r.target_distinct_token_ratio
    if ratio is not None and not (number(ratio) and 0 <= ratio <= 1):
        return f"target_distinct_token_ratio is {_shown(ratio)}; expected a number from 0 to 1 or null"
    return (_created_problem(r.created) or _sampling_problem(r.sampling) or _engine_problem(r.engine)
            or _drift_problem(r.drift, k, r.num_prompts) or _by_k_problem(r.acceptance_by_k, k)
            or _speedup_problem(r.speedup) or _texts_problem("failures", r.failures))


def _created_problem(created: str) -> str | None:
    try:
        when = dt.datetime.fromisoformat(created)
    except ValueError:
        when = None
    if when is None or len(created) < 16:  # a date-time, not a date alone
        return f"created is {_shown(created)}; expected an ISO date-time such as 2026-01-31T12:00:00+00:00"
    now = dt.datetime.now(dt.UTC)
    if (when if when.tzinfo else when.replace(tzinfo=dt.UTC)) > now + FUTURE_SLACK:
        return f"created is {created!r}, in the future; expected the time the report was written"
    return None


def _sampling_problem(sampling: dict) -> str | None:
    t = sampling.get("temperature")
    if not (number(t) and 0 <= t <= MAX_TEMPERATURE):
        return f"sampling.temperature is {_shown(t)}; expected a number from 0 to {MAX_TEMPERATURE:g}"
    seed = sampling.get("seed")
    if seed is not None and not _whole(seed):
        return f"sampling.seed is {_shown(seed)}; expected a whole number or null"
    return None


def _engine_problem(engine: dict) -> str | None:
    name = engine.get("name")
    if name not in ENGINE_NAMES:
        return f"engine.name is {_shown(name)}; expected one of {', '.join(ENGINE_NAMES)}"
    version = engine.get("version")
    if version is not None and not _text(version):
        return f"engine.version is {_shown(version)}; expected one line of printable text or null"
    parallel = engine.get("parallel")
    if parallel is None:
        return None
    if not isinstance(parallel, dict):
        return f"engine.parallel is {_shown(parallel)}; expected an object or null"
    for key, value in parallel.items():
        if key.endswith("_parallel_size") and value is not None and not (_whole(value) and value >= 1):
            return f"engine.parallel.{key} is {_shown(value)}; expected a whole number of at least 1"
    return None


def _drift_problem(drift: dict, k: int, num_prompts: int) -> str | None:
    rms = drift.get("feedback_rms_per_depth")
    if rms is not None and not (isinstance(rms, list) and len(rms) <= MAX_K and all(map(number, rms))):
        return "drift.feedback_rms_per_depth is not a list of numbers; expected one number per depth, or null"
    for name, one in (("acceptance_per_position_by_bucket", lambda v: isinstance(v, list) and len(v) == k and all(
                          number(x) and 0 <= x <= 1 for x in v)),
                      ("mean_acceptance_length_by_bucket", lambda v: number(v) and 1 <= v <= k + 1)):
        buckets = drift.get(name, {})
        if not isinstance(buckets, dict) or len(buckets) > max(1, num_prompts):
            return f"drift.{name} is {_shown(buckets)}; expected an object with one value per prompt bucket"
        for bucket, value in buckets.items():
            problem = bucket_problem(bucket)  # the prompt reader's own rule: what verify writes, this reads
            if problem:
                return f"drift.{name} names a bucket that {problem}"
            if not one(value):
                what = f"K ({k}) rates from 0 to 1" if name.startswith("acceptance") else f"a number from 1 to {k + 1}"
                return f"drift.{name}[{bucket!r}] is {_shown(value)}; expected {what}"
    return None


def _by_k_problem(table: dict | None, k: int) -> str | None:
    if table is None:
        return None
    rows = table.get("rows")
    if not _text(table.get("basis")) or not isinstance(rows, list) or len(rows) > k:
        return f"acceptance_by_k is not a basis and at most K ({k}) rows; expected what verify writes, or null"
    for row in rows:
        if not (isinstance(row, dict) and _whole(row.get("k")) and 1 <= row["k"] <= k
                and number(row.get("mean_acceptance_length")) and 1 <= row["mean_acceptance_length"] <= k + 1):
            return f"acceptance_by_k.rows holds {_shown(row)}; expected a K from 1 to {k} and its acceptance length"
    return None


def _speedup_problem(speedup: dict | None) -> str | None:
    if speedup is None:
        return None
    levels = speedup.get("levels")
    if not isinstance(levels, list) or not 1 <= len(levels) <= MAX_LEVELS:
        return "speedup.levels is not a list of measured concurrencies; expected what verify --speedup writes"
    for level in levels:
        ok = isinstance(level, dict) and _whole(level.get("concurrency")) and level["concurrency"] >= 1 and all(
            isinstance(level.get(side), dict) and number(level[side].get("output_tokens_per_s"))
            and level[side]["output_tokens_per_s"] >= 0 for side in ("with_drafter", "without_drafter"))
        if not (ok and number(level.get("speedup")) and level["speedup"] >= 0):
            return "speedup.levels holds a level without a concurrency, both throughputs and the speedup"
    return None


def _texts_problem(name: str, texts: list[str]) -> str | None:
    bad = next((i for i, x in enumerate(texts) if not _text(x)), None)
    return None if bad is None else f"{name}[{bad}] is {_shown(texts[bad])}; expected one line of printable text"
