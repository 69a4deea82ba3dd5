"""eaglezoo's safetensors reader through `eaglezoo lint`: a corrupt header is one line, exit 2, nothing written, the
source untouched; a tensor of a dtype the drafter does not use (F8_E8M0) is read and named. (The reader against the
safetensors library itself, fuzzed: tests/unit/checkpoint/test_safetensors_fuzz.py.)"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from conftest import assert_clean_failure, run_inprocess, tree_digest
from safetensors.torch import load_file, save_file
from support.factory import make_drafter

IDS = ["--aux-layers", "1,2,3", "--aux-convention", "boundary"]


def rewrite(path: Path, corrupt) -> None:
    """`corrupt(items, data)` gives the header's new (key, value) items (repeats allowed) and data."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    items, data = corrupt(list(json.loads(raw[8 : 8 + n]).items()), raw[8 + n :])
    header = ("{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in items) + "}").encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def tensors_by_offset(items) -> list:
    return sorted((i for i in items if i[0] != "__metadata__"), key=lambda i: i[1]["data_offsets"])


def gap_after_the_first_tensor(items, data):
    first, *rest = tensors_by_offset(items)
    end = first[1]["data_offsets"][1]
    for _, fields in rest:
        fields["data_offsets"] = [offset + 12 for offset in fields["data_offsets"]]
    return items, data[:end] + bytes(12) + data[end:]


CLI_CORRUPTIONS = {
    "gap": (gap_after_the_first_tensor, "leave a gap of 12 bytes at offset"),
    "trailing bytes": (lambda items, data: (items, data + bytes(7)), "7 trailing bytes after the last tensor"),
    "repeated name": (lambda items, data: (items + tensors_by_offset(items)[-1:], data), "appears twice"),
    "metadata not a string": (
        lambda items, data: ([("__metadata__", {"format": 1})] + tensors_by_offset(items), data),
        "__metadata__ value for 'format' is not a string",
    ),
}


@pytest.mark.parametrize("case", CLI_CORRUPTIONS)
def test_lint_refuses_a_corrupt_header_in_one_line(tmp_path, case):
    src = make_drafter(tmp_path / "src", "safeai", file="safetensors")
    corrupt, message = CLI_CORRUPTIONS[case]
    rewrite(src / "model.safetensors", corrupt)
    before, files = tree_digest(tmp_path), sorted(tmp_path.rglob("*"))
    r = run_inprocess("lint", src, *IDS)
    assert_clean_failure(r, contains=message)
    assert "error: model.safetensors: " in r.err
    assert tree_digest(tmp_path) == before and sorted(tmp_path.rglob("*")) == files


def test_lint_reads_a_drafter_with_an_f8_e8m0_tensor(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai", file="safetensors")
    state = load_file(str(src / "model.safetensors"))
    state["fc.weight_scale"] = torch.ones(4, dtype=torch.float8_e8m0fnu)
    save_file(state, str(src / "model.safetensors"), metadata={"format": "pt"})
    r = run_inprocess("lint", src, *IDS, "--json")
    assert r.code == 1, r.err
    unexpected = [f["message"] for f in r.json()["findings"] if f["code"] == "unexpected"]
    assert unexpected == ["tensor fc.weight_scale does not belong to this drafter's config"]
