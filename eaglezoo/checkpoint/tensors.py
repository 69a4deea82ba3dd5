"""Reading checkpoints: safetensors files (headers read by `st_header`, as strictly as the
safetensors library reads them), `.bin` state dicts (weights_only) and sharded indexes. Writing
lives in `st_writer`.

torch is imported only when a tensor is materialised: reading headers and copying bytes need none
of it (and it costs a second to load).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BadInput, printable
from ..fsutil import child_path, regular_file
from .st_header import ST_DTYPES, TensorRef, read_safetensors_header

if TYPE_CHECKING:
    import torch

DAMAGED = "the file is damaged or incomplete: download it again, or re-export the drafter as safetensors"
NO_TORCH_DTYPE = "re-export the drafter in a dtype torch loads (bfloat16, float16 or float32)"

CHUNK = 16 * 1024 * 1024
I64_MAX = 2**63 - 1
TORCHLESS = {"F6_E2M3", "F6_E3M2"}  # safetensors dtypes that torch has no dtype for
ZIP_MAGIC = b"PK\x03\x04"
# How a legacy (pre-zip) torch.save file begins: its first pickle holds torch's MAGIC_NUMBER as a LONG1.
LEGACY_MAGIC = b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")
UNLOADABLE_HINT = "convert it to safetensors with the tool that made it, or re-download it"


def torch_dtype(code: str) -> "torch.dtype":
    import torch

    return getattr(torch, ST_DTYPES[code][0])


def code_of(dtype) -> str | None:
    return next(
        (code for code, (name, _) in ST_DTYPES.items() if code not in TORCHLESS and str(dtype) == f"torch.{name}"), None
    )


def read_safetensors_refs(path: Path) -> tuple[dict[str, TensorRef], dict[str, str]]:
    with open(path, "rb") as f:

        def read(start: int, end: int) -> bytes:
            f.seek(start)
            return f.read(end - start)

        header = read_safetensors_header(read, os.fstat(f.fileno()).st_size, path)
    return header.refs, header.metadata


def tensor_from_bytes(ref: TensorRef, data: bytearray) -> "torch.Tensor":
    """`ref`'s tensor from its bytes, built as the safetensors library builds it for torch."""
    import torch

    where = f"{ref.file.name}: tensor {ref.name!r}"
    if ref.dtype in TORCHLESS:
        raise BadInput(f"{where} is {ref.dtype}, which torch has no dtype for", hint=NO_TORCH_DTYPE)
    shape = list(ref.shape)
    if ref.dtype == "F4":  # torch's float4_e2m1fn_x2 holds two values in each element
        if shape[-1] % 2:
            raise BadInput(
                f"{where} is F4 with an odd last dimension: torch packs F4 values in pairs along it",
                hint=NO_TORCH_DTYPE,
            )
        shape[-1] //= 2
    if any(dim > I64_MAX for dim in shape):
        raise BadInput(f"{where} has a dimension beyond torch's 64-bit sizes", hint=DAMAGED)
    raw = torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    try:
        return raw.view(torch_dtype(ref.dtype)).reshape(shape)
    except RuntimeError:  # an empty tensor's strides can still overflow torch's 64-bit arithmetic
        raise BadInput(
            f"{where} has shape {list(ref.shape)}, whose strides torch cannot lay out", hint=DAMAGED
        ) from None


def load_bin(path: Path) -> dict[str, "torch.Tensor"]:
    """A pickled state dict, loaded with weights_only=True (memory-mapped when possible)."""
    import torch

    try:
        obj = _torch_load(path)
    except Exception:  # noqa: BLE001 - any unpickling failure is bad input
        raise BadInput(
            f"{path.name} is not a loadable weights file: {_unloadable_reason(path)}", hint=UNLOADABLE_HINT
        ) from None
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        raise BadInput(f"{path.name}: does not hold a name -> tensor mapping", hint=DAMAGED)
    for name, t in obj.items():
        if t.layout != torch.strided or t.is_quantized or t.is_nested:
            raise BadInput(
                f"{path.name}: tensor {name!r} is not a plain dense tensor ({t.layout}); a drafter's weights are dense",
                hint=DAMAGED,
            )
    return obj


