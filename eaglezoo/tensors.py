"""Checkpoint files: strict safetensors header parsing, `.bin` (weights_only), sharded indexes,
and a streaming writer that copies byte ranges and hashes in the same pass.

Headers are parsed here rather than by the safetensors library so that every malformed file gets
a precise one-line error, and so that remote lint can validate a header fetched by range request.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from typing import TYPE_CHECKING

from .errors import BadInput
from .fsutil import child_path, regular_file

if TYPE_CHECKING:
    import torch

# safetensors dtype code -> (torch dtype name, bytes per element). torch is imported only when a
# tensor is materialised: copying safetensors bytes needs none of it (and it costs a second to load).
DTYPE_NAMES: dict[str, tuple[str, int]] = {
    "F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
    "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1), "U8": ("uint8", 1),
    "BOOL": ("bool", 1), "F8_E4M3": ("float8_e4m3fn", 1), "F8_E5M2": ("float8_e5m2", 1),
    "U16": ("uint16", 2), "U32": ("uint32", 4), "U64": ("uint64", 8),
}


class _TorchDtypes(dict):
    """DTYPES[code] -> (torch.dtype, itemsize), resolved on first use."""

    def __missing__(self, code):
        import torch
        name, size = DTYPE_NAMES[code]
        self[code] = (getattr(torch, name), size)
        return self[code]

    def __contains__(self, code):
        return code in DTYPE_NAMES


DTYPES = _TorchDtypes()


def code_of(dtype) -> str | None:
    return next((code for code, (name, _) in DTYPE_NAMES.items() if str(dtype) == f"torch.{name}"), None)
FLOAT_CODES = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}
MAX_HEADER = 100 * 1024 * 1024
CHUNK = 16 * 1024 * 1024


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
        return math.prod(self.shape) * DTYPE_NAMES[self.dtype][1]

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_CODES


def parse_header(raw: bytes, file_size: int, where: str) -> tuple[int, dict, dict[str, dict]]:
    """Validate a safetensors prefix. `raw` holds at least the first 8 bytes (and the header, if
    available). Returns (header_length, metadata, entries). Raises BadInput with the reason."""
    if file_size < 8 or len(raw) < 8:
        raise BadInput(f"{where}: truncated safetensors file ({file_size} bytes, no header length)")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > file_size - 8:
        raise BadInput(f"{where}: header length {n} is beyond the end of the file ({file_size} bytes)")
    if n > MAX_HEADER:
        raise BadInput(f"{where}: header length {n} is implausibly large")
    if len(raw) < 8 + n:
        raise ValueError("need more bytes")  # callers reading remotely fetch the rest and retry
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadInput(f"{where}: safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise BadInput(f"{where}: safetensors header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    data_size = file_size - 8 - n
    spans = []
    for name, e in header.items():
        if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= e.keys():
            raise BadInput(f"{where}: tensor {name!r} has a malformed header entry")
        if e["dtype"] not in DTYPE_NAMES:
            raise BadInput(f"{where}: tensor {name!r} has unknown dtype {e['dtype']!r}")
        shape, offs = e["shape"], e["data_offsets"]
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) for o in offs)):
            raise BadInput(f"{where}: tensor {name!r} has a malformed shape or data_offsets")
        begin, end = offs
        if not 0 <= begin <= end or end > data_size:
            raise BadInput(f"{where}: tensor {name!r} offsets [{begin}, {end}] are out of bounds "
                           f"(data section is {data_size} bytes; truncated file?)")
        if end - begin != math.prod(shape) * DTYPE_NAMES[e["dtype"]][1]:
            raise BadInput(f"{where}: tensor {name!r} byte size {end - begin} does not match "
                           f"shape {shape} of {e['dtype']}")
        spans.append((begin, end, name))
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise BadInput(f"{where}: tensors {n0!r} and {n1!r} have overlapping byte ranges")
    return n, metadata, header


def read_safetensors_refs(path: Path) -> tuple[dict[str, TensorRef], dict]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) == 8:
            (n,) = struct.unpack("<Q", head)
            if n <= min(size - 8, MAX_HEADER):
                head += f.read(n)
    n, metadata, entries = parse_header(head, size, path.name)
    base = 8 + n
    refs = {name: TensorRef(name, e["dtype"], tuple(e["shape"]), path, base + e["data_offsets"][0],
                            base + e["data_offsets"][1]) for name, e in entries.items()}
    return refs, metadata


def load_bin(path: Path) -> dict[str, "torch.Tensor"]:
    """A pickled state dict, loaded with weights_only=True (memory-mapped when possible)."""
    import torch

    try:
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:  # legacy (non-zip) pickles cannot be memory-mapped
            if "mmap" not in str(exc):
                raise
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is bad input
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"{path.name}: not a loadable tensor file with weights_only=True ({first[:160]})") from None
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                            for k, v in obj.items()):
        raise BadInput(f"{path.name}: does not hold a name -> tensor mapping")
    return obj


class Checkpoint:
    """All tensors of a drafter directory, by name, without loading their data."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.refs: dict[str, TensorRef] = {}
        self.metadata: dict[str, str] = {}
        self._bin: dict[str, "torch.Tensor"] = {}
        self.files = self._discover()
        for f in self.files:
            if f.suffix == ".safetensors":
                refs, meta = read_safetensors_refs(f)
                self.metadata.update(meta)
            else:
                tensors = load_bin(f)
                self._bin.update(tensors)
                refs = {n: TensorRef(n, _code(t.dtype, f), tuple(t.shape), f) for n, t in tensors.items()}
            dup = refs.keys() & self.refs.keys()
            if dup:
                raise BadInput(f"tensor {sorted(dup)[0]!r} appears in more than one weight file")
            self.refs.update(refs)

    def _discover(self) -> list[Path]:
        d = self.dir
        for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
            if (d / index_name).exists():
                return self._from_index(regular_file(d / index_name, "weights index"))
        for single in ("model.safetensors", "pytorch_model.bin"):
            if (d / single).exists():
                return [regular_file(d / single, "weights")]
        found = sorted(d.glob("*.safetensors"))
        if len(found) == 1:
            return [regular_file(found[0], "weights")]
        raise BadInput(f"{d}: no weights found (expected model.safetensors, pytorch_model.bin or a "
                       f"*.index.json)" if not found else f"{d}: several .safetensors files and no index")

    def _from_index(self, index: Path) -> list[Path]:
        try:
            weight_map = json.loads(index.read_bytes().decode("utf-8"))["weight_map"]
            files = sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise BadInput(f"{index.name}: malformed index (needs a weight_map object of shard names)") from None
        paths = []
        for name in files:
            path = child_path(self.dir, name, f"{index.name}: shard")
            if not path.exists():
                raise BadInput(f"{index.name}: shard {name!r} is missing")
            paths.append(regular_file(path, f"{index.name}: shard"))
        self._index_map = weight_map
        return paths

    def check_index(self) -> None:
        weight_map = getattr(self, "_index_map", None)
        if weight_map is None:
            return
        for name, file in weight_map.items():
            ref = self.refs.get(name)
            if ref is None or ref.file.name != file:
                raise BadInput(f"index lists {name!r} in {file}, but it is not there")
        extra = self.refs.keys() - weight_map.keys()
        if extra:
            raise BadInput(f"tensor {sorted(extra)[0]!r} is in a shard but not in the index")

    def load(self, name: str) -> "torch.Tensor":
        import torch

        ref = self.refs[name]
        if name in self._bin:
            return self._bin[name]
        with open(ref.file, "rb") as f:
            f.seek(ref.start)
            data = bytearray(f.read(ref.nbytes))
        if len(data) != ref.nbytes:
            raise BadInput(f"{ref.file.name}: tensor {name!r} is truncated")
        dtype = DTYPES[ref.dtype][0]
        if not data:
            return torch.empty(ref.shape, dtype=dtype)
        return torch.frombuffer(data, dtype=dtype).reshape(ref.shape)

    def load_all(self) -> dict[str, "torch.Tensor"]:
        return {n: self.load(n) for n in self.refs}


