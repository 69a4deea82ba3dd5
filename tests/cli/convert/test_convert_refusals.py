"""Bad input for convert: a one-line error, exit 2, nothing at OUT, SRC untouched."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import time

import pytest
import torch
from conftest import CLI_ENV, ROOT, Result, assert_clean_failure, run_inprocess, tree_digest
from safetensors.torch import save_file
from support.factory import make_drafter, make_spec

IDS = ["--aux-layers", "1,2,3", "--aux-convention", "boundary"]


def sf_drafter(tmp_path):
    return make_drafter(tmp_path / "src", "safeai", file="safetensors")


def rewrite_header(path, mutate):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    mutate(header)
    new = json.dumps(header).encode()
    new += b" " * (-len(new) % 8)
    path.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n :])


def first_tensor(header):
    return next(k for k in header if k != "__metadata__")


def corrupt_truncated(src):
    p = src / "model.safetensors"
    p.write_bytes(p.read_bytes()[:-100])


def corrupt_tiny(src):
    (src / "model.safetensors").write_bytes(b"\x01\x02")


def corrupt_header_length(src):
    p = src / "model.safetensors"
    raw = p.read_bytes()
    p.write_bytes(struct.pack("<Q", len(raw) * 10) + raw[8:])


def corrupt_header_json(src):
    p = src / "model.safetensors"
    raw = p.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    p.write_bytes(raw[:8] + b"{not json" + b" " * (n - 9) + raw[8 + n :])


def corrupt_offsets(src):
    rewrite_header(src / "model.safetensors", lambda h: h[first_tensor(h)].__setitem__("data_offsets", [0, 10**9]))


def corrupt_overlap(src):
    def mutate(h):
        names = sorted((k for k in h if k != "__metadata__"), key=lambda k: h[k]["data_offsets"][0])
        a, b = h[names[0]], h[names[1]]
        size_b = b["data_offsets"][1] - b["data_offsets"][0]
        b["data_offsets"] = [a["data_offsets"][0], a["data_offsets"][0] + size_b]

    rewrite_header(src / "model.safetensors", mutate)


def corrupt_dtype(src):
    rewrite_header(src / "model.safetensors", lambda h: h[first_tensor(h)].__setitem__("dtype", "Q7"))


CORRUPTIONS = {
    "truncated": (corrupt_truncated, "truncated"),
    "shorter than a header": (corrupt_tiny, "truncated"),
    "header length beyond file": (corrupt_header_length, "beyond the end"),
    "header not json": (corrupt_header_json, "not valid json"),
    "offsets out of bounds": (corrupt_offsets, "out of bounds"),
    "overlapping offsets": (corrupt_overlap, "overlapping"),
    "unknown dtype": (corrupt_dtype, "unknown dtype"),
}


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_corrupt_safetensors(tmp_path, case):
    src = sf_drafter(tmp_path)
    corrupt, message = CORRUPTIONS[case]
    corrupt(src)
    before = tree_digest(src)
    out = tmp_path / "out"
    assert_clean_failure(run_inprocess("convert", src, out, *IDS), out, contains=message)
    assert tree_digest(src) == before


def test_pickle_that_is_not_tensors_is_refused_by_weights_only(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai", file="bin")
    import pathlib

    torch.save({"fc.weight": pathlib.PurePosixPath("/etc/passwd")}, src / "pytorch_model.bin")  # an arbitrary global
    before = tree_digest(src)
    assert_clean_failure(
        run_inprocess("convert", src, tmp_path / "out", *IDS), tmp_path / "out", contains="weights_only"
    )
    assert tree_digest(src) == before


class Calls:
    """Pickles as a call of `fn(*args)`: what a malicious checkpoint asks the unpickler to run."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def zip_checkpoint_with(value):
    buf = io.BytesIO()
    torch.save({"fc.weight": value}, buf)
    return buf.getvalue()


