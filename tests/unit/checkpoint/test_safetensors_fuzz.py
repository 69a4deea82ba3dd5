"""eaglezoo's safetensors reader against the safetensors library itself, fuzzed.

Generated files (valid ones, respelled in ways the library accepts, and broken ones) are read
in-process by both: eaglezoo must accept exactly the files the library loads (`safe_open`, then
every tensor), with the same metadata, dtypes, shapes and bytes, and refuse every other file with
BadInput, at the same stage (the header, or a tensor torch cannot hold). The one deliberate
difference: a repeated tensor name is refused (the library keeps the last entry). Then the
writer's headers read back by both. (Refusals through `eaglezoo lint`: tests/cli/lint/test_lint_safetensors.py.)
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from support.safetensors_readers import assert_same_verdict, one

from eaglezoo.checkpoint.st_header import ST_DTYPES, TensorRef, read_safetensors_header
from eaglezoo.checkpoint.st_writer import OutTensor, safetensors_header

CODES = sorted(ST_DTYPES)
FUZZ = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
BIG_DIMS = [2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1]
MAX_DATA = 4096


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


# --------------------------------------------------------------------------------------------
# Raw JSON fragments, valid and odd, for the mutations to write into headers


number_tokens = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.builds(lambda digits, exp: f"{digits}e{exp}", st.integers(1, 10**25), st.integers(250, 330)),
    st.sampled_from(
        [
            "-0",
            "0.0",
            "-0.0",
            "1.0",
            "1e0",
            "1E+2",
            "18446744073709551615",
            "18446744073709551616",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1e309",
            "-1e309",
            "1e-400",
            "0e99999999999",
            "1e2147483647",
            "1e-2147483648",
            "0.000001e313",
            "1" * 400,
            "1" * 5000,
            "9" * 30 + ".5e280",
            "01",
            "1.",
            ".5",
            "+1",
            "NaN",
            "Infinity",
            "-Infinity",
        ]
    ),
)
escapes = st.one_of(
    st.sampled_from(["\\n", '\\"', "\\\\", "\\/", "\\b", "\\f", "\\r", "\\t", "\\x", "\\u00e9", "\\u12"]),
    st.integers(0xD7FE, 0xE001).map(lambda c: f"\\u{c:04X}"),
    st.just("\\uD83D\\uDE00"),
)
string_tokens = st.lists(st.one_of(st.characters(exclude_characters='"\\'), escapes), max_size=4).map(
    lambda parts: '"' + "".join(parts) + '"'
)
scalar_tokens = st.one_of(number_tokens, string_tokens, st.sampled_from(["true", "false", "null"]))
nested_tokens = st.one_of(  # inside a tensor entry (depth 2), serde_json allows 125 more levels
    st.integers(118, 128).map(lambda depth: "[" * depth + "]" * depth),
    st.integers(59, 64).map(lambda depth: '{"k":[' * depth + "]}" * depth),
    st.just("[" * 3000 + "]" * 3000),
)
json_values = st.one_of(
    scalar_tokens,
    nested_tokens,
    st.recursive(
        scalar_tokens,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
            st.lists(st.tuples(string_tokens, inner), max_size=3).map(
                lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"
            ),
        ),
        max_leaves=6,
    ),
)
dims = st.sampled_from([0, 1, 2, 3, 4] * 8 + BIG_DIMS)
odd_dtypes = st.one_of(
    st.sampled_from(CODES + ["Q7", "f32", "F32 ", ""]).map(json.dumps),
    st.sampled_from(CODES).map(lambda code: f'{{"{code}":null}}'),
    st.sampled_from(['{"F32":{}}', '{"F32":1}', '{"F32":null,"F16":null}', "{}", '["F32"]']),
    json_values,
)
odd_lists = st.one_of(
    st.lists(dims, max_size=3).map(json.dumps),
    st.lists(scalar_tokens, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
    json_values,
)


# --------------------------------------------------------------------------------------------
# Files: a valid layout, respelled in ways the library accepts, then perhaps broken


@dataclass
class Draft:
    """A safetensors file under construction. An entry is [name, fields] (fields: [[key, raw JSON]])
    or [name, raw JSON] for an entry that is not an object."""

    entries: list[list]
    data: bytes
    metadata: list[str] = field(default_factory=list)  # raw JSON of each __metadata__ key
    lead: str = ""
    trail: str = ""
    ascii_names: bool = True
    length: int | None = None  # the header length written, when not the true one

    def to_bytes(self) -> bytes:
        items = [f'"__metadata__":{m}' for m in self.metadata]
        for name, fields in self.entries:
            body = fields if isinstance(fields, str) else "{" + ",".join(f'"{k}":{v}' for k, v in fields) + "}"
            items.append(f"{json.dumps(name, ensure_ascii=self.ascii_names)}:{body}")
        text = self.lead + "{" + ",".join(items) + "}" + self.trail
        header = text.encode("utf-8", "surrogatepass")  # a lone surrogate character: invalid UTF-8
        length = len(header) if self.length is None else self.length
        return struct.pack("<Q", length % 2**64) + header + self.data


def bit_size(code: str, shape: list[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count * ST_DTYPES[code][1]


@st.composite
def valid_drafts(draw) -> Draft:
    specs = draw(
        st.lists(
            st.tuples(st.text(max_size=4), st.sampled_from(CODES), st.lists(dims, max_size=3)),
            max_size=4,
            unique_by=lambda spec: spec[0],
        )
    )
    offsets, position = {}, 0
    for i in draw(st.permutations(range(len(specs)))):
        size = bit_size(specs[i][1], specs[i][2]) // 8
        offsets[i], position = [position, position + size], position + size
    data = draw(st.binary(min_size=position, max_size=position)) if position <= MAX_DATA else b"\0" * 16
    entries = [
        [name, [["dtype", json.dumps(code)], ["shape", json.dumps(shape)], ["data_offsets", json.dumps(offsets[i])]]]
        for i, (name, code, shape) in enumerate(specs)
    ]
    metadata = draw(
        st.lists(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3).map(json.dumps), max_size=1)
    )
    return Draft(entries, data, metadata)


def _object_entry(draw, draft: Draft) -> list | None:
    objects = [e for e in draft.entries if not isinstance(e[1], str)]
    return draw(st.sampled_from(objects)) if objects else None


def _field(draw, draft: Draft, key: str) -> list | None:
    entry = _object_entry(draw, draft)
    fields = [f for f in entry[1] if f[0] == key] if entry else []
    return fields[0] if fields else None


def dtype_as_variant_map(draw, draft: Draft) -> None:
    dtype = _field(draw, draft, "dtype")
    if dtype is not None:
        dtype[1] = f"{{{dtype[1]}:null}}"


def entry_as_list(draw, draft: Draft) -> None:
    entry = _object_entry(draw, draft)
    if entry is not None:
        fields = dict(entry[1])
        entry[1] = "[" + ",".join(fields[k] for k in ("dtype", "shape", "data_offsets")) + "]"


def extra_field(draw, draft: Draft) -> None:
    entry = _object_entry(draw, draft)
    if entry is not None:
        value = draw(st.one_of(number_tokens, nested_tokens, json_values))
        entry[1].insert(draw(st.integers(0, len(entry[1]))), [draw(st.sampled_from(["x", "dtypes", ""])), value])


def reorder_fields(draw, draft: Draft) -> None:
    entry = _object_entry(draw, draft)
    if entry is not None:
        entry[1][:] = draw(st.permutations(entry[1]))


def respell_header(draw, draft: Draft) -> None:
    space = st.sampled_from(["", " ", "\t\n\r "])
    draft.lead, draft.trail, draft.ascii_names = draw(space), draw(space), draw(st.booleans())
    draft.metadata = draw(st.lists(st.sampled_from(["null", "{}", '{"format":"pt","format":"np"}']), max_size=1))


RESPELLINGS = [dtype_as_variant_map, entry_as_list, extra_field, reorder_fields, respell_header]


def shift_offsets(draw, draft: Draft) -> None:
    offsets = _field(draw, draft, "data_offsets")
    try:
        begin, end = json.loads(offsets[1])
    except (TypeError, ValueError, RecursionError):
        return  # no entry, or its offsets were replaced by another mutation
    offsets[1] = json.dumps([max(0, begin + draw(st.integers(-2, 2))), max(0, end + draw(st.integers(-2, 2)))])


def edit_data(draw, draft: Draft) -> None:
    at = draw(st.integers(0, len(draft.data)))
    cut = draw(st.integers(0, 8))
    draft.data = draft.data[:at] + draw(st.binary(max_size=8)) + draft.data[at + cut :]


def set_field(draw, draft: Draft) -> None:
    key, values = draw(st.sampled_from([("dtype", odd_dtypes), ("shape", odd_lists), ("data_offsets", odd_lists)]))
    target = _field(draw, draft, key)
    if target is not None:
        target[1] = draw(values)


def drop_or_repeat_field(draw, draft: Draft) -> None:
    entry = _object_entry(draw, draft)
    if entry is not None and entry[1]:
        fields = entry[1]
        if draw(st.booleans()):
            fields.pop(draw(st.integers(0, len(fields) - 1)))
        else:
            fields.append(list(draw(st.sampled_from(fields))))


def junk_entry(draw, draft: Draft) -> None:
    entry = _object_entry(draw, draft)
    if entry is not None:
        entry[1] = draw(st.one_of(json_values, st.just('["F32",[1],[0,4],1]')))


def repeat_name(draw, draft: Draft) -> None:
    if draft.entries:
        name = draw(st.sampled_from(draft.entries))[0]
        copy = [name, draw(st.sampled_from(draft.entries))[1]]
        draft.entries.insert(draw(st.integers(0, len(draft.entries))), copy)


def odd_metadata(draw, draft: Draft) -> None:
    odd = st.one_of(json_values, st.sampled_from(['{"format":1,"format":"pt"}', '{"a":null}', '{"a":["b"]}']))
    draft.metadata = draw(st.lists(odd, min_size=1, max_size=2))


def junk_around_header(draw, draft: Draft) -> None:
    junk = st.sampled_from(["", " ", "\ufeff", "\x0c", "\x00", "x", "\u00a0", "\ud800"])
    draft.lead, draft.trail = draw(junk), draw(junk)


def wrong_length(draw, draft: Draft) -> None:
    true_length = len(draft.to_bytes()) - 8 - len(draft.data)
    draft.length = draw(
        st.one_of(
            st.integers(-3, 3).map(lambda d: max(0, true_length + d)),
            st.sampled_from([0, 100_000_000, 100_000_001, 2**63, 2**64 - 1]),
        )
    )


BREAKAGES = [
    shift_offsets,
    edit_data,
    set_field,
    drop_or_repeat_field,
    junk_entry,
    repeat_name,
    odd_metadata,
    junk_around_header,
    wrong_length,
]


@st.composite
def safetensors_files(draw) -> bytes:
    draft = draw(valid_drafts())
    for mutate in draw(st.lists(st.sampled_from(RESPELLINGS), max_size=3)):
        mutate(draw, draft)
    for mutate in draw(st.lists(st.sampled_from(BREAKAGES), max_size=2)):
        mutate(draw, draft)
    return draft.to_bytes()


# --------------------------------------------------------------------------------------------
# The differential fuzz tests


@settings(max_examples=3000, **FUZZ)
@given(raw=safetensors_files())
def test_eaglezoo_reads_exactly_what_the_library_loads(raw, scratch):
    assert_same_verdict(raw, scratch)


borderline_numbers = st.one_of(
    number_tokens,
    st.builds(
        lambda sign, whole, fraction, exp: f"{sign}{whole}{fraction}{exp}",
        st.sampled_from(["", "-"]),
        st.integers(0, 2**70).map(str),
        st.one_of(st.just(""), st.integers(0, 10**30).map(lambda f: f".{f}")),
        st.one_of(st.just(""), st.integers(-340, 340).map(lambda e: f"e{e}")),
    ),
)


@settings(max_examples=2000, **FUZZ)
@given(number=borderline_numbers)
def test_numbers_as_serde_json_reads_them(number, scratch):
    assert_same_verdict(one(extra=',"x":' + number), scratch)


@settings(max_examples=500, **FUZZ)
@given(
    raw=st.one_of(
        st.binary(max_size=40),
        st.builds(lambda n, rest: struct.pack("<Q", n) + rest, st.integers(0, 48), st.binary(max_size=48)),
    )
)
def test_arbitrary_bytes(raw, scratch):
    assert_same_verdict(raw, scratch)


tensor_specs = st.lists(
    st.tuples(st.text(max_size=6), st.sampled_from(CODES), st.lists(st.integers(0, 4), max_size=3)),
    max_size=5,
    unique_by=lambda spec: spec[0],
)


@settings(max_examples=300, **FUZZ)
@given(specs=tensor_specs, metadata=st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3))
def test_the_writer_emits_headers_both_readers_accept(specs, metadata, scratch):
    whole = [(name, code, tuple(shape)) for name, code, shape in specs if bit_size(code, shape) % 8 == 0]
    tensors = [OutTensor(name, TensorRef(name, code, shape, Path("source")), code) for name, code, shape in whole]
    raw = safetensors_header(tensors, metadata) + bytes(sum(t.nbytes for t in tensors))
    header = read_safetensors_header(lambda start, end: raw[start:end], len(raw), Path("out.safetensors"))
    assert {n: (r.dtype, r.shape) for n, r in header.refs.items()} == {n: (c, s) for n, c, s in whole}
    assert header.metadata == metadata
    path = scratch / "written.safetensors"
    path.write_bytes(raw)
    with safe_open(str(path), framework="pt") as f:
        assert set(f.keys()) == set(header.refs) and (f.metadata() or {}) == metadata
