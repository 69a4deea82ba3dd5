"""The rules by which the safetensors library (0.8.0) reads a file, found by feeding it crafted
files: one example each, read by the library and by eaglezoo, which must agree. Plus the
messages eaglezoo refuses with: one line naming the file and the tensor."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.safetensors_readers import eaglezoo_reads, entry, header_of, library_reads, nested, one, sf

from eaglezoo.checkpoint.st_header import read_safetensors_header
from eaglezoo.checkpoint.tensors import tensor_from_bytes
from eaglezoo.errors import BadInput


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("library")


SCALES = [("F8_E8M0", 8), ("F8_E4M3FNUZ", 8), ("C64", 1), ("U64", 1)]  # (code, elements in 8 bytes)
RULES = {
    # accepted spellings
    "whitespace around the JSON": ("loads", sf(" \t\n\r" + header_of(a=entry()) + "\r\n ", b"\0" * 4)),
    "no tensors": ("loads", sf("{}")),
    "__metadata__ null": ("loads", sf('{"__metadata__":null}')),
    "__metadata__ key repeated: the last counts": ("loads", sf('{"__metadata__":{"f":"1","f":"2"}}')),
    "__metadata__ spelled with escapes": ("loads", sf('{"\\u005f_metadata__":{"f":"pt"}}')),
    "an entry as [dtype, shape, data_offsets]": ("loads", sf('{"a":["F32",[1],[0,4]]}', b"\0" * 4)),
    'dtype as {"F32": null}': ("loads", one(dtype='{"F32":null}')),
    "unknown entry fields ignored, even repeated": ("loads", one(extra=',"x":1,"x":[{}]')),
    "scalar": ("loads", one(shape="[]")),
    "empty tensors share an offset": (
        "loads",
        sf(
            header_of(a=entry(shape="[0]", offsets="[0,0]"), b=entry(shape="[0,3]", offsets="[0,0]"), c=entry()),
            b"\0" * 4,
        ),
    ),
    "dims past int64 with no elements, where torch can shape them": (
        "loads",
        one(b"", shape=f"[0,{2**63 - 1},{2**63 - 1}]", offsets="[0,0]"),
    ),
    "F4: two values a byte": ("loads", one(b"\0" * 3, dtype='"F4"', shape="[3,2]", offsets="[0,3]")),
    "F8_E8M0, FNUZ, C64, U64": (
        "loads",
        sf(
            header_of(
                **{
                    code: entry(dtype=f'"{code}"', shape=f"[{count}]", offsets=f"[{8 * i},{8 * i + 8}]")
                    for i, (code, count) in enumerate(SCALES)
                }
            ),
            b"\0" * 32,
        ),
    ),
    "a surrogate pair escape": ("loads", sf('{"__metadata__":{"f":"\\ud83d\\ude00"}}')),
    "127 levels of nesting": ("loads", one(extra=nested(125))),
    "a number that underflows": ("loads", one(extra=',"x":1e-400')),
    # the prefix
    "fewer than 8 bytes": ("refused", b"\x02\0\0\0"),
    "header length 0": ("refused", sf("", length=0)),
    "header length over 100,000,000": ("refused", sf("{}", length=100_000_001)),
    "header length past the end": ("refused", sf("{}", length=3)),
    # the JSON, as serde_json reads it
    "not UTF-8": ("refused", sf('{"\ud800":1}')),
    "a UTF-8 byte order mark": ("refused", sf("\ufeff{}")),
    "form feed is not JSON whitespace": ("refused", sf("\x0c{}")),
    "bytes after the JSON": ("refused", sf("{}\0")),
    "a top-level array": ("refused", sf("[]")),
    "NaN": ("refused", one(extra=',"x":NaN')),
    "a double that serde_json rounds to infinity": ("refused", one(extra=',"x":1.7976931348623158e308')),
    "a lone surrogate escape": ("refused", sf('{"__metadata__":{"f":"\\ud800"}}')),
    "a raw control character": ("refused", sf('{"__metadata__":{"f":"\x01"}}')),
    "128 levels of nesting": ("refused", one(extra=nested(126))),
    "3000 levels of nesting": ("refused", sf("[" * 3000 + "]" * 3000)),
    # the entries
    "__metadata__ twice": ("refused", sf('{"__metadata__":{},"__metadata__":{}}')),
    "__metadata__ value not a string": ("refused", sf('{"__metadata__":{"format":1}}')),
    "__metadata__ a list": ("refused", sf('{"__metadata__":[]}')),
    "a known field twice": ("refused", one(extra=',"dtype":"F32"')),
    "a missing field": ("refused", sf('{"a":{"dtype":"F32","data_offsets":[0,4]}}', b"\0" * 4)),
    "an unknown dtype": ("refused", one(dtype='"f32"')),
    'dtype as {"F32": {}}': ("refused", one(dtype='{"F32":{}}')),
    "shape [-1]": ("refused", one(shape="[-1]")),
    "shape [1.0]": ("refused", one(shape="[1.0]")),
    "shape [-0]": ("refused", one(b"", shape="[-0]", offsets="[0,0]")),
    "shape [2**64, 0]": ("refused", one(b"", shape=f"[{2**64},0]", offsets="[0,0]")),
    "shape [true]": ("refused", one(shape="[true]")),
    "three data_offsets": ("refused", one(offsets="[0,4,4]")),
    "an entry list of four": ("refused", sf('{"a":["F32",[1],[0,4],1]}', b"\0" * 4)),
    # the layout
    "a gap before the first tensor": ("refused", one(b"\0" * 8, offsets="[4,8]")),
    "a gap between tensors": ("refused", sf(header_of(a=entry(), b=entry(offsets="[8,12]")), b"\0" * 12)),
    "overlapping tensors": ("refused", sf(header_of(a=entry(), b=entry()), b"\0" * 4)),
    "trailing bytes": ("refused", one(b"\0" * 5)),
    "truncated data": ("refused", one(b"\0" * 3)),
    "offsets that end before they begin": ("refused", one(offsets="[4,0]")),
    "bytes that do not match the shape": ("refused", one(shape="[2]")),
    "an element count past 64 bits before a zero": ("refused", one(b"", shape=f"[{2**32},{2**32},0]", offsets="[0,0]")),
    "a bit count past 64 bits": ("refused", one(b"", shape=f"[{2**62}]", offsets="[0,0]")),
    "a sub-byte dtype that does not fill whole bytes": (
        "refused",
        one(b"\0", dtype='"F4"', shape="[3]", offsets="[0,1]"),
    ),
    # tensors torch cannot hold: the header reads, the tensor does not
    "F6 (torch has no such dtype)": ("unloadable", one(b"\0" * 3, dtype='"F6_E2M3"', shape="[4]", offsets="[0,3]")),
    "F4 with an odd last dimension": ("unloadable", one(b"\0" * 3, dtype='"F4"', shape="[2,3]", offsets="[0,3]")),
    "a dimension past int64": ("unloadable", one(b"", shape=f"[{2**63},0]", offsets="[0,0]")),
}


@pytest.mark.parametrize("rule", RULES)
def test_library_rule(rule, scratch):
    verdict, raw = RULES[rule]
    library = library_reads(raw, scratch)
    assert (library if isinstance(library, str) else "loads") == verdict
    assert eaglezoo_reads(raw) == library


def test_a_repeated_tensor_name_is_refused_though_the_library_keeps_the_last(scratch):
    raw = sf('{"a":' + entry() + ',"a":' + entry() + "}", b"\0" * 4)
    assert library_reads(raw, scratch) != "refused"
    assert eaglezoo_reads(raw) == "refused"


MESSAGES = [
    (
        sf(header_of(a=entry(offsets="[0,4]"), b=entry(offsets="[16,20]")), b"\0" * 20),
        "model.safetensors: tensors 'a' and 'b' leave a gap of 12 bytes at offset 4",
    ),
    (one(b"\0" * 11), "model.safetensors: 7 trailing bytes after the last tensor"),
    (sf('{"x":' + entry() + ',"x":' + entry() + "}", b"\0" * 4), "model.safetensors: tensor name 'x' appears twice"),
    (sf('{"__metadata__":{"format":1}}'), "model.safetensors: __metadata__ value for 'format' is not a string"),
    (
        sf("[" * 3000 + "]" * 3000),
        "model.safetensors: safetensors header is not valid JSON (nested deeper than 127 levels)",
    ),
    (
        one(dtype='"F6_E3M2"', shape="[4]", offsets="[0,3]", data=b"\0" * 3),
        "model.safetensors: tensor 'a' is F6_E3M2, which torch has no dtype for",
    ),
    (
        one(dtype='"BF16"', shape=f"[0,2,{2**62}]", offsets="[0,0]", data=b""),  # empty, but its strides overflow
        f"model.safetensors: tensor 'a' has shape [0, 2, {2**62}], whose strides torch cannot lay out",
    ),
]


@pytest.mark.parametrize("raw,message", MESSAGES)
def test_refusals_name_the_file_and_the_tensor(raw, message):
    with pytest.raises(BadInput) as refused:
        header = read_safetensors_header(lambda start, end: raw[start:end], len(raw), Path("model.safetensors"))
        for ref in header.refs.values():
            tensor_from_bytes(ref, bytearray(raw[ref.start : ref.end]))
    assert str(refused.value) == message