UNLOADABLE_BINS = {
    "runs os.system": (
        lambda: zip_checkpoint_with(Calls(os.system, "true")),
        f"it asks to run code ({os.system.__module__}.system)",
    ),  # posix.system on Linux
    "runs eval": (lambda: zip_checkpoint_with(Calls(builtins.eval, "1")), "it asks to run code (builtins.eval)"),
    "raw pickle": (lambda: pickle.dumps({"fc.weight": Calls(os.system, "true")}), "it is not a pytorch zip archive"),
    "empty": (lambda: b"", "it is empty"),
    "not a zip": (lambda: b"not a checkpoint\n" * 64, "it is not a pytorch zip archive"),
    "truncated zip": (lambda: zip_checkpoint_with(torch.zeros(4))[:200], "it is a damaged or incomplete"),
}


@pytest.mark.parametrize("case", UNLOADABLE_BINS)
def test_unloadable_bin_is_named_in_our_words(tmp_path, case):
    """weights_only refusals in one line that says why, never torch's own (long, coloured) text."""
    content, reason = UNLOADABLE_BINS[case]
    src = make_drafter(tmp_path / "src", "safeai", file="bin")
    (src / "pytorch_model.bin").write_bytes(content())
    expected = f"pytorch_model.bin is not a loadable weights file: {reason}"
    for result in (run_inprocess("lint", src), run_inprocess("convert", src, tmp_path / "out", *IDS)):
        assert_clean_failure(result, tmp_path / "out", contains=expected)
        assert "\x1b" not in result.err and "(hint: convert it to safetensors" in result.err


def test_pickle_with_a_non_tensor_value(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai", file="bin")
    torch.save({"fc.weight": [1, 2, 3]}, src / "pytorch_model.bin")
    assert_clean_failure(
        run_inprocess("convert", src, tmp_path / "out", *IDS), tmp_path / "out", contains="name -> tensor"
    )


@pytest.mark.parametrize(
    "content,message", [(None, "not found"), ("{oops", "not valid json"), ("[1, 2]", "not a json object")]
)
def test_missing_or_malformed_config(tmp_path, content, message):
    src = sf_drafter(tmp_path)
    if content is None:
        (src / "config.json").unlink()
    else:
        (src / "config.json").write_text(content)
    assert_clean_failure(run_inprocess("convert", src, tmp_path / "out", *IDS), tmp_path / "out", contains=message)


def test_unknown_dialect(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    save_file({"weird.weight": torch.zeros(3)}, str(src / "model.safetensors"))
    (src / "config.json").write_text(json.dumps({"hidden_size": 4}))
    assert_clean_failure(run_inprocess("convert", src, tmp_path / "out"), tmp_path / "out", contains="unknown dialect")
    assert_clean_failure(
        run_inprocess("convert", src, tmp_path / "out", "--from", "klingon"),
        tmp_path / "out",
        contains="unknown dialect",
    )


def edit_config(src, **changes):
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(changes)
    (src / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"hidden_size": 96}, "fan-in"),
        ({"intermediate_size": 50}, "expected [50, 64]"),
        ({"draft_vocab_size": 100}, "lm_head.weight has 128 rows"),
        ({"fc_norm": True}, "fc_norm is true but fc_norm.0.weight is missing"),
        ({"fc_norm": True, "norm_before_fc": True}, "mutually exclusive"),
        ({"target_hidden_size": 32}, "fan-in"),
    ],
)
def test_config_inconsistent_with_tensors(tmp_path, changes, message):
    src = make_drafter(tmp_path / "src", "safeai")
    edit_config(src, **changes)
    assert_clean_failure(run_inprocess("convert", src, tmp_path / "out", *IDS), tmp_path / "out", contains=message)


