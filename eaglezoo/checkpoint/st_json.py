"""JSON as the safetensors library reads a header: serde_json 1.x with its default features.

Python's json module is more lenient than serde_json. It reads NaN and Infinity, numbers beyond
the double range (as inf, or as exact huge integers), lone UTF-16 surrogate escapes, and nesting
down to the interpreter's recursion limit. serde_json refuses all of these. It also stores
integers above 2**64 - 1, negative integers and "-0" in ways that no unsigned field accepts.
`loads` refuses what serde_json refuses. Objects come back as `JsonObject`s, duplicate keys
included, so that the caller can apply serde's per-field duplicate rules.
"""

from __future__ import annotations

import json
import math
import re

MAX_DEPTH = 127  # serde_json refuses the 128th nested array or object
U64_MAX = 2**64 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
NUMBER = re.compile(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([-+]?)(\d+))?")
POW10 = [float(f"1e{i}") for i in range(309)]
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonError(ValueError):
    """Text that serde_json would not parse; the message says why."""


class JsonObject(tuple):
    """A JSON object as its (key, value) pairs, in document order, duplicate keys kept."""


def loads(text: str):
    try:
        value = json.loads(
            text, object_pairs_hook=JsonObject, parse_int=_integer, parse_float=serde_float, parse_constant=_constant
        )
    except json.JSONDecodeError as exc:
        raise JsonError(f"{exc.msg}: line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise JsonError(f"nested deeper than {MAX_DEPTH} levels") from None
    _check_nesting_and_strings(value, 1)
    return value


def _check_nesting_and_strings(value, depth: int) -> None:
    if isinstance(value, str):
        if LONE_SURROGATE.search(value):
            raise JsonError("a string holds a lone UTF-16 surrogate escape")
        return
    if isinstance(value, JsonObject):
        items = [part for pair in value for part in pair]
    elif isinstance(value, list):
        items = value
    else:
        return
    if depth > MAX_DEPTH:
        raise JsonError(f"nested deeper than {MAX_DEPTH} levels")
    for item in items:
        _check_nesting_and_strings(item, depth + 1)


def _constant(name: str):
    raise JsonError(f"{name} is not JSON")


def _integer(token: str) -> int | float:
    """serde_json keeps integers of up to 20 digits that fit 64 bits as integers; it reads "-0" and
    longer ones as floats (which can be out of range)."""
    digits = token.lstrip("-")
    if len(digits) <= 20 and int(digits) <= U64_MAX:
        return -0.0 if token == "-0" else int(token)
    return serde_float(token)


def serde_float(token: str) -> float:
    """The double serde_json reads for `token`, by its own (not correctly rounded) algorithm: up to
    64 bits of significand, further digits only scale (or are dropped), then one multiplication or
    division by a power of ten. A result that overflows is an error, not infinity."""
    negative, integer, fraction, exp_sign, exp_digits = NUMBER.fullmatch(token).groups()
    significand, exponent = 0, 0
    for digit in integer:
        if exponent or significand * 10 + int(digit) > U64_MAX:
            exponent += 1
        else:
            significand = significand * 10 + int(digit)
    for digit in fraction or "":
        if significand * 10 + int(digit) > U64_MAX:
            break
        significand = significand * 10 + int(digit)
        exponent -= 1
    if exp_digits is not None:
        significant = exp_digits.lstrip("0")
        exp = int(significant or "0") if len(significant) <= 10 else I32_MAX + 1
        if exp > I32_MAX:
            if significand and exp_sign != "-":
                raise JsonError(f"number {token[:40]} is out of range")
            return -0.0 if negative else 0.0
        exponent = max(I32_MIN, min(I32_MAX, exponent - exp if exp_sign == "-" else exponent + exp))
    value = _scale(float(significand), exponent, token)
    return -value if negative else value


def _scale(f: float, exponent: int, token: str) -> float:
    while abs(exponent) > 308:
        if f == 0.0:
            return f
        if exponent >= 0:
            raise JsonError(f"number {token[:40]} is out of range")
        f /= 1e308
        exponent += 308
    if exponent < 0:
        return f / POW10[-exponent]
    f *= POW10[exponent]
    if math.isinf(f):
        raise JsonError(f"number {token[:40]} is out of range")
    return f
