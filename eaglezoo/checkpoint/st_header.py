"""safetensors headers, read exactly as strictly as the safetensors library reads them (0.8), but
with a one-line reason that names the file and the tensor for every refusal.

One deliberate difference: a tensor name that appears twice is refused. The library keeps the
last entry, so a file that it loads could mean other tensors to a reader that keeps the first.
The same reader serves local files and remote ones (HTTP range requests): it is given a
`read(start, end)` function and the file's size.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

from ..errors import BadInput
from . import st_json
from .st_json import U64_MAX, JsonError, JsonObject


class Malformed(BadInput):
    """A safetensors file the library itself refuses to load: damaged, cut short or not written by it."""

    def __init__(self, message: str):
        super().__init__(
            message,
            hint="the file is damaged or was not written by a safetensors writer: download it "
            "again, or re-export the weights with safetensors.torch.save_file",
        )


MAX_HEADER = 100_000_000  # the library's limit on the JSON header's length

# safetensors dtype code -> (its name, as torch spells it where torch has it; bits per element)
ST_DTYPES: dict[str, tuple[str, int]] = {
    "F64": ("float64", 64),
    "F32": ("float32", 32),
    "F16": ("float16", 16),
    "BF16": ("bfloat16", 16),
    "C64": ("complex64", 64),
    "I64": ("int64", 64),
    "I32": ("int32", 32),
    "I16": ("int16", 16),
    "I8": ("int8", 8),
    "U64": ("uint64", 64),
    "U32": ("uint32", 32),
    "U16": ("uint16", 16),
    "U8": ("uint8", 8),
    "BOOL": ("bool", 8),
    "F8_E4M3": ("float8_e4m3fn", 8),
    "F8_E5M2": ("float8_e5m2", 8),
    "F8_E8M0": ("float8_e8m0fnu", 8),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", 8),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", 8),
    "F6_E2M3": ("float6_e2m3fn", 6),
    "F6_E3M2": ("float6_e3m2fn", 6),
    "F4": ("float4_e2m1fn_x2", 4),  # torch packs two values in each element
}
FLOAT_CODES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}
COMPLEX_CODES = {"C64"}
ENTRY_FIELDS = ("dtype", "shape", "data_offsets")


@dataclass(frozen=True)
class TensorRef:
    """Where one tensor's bytes live. `start`/`end` are absolute file offsets (safetensors only)."""

    name: str
    dtype: str  # safetensors code
    shape: tuple[int, ...]
    file: Path
    start: int = -1
    end: int = -1

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ST_DTYPES[self.dtype][1] // 8

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_CODES


@dataclass(frozen=True)
class SafetensorsHeader:
    length: int  # of the JSON text; the data section starts at 8 + length
    metadata: dict[str, str]
    refs: dict[str, TensorRef]


class _Entry(NamedTuple):
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # offsets within the data section
    end: int


def read_safetensors_header(read: Callable[[int, int], bytes], file_size: int, file: Path) -> SafetensorsHeader:
    """Read and validate the header of the safetensors file `file` of `file_size` bytes, fetching
    bytes [start, end) with `read`. Raises BadInput with the reason for any file the library refuses."""
    where = file.name
    if file_size < 8:
        raise Malformed(f"{where}: truncated safetensors file ({file_size} bytes, no header length)")
    n = _header_length(read(0, 8), file_size, where)
    raw = read(8, 8 + n) if n else b""
    if len(raw) != n:
        raise Malformed(f"{where}: truncated safetensors header ({len(raw)} of {n} bytes read)")
    metadata, entries = _decode(raw, where)
    _check_layout(entries, file_size - 8 - n, where)
    refs = {e.name: TensorRef(e.name, e.dtype, e.shape, file, 8 + n + e.begin, 8 + n + e.end) for e in entries}
    return SafetensorsHeader(n, metadata, refs)


def _header_length(prefix: bytes, file_size: int, where: str) -> int:
    if len(prefix) != 8:
        raise Malformed(f"{where}: truncated safetensors file (no header length)")
    (n,) = struct.unpack("<Q", prefix)
    if n > MAX_HEADER:
        raise Malformed(f"{where}: header length {n} exceeds the safetensors limit of {MAX_HEADER} bytes")
    if n > file_size - 8:
        raise Malformed(f"{where}: header length {n} is beyond the end of the file ({file_size} bytes)")
    return n


def _decode(raw: bytes, where: str) -> tuple[dict[str, str], list[_Entry]]:
    try:
        header = st_json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise Malformed(f"{where}: safetensors header is not valid UTF-8") from None
    except JsonError as exc:
        raise Malformed(f"{where}: safetensors header is not valid JSON ({exc})") from None
    if not isinstance(header, JsonObject):
        raise Malformed(f"{where}: safetensors header is not a JSON object")
    metadata: dict[str, str] | None = None
    entries: dict[str, _Entry] = {}
    for key, value in header:
        if key == "__metadata__":
            if metadata is not None:
                raise Malformed(f"{where}: __metadata__ appears twice")
            metadata = _metadata(value, where)
        elif key in entries:
            raise Malformed(f"{where}: tensor name {key!r} appears twice")
        else:
            entries[key] = _entry(key, value, where)
    return metadata or {}, list(entries.values())


