"""config.json validated where it enters: a bad value of a key eaglezoo reads is one line naming the key
and the file, exit 2, nothing written; unknown keys pass through convert untouched."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, assert_clean_failure, run_inprocess, tree_digest

BAD_VALUES = [
    ("architectures", "LlamaForCausalLM"),
    ("architectures", []),
    ("architectures", [1]),
    ("rms_norm_eps", "abc"),
    ("rms_norm_eps", -1e-6),
    ("rms_norm_eps", 0),
    ("torch_dtype", "banana"),
    ("rope_scaling", "yarn"),
    ("rope_scaling", ["yarn"]),
    ("hidden_size", "128"),
    ("hidden_size", -1),
    ("hidden_size", 0),
    ("num_attention_heads", 0),
    ("vocab_size", 1.5),
]


def copy_of(name: str, tmp_path):
    return shutil.copytree(EXAMPLE / name, tmp_path / name)


def set_key(folder, key, value):
    cfg = json.loads((folder / "config.json").read_text())
    cfg[key] = value
    (folder / "config.json").write_text(json.dumps(cfg))


def assert_names_key(result, out, key):
    assert_clean_failure(result, out, contains=f"key '{key}'")
    assert "config.json" in result.err


@pytest.mark.parametrize("key,value", BAD_VALUES, ids=[f"{k}={v!r}" for k, v in BAD_VALUES])
def test_convert_refuses_a_bad_drafter_value(tmp_path, key, value):
    src = copy_of("eagle3-safeai", tmp_path)
    set_key(src, key, value)
    before = tree_digest(src)
    out = tmp_path / "out"
    assert_names_key(run_inprocess("convert", src, out, *EXAMPLE_IDS), out, key)
    assert tree_digest(src) == before


def deeply_nested(depth: int) -> bytes:
    return b'{"deep": ' + b"[" * depth + b"]" * depth + b"}"


def lone_surrogate() -> bytes:
    cfg = json.loads((EXAMPLE / "eagle3-safeai" / "config.json").read_text())
    return json.dumps({**cfg, "architectures": ["\ud800"]}).encode()  # json.dumps escapes it as \ud800


UNREADABLE = {
    "invalid utf-8": (lambda: b'{"architectures": ["Llama\xff\xfe"]}', "not valid utf-8"),
    "nested 100k deep": (lambda: deeply_nested(100_000), "nested too deeply"),
    "nested 40 deep": (lambda: deeply_nested(40), "key 'deep' is nested"),
    "lone surrogate": (lone_surrogate, "key 'architectures.0' holds text that is not valid unicode"),
}


@pytest.mark.parametrize("case", UNREADABLE)
def test_convert_refuses_an_unreadable_drafter_config(tmp_path, case):
    make_bytes, message = UNREADABLE[case]
    src = copy_of("eagle3-safeai", tmp_path)
    (src / "config.json").write_bytes(make_bytes())
    before = tree_digest(src)
    out = tmp_path / "out"
    r = run_inprocess("convert", src, out, *EXAMPLE_IDS)
    assert_clean_failure(r, out, contains=message)
    assert str(src / "config.json") in r.err
    assert tree_digest(src) == before


@pytest.mark.parametrize("key,value", [("rms_norm_eps", "abc"), ("architectures", [])])
def test_lint_refuses_a_bad_drafter_value(tmp_path, key, value):
    src = copy_of("eagle3-safeai", tmp_path)
    set_key(src, key, value)
    assert_names_key(run_inprocess("lint", src, *EXAMPLE_IDS), None, key)


@pytest.mark.parametrize(
    "command,key,value",
    [
        ("convert", "hidden_size", "128"),
        ("convert", "rope_parameters", "default"),
        ("lint", "dtype", "banana"),
    ],
)
def test_a_bad_target_value_is_refused(tmp_path, command, key, value):
    target = copy_of("target", tmp_path)
    set_key(target, key, value)
    out = tmp_path / "out"
    args = [out] if command == "convert" else []
    r = run_inprocess(command, EXAMPLE / "eagle3-safeai", *args, "--target", target, *EXAMPLE_IDS)
    assert_names_key(r, out, key)
    assert "target config" in r.err


def test_unknown_keys_pass_through_convert_unchanged(tmp_path):
    src = copy_of("eagle3-safeai", tmp_path)
    custom = {"a": [1, 2], "b": {"c": None, "d": "é"}}
    set_key(src, "my_custom_key", custom)
    set_key(
        src,
        "rope_scaling",
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 256,
        },
    )
    out = tmp_path / "out"
    r = run_inprocess("convert", src, out, "--target", EXAMPLE / "target", *EXAMPLE_IDS)
    assert r.code == 0, r.err
    written = json.loads((out / "config.json").read_text())
    assert written["my_custom_key"] == custom
    assert written["rope_scaling"]["original_max_position_embeddings"] == 256