def _code(dtype, f: Path) -> str:
    code = code_of(dtype)
    if code is None:
        raise BadInput(f"{f.name}: unsupported tensor dtype {dtype}")
    return code


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# Writing


@dataclass(frozen=True)
class OutTensor:
    name: str  # name in the output file
    source: TensorRef
    dtype: str  # output safetensors code (differs from source.dtype only when casting)

    @property
    def nbytes(self) -> int:
        return math.prod(self.source.shape) * DTYPE_NAMES[self.dtype][1]


class _Hasher:
    """sha256 updated on a worker thread (hashlib releases the GIL), so hashing overlaps I/O."""

    def __init__(self, pool: ThreadPoolExecutor):
        self.h = hashlib.sha256()
        self.pool = pool
        self.pending: list[Future] = []

    def update(self, data) -> None:
        self.pending.append(self.pool.submit(self.h.update, data))
        if len(self.pending) > 4:  # bound the memory held by queued chunks
            self.pending.pop(0).result()

    def hexdigest(self) -> str:
        for fut in self.pending:
            fut.result()
        self.pending.clear()
        return self.h.hexdigest()


def safetensors_header(tensors: list[OutTensor], metadata: dict[str, str]) -> bytes:
    header: dict = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": list(t.source.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # keep the data section 8-byte aligned
    return struct.pack("<Q", len(raw)) + raw