def _metadata(value, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, JsonObject):
        raise Malformed(f"{where}: __metadata__ is not a map of strings")
    for key, item in value:
        if not isinstance(item, str):
            raise Malformed(f"{where}: __metadata__ value for {key!r} is not a string")
    return dict(value)  # a repeated key: the last value counts, as in the library


def _entry(name: str, value, where: str) -> _Entry:
    dtype, shape, offsets = _entry_fields(name, value, where)
    if isinstance(dtype, JsonObject) and len(dtype) == 1 and dtype[0][1] is None:
        dtype = dtype[0][0]  # serde also reads an enum variant written as {"F16": null}
    if not isinstance(dtype, str):
        raise Malformed(f"{where}: tensor {name!r} has a malformed dtype")
    if dtype not in ST_DTYPES:
        raise Malformed(f"{where}: tensor {name!r} has unknown dtype {dtype!r}")
    if not _unsigned_list(shape):
        raise Malformed(f"{where}: tensor {name!r} has a malformed shape (not a list of non-negative integers)")
    if not _unsigned_list(offsets) or len(offsets) != 2:
        raise Malformed(f"{where}: tensor {name!r} has malformed data_offsets (not two non-negative integers)")
    return _Entry(name, dtype, tuple(shape), offsets[0], offsets[1])


def _entry_fields(name: str, value, where: str) -> list:
    """[dtype, shape, data_offsets] from an entry: an object (other keys are ignored, as serde
    does) or, as serde also accepts for a struct, a list of exactly those three."""
    if isinstance(value, list):
        if len(value) != 3:
            raise Malformed(f"{where}: tensor {name!r} has a malformed header entry (a list, but not of 3 items)")
        return value
    if not isinstance(value, JsonObject):
        raise Malformed(f"{where}: tensor {name!r} has a malformed header entry (not an object)")
    keys = [key for key, _ in value]
    for field in ENTRY_FIELDS:
        if keys.count(field) != 1:
            raise Malformed(f"{where}: tensor {name!r} has {'no' if field not in keys else 'more than one'} {field}")
    fields = dict(pair for pair in value if pair[0] in ENTRY_FIELDS)
    return [fields[field] for field in ENTRY_FIELDS]


def _unsigned_list(value) -> bool:
    return isinstance(value, list) and all(type(v) is int and 0 <= v <= U64_MAX for v in value)


def _check_layout(entries: list[_Entry], data_size: int, where: str) -> None:
    """Each tensor's bytes fit its shape and dtype, and the tensors tile the data section exactly:
    in offset order, each starts where the previous ended, the first at 0, the last at the end."""
    for e in entries:
        _check_extent(e, data_size, where)
    offset, previous = 0, None
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        if e.begin > offset and previous is None:
            raise Malformed(f"{where}: a gap of {_bytes(e.begin)} at offset 0, before tensor {e.name!r}")
        if e.begin > offset:
            raise Malformed(
                f"{where}: tensors {previous.name!r} and {e.name!r} leave a gap of "
                f"{_bytes(e.begin - offset)} at offset {offset}"
            )
        if e.begin < offset:
            raise Malformed(f"{where}: tensors {previous.name!r} and {e.name!r} have overlapping byte ranges")
        offset, previous = e.end, e
    if offset < data_size:
        after = "the last tensor" if entries else "the header"
        extra = data_size - offset
        raise Malformed(f"{where}: {extra} trailing {'byte' if extra == 1 else 'bytes'} after {after}")


def _check_extent(e: _Entry, data_size: int, where: str) -> None:
    if e.end < e.begin:
        raise Malformed(f"{where}: tensor {e.name!r} data_offsets [{e.begin}, {e.end}] end before they begin")
    if e.end > data_size:
        raise Malformed(
            f"{where}: tensor {e.name!r} offsets [{e.begin}, {e.end}] are out of bounds "
            f"(data section is {data_size} bytes; truncated file?)"
        )
    size = _byte_size(e, where)
    if e.end - e.begin != size:
        raise Malformed(
            f"{where}: tensor {e.name!r} holds {e.end - e.begin} bytes, but shape {list(e.shape)} "
            f"of {e.dtype} needs {size}"
        )


def _byte_size(e: _Entry, where: str) -> int:
    """As the library computes it: the element count (dimension by dimension) and the bit count
    must fit 64 bits, and sub-byte dtypes must fill whole bytes."""
    what = f"{where}: tensor {e.name!r} of shape {list(e.shape)} and dtype {e.dtype}"
    count = 1
    for dim in e.shape:
        count *= dim
        if count > U64_MAX:
            raise Malformed(f"{what} has too many elements (their count overflows 64 bits)")
    bits = count * ST_DTYPES[e.dtype][1]
    if bits > U64_MAX:
        raise Malformed(f"{what} is too large (its size in bits overflows 64 bits)")
    if bits % 8:
        raise Malformed(f"{what} is not a whole number of bytes ({bits} bits)")
    return bits // 8


def _bytes(n: int) -> str:
    return "1 byte" if n == 1 else f"{n} bytes"