def test_tensors_without_their_flag(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai", spec=make_spec(fc_norm=True))
    edit_config(src, fc_norm=False)
    assert_clean_failure(
        run_inprocess("convert", src, tmp_path / "out", *IDS), tmp_path / "out", contains="fc_norm.0.weight"
    )


def test_unmapped_tensor_is_listed(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai", file="safetensors")
    from safetensors.torch import load_file

    state = load_file(str(src / "model.safetensors"))
    state["midlayer.mystery.weight"] = torch.zeros(2)
    state["extra_head.bias"] = torch.zeros(2)
    save_file(state, str(src / "model.safetensors"))
    r = run_inprocess("convert", src, tmp_path / "out", *IDS)
    assert_clean_failure(r, tmp_path / "out", contains="neither mapped nor dropped")
    assert "midlayer.mystery.weight" in r.err and "extra_head.bias" in r.err


def test_non_integer_d2t(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai", file="safetensors")
    from safetensors.torch import load_file

    state = load_file(str(src / "model.safetensors"))
    state["d2t"] = state["d2t"].float()
    save_file(state, str(src / "model.safetensors"))
    assert_clean_failure(run_inprocess("convert", src, tmp_path / "out", *IDS), tmp_path / "out", contains="integer")


def test_out_exists(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = run_inprocess("convert", src, out, *IDS)
    assert_clean_failure(r, None, contains="already exists")
    assert (out / "keep.txt").read_text() == "mine" and len(list(out.iterdir())) == 1


# The losing convert: the real CLI, held at the rename of its staged folder onto OUT until a second
# convert (a real process, started there) has written OUT: the interleaving of a race, made certain.
RACE_LOSER = """
import os, subprocess, sys
out = os.path.abspath(sys.argv[3])
rename = os.rename
def rename_after_the_winner(src, dst, *args, **kwargs):
    if os.path.abspath(dst) == out and not os.path.exists(out):
        subprocess.run([sys.executable, "-m", "eaglezoo", *sys.argv[1:]], stdout=subprocess.DEVNULL, check=True)
    return rename(src, dst, *args, **kwargs)
os.rename = rename_after_the_winner
from eaglezoo.cli import run
run()
"""


def test_out_written_by_a_racing_convert(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    out = tmp_path / "out"
    loser = subprocess.run(
        [sys.executable, "-c", RACE_LOSER, "convert", str(src), str(out), *IDS],
        env=CLI_ENV,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert_clean_failure(Result(loser.returncode, loser.stdout, loser.stderr), None, contains=f"{out} already exists")
    assert "pass --force" in loser.stderr
    assert not list(tmp_path.glob(".out.*")), "the loser's temporary directory was left behind"
    record = json.loads((out / "conversion.json").read_text())  # the winner's output, whole
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "conversion.json", "model.safetensors"]
    assert hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest() == record["output"]["model.safetensors"]


def test_out_not_writable(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_clean_failure(run_inprocess("convert", src, blocker / "out", *IDS), None, contains="cannot write")
    assert_clean_failure(run_inprocess("convert", src, "/proc/eaglezoo-out", *IDS), None, contains="cannot write")


def test_out_inside_src_is_refused(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    before = tree_digest(src)
    assert_clean_failure(run_inprocess("convert", src, src / "out", *IDS), None, contains="overlaps")
    assert_clean_failure(run_inprocess("convert", src, src, *IDS, "--force"), None, contains="overlaps")
    assert tree_digest(src) == before


def test_kill_mid_write_leaves_no_out(tmp_path):
    """SIGKILL while the weights stream (a 200 MB drafter): no OUT, only a hidden temporary dir."""
    big = make_spec(hidden=1024, target_hidden=1024, vocab=4096, draft_vocab=2048)
    big.layer_config["intermediate_size"] = 4096
    src = make_drafter(tmp_path / "src", "safeai", spec=big, file="safetensors")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eaglezoo", "convert", str(src), str(out), *IDS],
        env=CLI_ENV,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not list(tmp_path.glob(".out.*")):
        time.sleep(0.001)
    tmp_dirs = list(tmp_path.glob(".out.*"))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert tmp_dirs, "the conversion never started writing"
    assert not out.exists()
