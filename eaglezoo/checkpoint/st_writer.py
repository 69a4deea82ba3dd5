"""Writing safetensors: one output file streamed from a checkpoint's tensors, with the sha256 of
the output and of every source file computed in the same pass."""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from ..errors import BadInput
from .st_header import ST_DTYPES
from .tensors import CHUNK, Checkpoint, TensorRef, torch_dtype

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class OutTensor:
    name: str  # name in the output file
    source: TensorRef
    dtype: str  # output safetensors code (differs from source.dtype only when casting)

    @property
    def nbytes(self) -> int:
        return math.prod(self.source.shape) * ST_DTYPES[self.dtype][1] // 8


@dataclass(frozen=True)
class Loan:
    """Tensors of another checkpoint written after a drafter's own: a target's embedding lent to a drafter."""

    lender: Checkpoint
    tensors: tuple[OutTensor, ...]


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


def stream_convert(
    ckpt: Checkpoint,
    tensors: list[OutTensor],
    out_path: Path,
    metadata: dict[str, str],
    progress: Callable[[int], None] = lambda n: None,
    loan: Loan | None = None,
) -> tuple[str, dict[str, str]]:
    """Write `tensors` (in the order given), then the `loan`'s (tensors of another checkpoint: a target's
    embedding lent to a drafter), to one safetensors file.

    Returns (sha256 of the output, {source file name: sha256}). When nothing is cast and the
    source is safetensors, every source file is read once: its bytes are hashed as they stream by
    (for the source and, when kept, the output) and kept tensors are copied in the kernel
    (copy_file_range; plain writes where unsupported), so the order must be `plan_output_order`.
    Otherwise tensors are materialised one at a time. The state dict is never held whole.
    """
    lent = [(loan.lender, t) for t in loan.tensors] if loan else []
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

        emit(safetensors_header([*tensors, *(t for _, t in lent)], metadata))
        for f in ckpt.files:
            src_hash = _Hasher(p_src)
            with open(f, "rb") as fh:
                if copy_mode:
                    fd = fh.fileno()

                    def keep(chunk, offset, fd=fd):
                        copier.copy(fd, offset, chunk)
                        out_hash.update(chunk)
                        progress(len(chunk))

                    for ref in sorted((r for r in ckpt.refs.values() if r.file == f), key=lambda r: r.start):
                        _stream_range(fh, fh.tell(), ref.start, src_hash)  # the header, before the first tensor
                        _stream_range(fh, ref.start, ref.end, src_hash, keep if ref.name in wanted else None)
                _stream_range(fh, fh.tell(), None, src_hash)
            source_hashes[f.name] = src_hash.hexdigest()
        if not copy_mode:
            for t in tensors:
                emit(_tensor_bytes(ckpt.load(t.source.name), t.dtype))
        for lender, t in lent:  # one at a time: a large target's embedding is never held with another
            emit(_tensor_bytes(lender.load(t.source.name), t.dtype))
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
            view = view[self.out.write(view) :]

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
                raise BadInput(
                    f"{Path(fh.name).name}: file is truncated",
                    hint="the source changed or was cut short while converting: download it again and rerun",
                )
            break
        hasher.update(chunk)
        if sink is not None:
            sink(chunk, pos)
        pos += len(chunk)
        if remaining is not None:
            remaining -= len(chunk)


def _tensor_bytes(t: "torch.Tensor", code: str) -> bytes:
    import torch

    target = torch_dtype(code)
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
