"""Both safetensors readers, the safetensors library's and eaglezoo's, side by side, and builders of
small safetensors files, for tests/unit/checkpoint/test_safetensors_rules.py and test_safetensors_fuzz.py."""

from __future__ import annotations

import itertools
import json
import struct
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from eaglezoo.checkpoint.st_header import read_safetensors_header
from eaglezoo.checkpoint.tensors import tensor_from_bytes
from eaglezoo.errors import BadInput

_names = itertools.count()


def _summary(t: torch.Tensor) -> tuple:
    return str(t.dtype), tuple(t.shape), t.reshape(-1).view(torch.uint8).numpy().tobytes()


def library_reads(raw: bytes, scratch: Path):
    """("refused" | "unloadable" | (metadata, {name: summary})) as the safetensors library reads `raw`."""
    path = scratch / f"{next(_names)}.safetensors"
    path.write_bytes(raw)
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            try:
                return metadata, {name: _summary(f.get_tensor(name)) for name in f.keys()}  # noqa: SIM118 - a safe_open handle: keys() is its API, not a dict's
            except (SafetensorError, TypeError, RuntimeError):  # dtypes, shapes or strides torch cannot hold
                return "unloadable"
    except SafetensorError:
        return "refused"
    finally:
        path.unlink()


def eaglezoo_reads(raw: bytes):
    try:
        header = read_safetensors_header(lambda start, end: raw[start:end], len(raw), Path("model.safetensors"))
    except BadInput:
        return "refused"
    try:
        return header.metadata, {
            name: _summary(tensor_from_bytes(ref, bytearray(raw[ref.start : ref.end])))
            for name, ref in header.refs.items()
        }
    except BadInput:
        return "unloadable"


def repeats_a_tensor_name(raw: bytes) -> bool:
    try:
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8 : 8 + n].decode("utf-8"), object_pairs_hook=tuple)
    except (ValueError, RecursionError, struct.error):
        return False
    names = [key for key, _ in header if key != "__metadata__"] if isinstance(header, tuple) else []
    return len(names) != len(set(names))


def assert_same_verdict(raw: bytes, scratch: Path) -> None:
    expected = "refused" if repeats_a_tensor_name(raw) else library_reads(raw, scratch)
    assert eaglezoo_reads(raw) == expected


def sf(header: str, data: bytes = b"", length: int | None = None) -> bytes:
    raw = header.encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def entry(dtype: str = '"F32"', shape: str = "[1]", offsets: str = "[0,4]", extra: str = "") -> str:
    return '{"dtype":' + dtype + ',"shape":' + shape + ',"data_offsets":' + offsets + extra + "}"


def header_of(**entries: str) -> str:
    return "{" + ",".join(f'"{name}":{text}' for name, text in entries.items()) + "}"


def one(data: bytes = b"\0" * 4, **fields: str) -> bytes:
    """A file of one tensor "a": F32 [1] at [0, 4] unless `fields` says otherwise."""
    return sf(header_of(a=entry(**fields)), data)


def nested(depth: int) -> str:
    return ',"x":' + "[" * depth + "]" * depth