def _torch_load(path: Path):
    import torch

    with warnings.catch_warnings():  # torch warns on stderr about pickle protocols it was not written with
        warnings.simplefilter("ignore")
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:  # legacy (non-zip) pickles cannot be memory-mapped
            if "mmap" not in str(exc):
                raise
            return torch.load(path, map_location="cpu", weights_only=True)


def _unloadable_reason(path: Path) -> str:
    """Why weights_only loading refused `path`, in our words: torch's own text is pages long, with
    terminal colour codes, and says little about the file."""
    with open(path, "rb") as f:
        head = f.read(32)
    if not head:
        return "it is empty"
    if LEGACY_MAGIC in head:
        return "it is a legacy (non-zip) PyTorch file that weights_only loading cannot read"
    if not head.startswith(ZIP_MAGIC):
        return "it is not a PyTorch zip archive"
    unsafe = _unsafe_globals(path)
    if unsafe:
        return f"it asks to run code ({', '.join(unsafe)}), which weights_only loading refuses"
    return "it is a damaged or incomplete PyTorch zip archive"


def _unsafe_globals(path: Path, most: int = 3) -> list[str]:
    """The functions and classes the zip checkpoint's pickle would import that weights_only refuses,
    found by reading the pickle's opcodes (nothing is unpickled)."""
    from torch.serialization import get_unsafe_globals_in_checkpoint

    try:
        names = get_unsafe_globals_in_checkpoint(path)
    except Exception:  # noqa: BLE001 - a damaged archive: no names to give
        return []
    return [printable(name)[:80] for name in names[:most]]


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
                refs = {n: _bin_ref(n, t, f) for n, t in tensors.items()}
            dup = refs.keys() & self.refs.keys()
            if dup:
                raise BadInput(
                    f"tensor {sorted(dup)[0]!r} appears in more than one weight file",
                    hint="keep one copy of each tensor: remove the stray weight file from the folder",
                )
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
        if not found:
            raise BadInput(
                f"{d}: no weights found (expected model.safetensors, pytorch_model.bin or a *.index.json)",
                hint="name the drafter's own folder, the one with config.json and its weights",
            )
        raise BadInput(
            f"{d}: several .safetensors files and no index",
            hint="keep the drafter's files alone in its folder, or add the model.safetensors.index.json",
        )

    def _from_index(self, index: Path) -> list[Path]:
        try:
            weight_map = json.loads(index.read_bytes().decode("utf-8"))["weight_map"]
            files = sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise BadInput(
                f"{index.name}: malformed index (needs a weight_map object of shard names)", hint=DAMAGED
            ) from None
        paths = []
        for name in files:
            path = child_path(self.dir, name, f"{index.name}: shard")
            if not path.exists():
                raise BadInput(
                    f"{index.name}: shard {name!r} is missing",
                    hint="download the missing shard (eaglezoo pull fetches every file of a repo)",
                )
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
                raise BadInput(f"index lists {name!r} in {file}, but it is not there", hint=DAMAGED)
        extra = self.refs.keys() - weight_map.keys()
        if extra:
            raise BadInput(f"tensor {sorted(extra)[0]!r} is in a shard but not in the index", hint=DAMAGED)

    def load(self, name: str) -> "torch.Tensor":
        ref = self.refs[name]
        if name in self._bin:
            return self._bin[name]
        with open(ref.file, "rb") as f:
            f.seek(ref.start)
            data = bytearray(f.read(ref.nbytes))
        if len(data) != ref.nbytes:
            raise BadInput(f"{ref.file.name}: tensor {name!r} is truncated", hint=DAMAGED)
        return tensor_from_bytes(ref, data)

    def load_all(self) -> dict[str, "torch.Tensor"]:
        return {n: self.load(n) for n in self.refs}


def _bin_ref(name: str, t: "torch.Tensor", f: Path) -> TensorRef:
    code = code_of(t.dtype)
    if code is None or (code == "F4" and t.dim() == 0):
        raise BadInput(f"{f.name}: tensor {name!r} has unsupported dtype {t.dtype}", hint=NO_TORCH_DTYPE)
    shape = tuple(t.shape)
    if code == "F4":  # safetensors counts F4 values, torch counts pairs
        shape = (*shape[:-1], shape[-1] * 2)
    return TensorRef(name, code, shape, f)