def stream_convert(ckpt: Checkpoint, tensors: list[OutTensor], out_path: Path, metadata: dict[str, str],
                   progress: Callable[[int], None] = lambda n: None) -> tuple[str, dict[str, str]]:
    """Write `tensors` (in the order given) to one safetensors file.

    Returns (sha256 of the output, {source file name: sha256}). When nothing is cast and the
    source is safetensors, every source file is read once: its bytes are hashed as they stream by
    (for the source and, when kept, the output) and kept tensors are copied in the kernel
    (copy_file_range; plain writes where unsupported), so the order must be `plan_output_order`.
    Otherwise tensors are materialised one at a time. The state dict is never held whole.
    """
    copy_mode = all(t.dtype == t.source.dtype and t.source.start >= 0 for t in tensors)
    if copy_mode and [t.source.name for t in tensors] != plan_output_order(ckpt, (t.source.name for t in tensors)):
        raise ValueError("byte-range copy needs tensors in source order")
    wanted = {t.source.name for t in tensors}
    source_hashes: dict[str, str] = {}
    with ThreadPoolExecutor(1) as p_out, ThreadPoolExecutor(1) as p_src, open(out_path, "wb", buffering=0) as out:
        out_hash = _Hasher(p_out)
        copier = _Copier(out)

        def emit(data) -> None:
            copier.write(data)
            out_hash.update(data)
            progress(len(data))

        emit(safetensors_header(tensors, metadata))
        for f in ckpt.files:
            src_hash = _Hasher(p_src)
            with open(f, "rb") as fh:
                if copy_mode:
                    def keep(chunk, offset, fd=fh.fileno()):
                        copier.copy(fd, offset, chunk)
                        out_hash.update(chunk)
                        progress(len(chunk))
                    for ref in sorted((r for r in ckpt.refs.values() if r.file == f), key=lambda r: r.start):
                        _stream_range(fh, fh.tell(), ref.start, src_hash)  # header, or a gap
                        _stream_range(fh, ref.start, ref.end, src_hash, keep if ref.name in wanted else None)
                _stream_range(fh, fh.tell(), None, src_hash)
            source_hashes[f.name] = src_hash.hexdigest()
        if not copy_mode:
            for t in tensors:
                emit(_tensor_bytes(ckpt.load(t.source.name), t.dtype))
        digest = out_hash.hexdigest()
        os.fsync(out.fileno())
    return digest, source_hashes


class _Copier:
    """Appends bytes to `out`: from a source file in the kernel when possible, else by writing."""

    def __init__(self, out):
        self.out = out
        self.kernel_copy = hasattr(os, "copy_file_range")

    def write(self, data) -> None:
        view = memoryview(data)
        while view:
            view = view[self.out.write(view):]

    def copy(self, src_fd: int, offset: int, chunk: bytes) -> None:
        if self.kernel_copy:
            done = 0
            try:
                while done < len(chunk):
                    n = os.copy_file_range(src_fd, self.out.fileno(), len(chunk) - done, offset + done)
                    if n == 0:
                        break
                    done += n
                if done == len(chunk):
                    return
            except OSError:
                self.kernel_copy = False  # e.g. across filesystems on old kernels
            self.write(chunk[done:])
            return
        self.write(chunk)


def _stream_range(fh, start: int, end: int | None, hasher: _Hasher, sink=None) -> None:
    """Read [start, end) (to EOF when end is None) in chunks, hashing it and passing (chunk, offset)
    to `sink`."""
    fh.seek(start)
    pos = start
    remaining = None if end is None else end - start
    while remaining is None or remaining > 0:
        chunk = fh.read(CHUNK if remaining is None else min(CHUNK, remaining))
        if not chunk:
            if remaining:
                raise BadInput(f"{Path(fh.name).name}: file is truncated")
            break
        hasher.update(chunk)
        if sink is not None:
            sink(chunk, pos)
        pos += len(chunk)
        if remaining is not None:
            remaining -= len(chunk)


def _tensor_bytes(t: "torch.Tensor", code: str) -> bytes:
    import torch

    target = DTYPES[code][0]
    if t.dtype != target:
        t = t.to(target)
    t = t.contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    return t.view(torch.uint8).numpy().tobytes()


def plan_output_order(ckpt: Checkpoint, names: Iterable[str]) -> list[str]:
    """Source order (file, offset): lets the writer copy each source file in one sequential pass."""
    order = {f: i for i, f in enumerate(ckpt.files)}
    return sorted(names, key=lambda n: (order[ckpt.refs[n].file], ckpt.refs[n].start, n))
