"""eaglezoo verify through the CLI: the report, the gates, and bad input."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, assert_clean_failure, run_inprocess
from support.factory import make_target

IDS = EXAMPLE_IDS


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("v") / "eagle31"
    r = run_inprocess("convert", EXAMPLE / "eagle31-safeai", out, "--target", EXAMPLE / "target", *IDS)
    assert r.code == 0, r.err
    return out


def test_report_fields_and_report_file(converted, tmp_path):
    report = tmp_path / "r.json"
    r = run_inprocess(
        "verify",
        converted,
        "--target",
        EXAMPLE / "target",
        "--prompts",
        EXAMPLE / "prompts.jsonl",
        "--max-prompts",
        "6",
        "--max-new-tokens",
        "32",
        "-k",
        "4",
        "--device",
        "auto",
        "--json",
        "--report",
        report,
    )
    assert r.code == 0, r.err
    data = r.json()
    for key in (
        "drafter",
        "target",
        "device",
        "num_spec_tokens",
        "acceptance_per_position",
        "mean_acceptance_length",
        "num_drafts",
        "lint",
        "drift",
        "timing",
        "histogram",
        "mean_acceptance_length_per_prompt",
        "all_positions",
    ):
        assert key in data, key
    assert data["device"] == "cpu" and data["num_spec_tokens"] == 4 and len(data["acceptance_per_position"]) == 4
    pos = data["acceptance_per_position"]
    assert all(a >= b for a, b in zip(pos, pos[1:], strict=False))  # joint acceptance can only fall with depth
    assert data["mean_acceptance_length"] == pytest.approx(1 + sum(pos))
    assert sum(data["histogram"]) == data["num_drafts"] and len(data["drift"]["feedback_rms_per_depth"]) == 4
    assert json.loads(report.read_text()) == data


def test_text_report_and_gates(converted):
    base = [
        "verify",
        converted,
        "--target",
        EXAMPLE / "target",
        "--prompts",
        EXAMPLE / "prompts.jsonl",
        "--max-prompts",
        "4",
        "--max-new-tokens",
        "32",
    ]
    r = run_inprocess(*base, "--min-acceptance", "0.05,0.0,0.0", "--min-al", "1.0")
    assert r.code == 0 and "per-position acceptance" in r.out and "PASS" in r.out
    r = run_inprocess(*base, "--min-al", "3.9")
    assert r.code == 1 and "FAIL mean acceptance length" in r.out
    r = run_inprocess(*base, "--min-acceptance", "0.99")
    assert r.code == 1 and "FAIL acceptance at position 1" in r.out


def test_mismatched_targets(converted, tmp_path):
    for kwargs, message in (
        ({"hidden": 96}, "hidden_size"),
        ({"vocab": 2000, "hidden": 128}, "vocab_size"),
        ({"layers": 2, "hidden": 128, "vocab": 1024}, "outside the target"),
    ):
        t = make_target(tmp_path / f"t{len(message)}", **kwargs)
        assert_clean_failure(run_inprocess("verify", converted, "--target", t), None, contains=message)
    assert_clean_failure(
        run_inprocess("verify", converted, "--target", tmp_path / "missing"), None, contains="no such directory"
    )
    (tmp_path / "empty").mkdir()
    assert_clean_failure(run_inprocess("verify", converted, "--target", tmp_path / "empty"), None, contains="not found")


def test_cuda_without_cuda(converted):
    assert_clean_failure(
        run_inprocess("verify", converted, "--target", EXAMPLE / "target", "--device", "cuda"),
        None,
        contains="CUDA is not available",
    )


def no_site_python(folder) -> str:
    """An interpreter that finds no installed package (this one under -S): vLLM is absent, whatever is installed."""
    script = folder / "python-no-site"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    script.chmod(0o755)
    return str(script)


def not_python(folder) -> str:
    script = folder / "not-python"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--device", "cuda:99"], "--device cuda:99"),  # no CUDA here, or fewer devices where there is
        (["--engine", "vllm", "--engine-python", no_site_python], "cannot import vLLM"),
        (["--engine", "vllm", "--engine-python", not_python], "is not a working Python interpreter (exit 3)"),
        (["--engine", "vllm", "--data-parallel-size", "2"], "data parallel"),
        (["--endpoint", "ftp://x"], "give an http:// or https:// URL"),
        (["--endpoint", "http://127.0.0.1:{port}"], "cannot be reached"),
        (["--dtype", "fp99"], "unknown --dtype 'fp99'"),
        (["--prompts", "README.md"], "line 1 is not JSON"),
        (["--dequantize-mxfp4"], "is not MXFP4-quantized"),  # the target's quantization, from its config alone
    ],
    ids=[
        "native-device",
        "interpreter",
        "not-python",
        "data-parallel",
        "endpoint-url",
        "endpoint-down",
        "dtype",
        "prompts",
        "mxfp4",
    ],
)
def test_settings_are_refused_before_the_drafter_is_read(tmp_path, args, message):
    """Cheap checks first: a drafter whose config cannot be read would otherwise be the error."""
    from support.net import free_port

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    args = [a(tmp_path) if callable(a) else a.format(port=free_port()) for a in args]
    assert_clean_failure(run_inprocess("verify", broken, "--target", EXAMPLE / "target", *args), None, contains=message)


def test_settings_are_refused_before_a_hub_drafter_is_downloaded():
    """Offline (the suite's HF_HUB_OFFLINE=1), a download would be the error; the typo comes first."""
    r = run_inprocess("verify", "someone/not-cached", "--target", EXAMPLE / "target", "--device", "cuda:99")
    assert_clean_failure(r, None, contains="--device cuda:99")


def test_a_compare_refuses_either_sides_settings_before_a_runs(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    r = run_inprocess(
        "compare",
        broken,
        "tiny-example-eagle31",
        "--target",
        EXAMPLE / "target",
        "--engine-b",
        "vllm",
        "--engine-python-b",
        tmp_path / "no-such-python",
    )
    assert_clean_failure(r, None, contains="no such executable")


@pytest.mark.parametrize(
    "content,message",
    [
        ('{"prompt": "ok"}\n{not json\n', "line 2 is not JSON"),
        ('{"text_missing": 1}\n', "line 1 needs a string field 'prompt'"),
        ("", "no prompts"),
    ],
)
def test_malformed_prompts(converted, tmp_path, content, message):
    f = tmp_path / "p.jsonl"
    f.write_text(content)
    assert_clean_failure(
        run_inprocess("verify", converted, "--target", EXAMPLE / "target", "--prompts", f), None, contains=message
    )


def test_prompt_longer_than_the_drafters_context(converted, tmp_path):
    f = tmp_path / "long.jsonl"
    f.write_text(json.dumps({"prompt": "def function(argument): return value " * 400}) + "\n")
    assert_clean_failure(
        run_inprocess("verify", converted, "--target", EXAMPLE / "target", "--prompts", f),
        None,
        contains="every prompt is too long for the context (1024 tokens)",
    )
    with f.open("a") as fh:
        fh.write(json.dumps({"prompt": "def add(a, b): return a + b"}) + "\n")
    r = run_inprocess("verify", converted, "--target", EXAMPLE / "target", "--prompts", f, "--json")
    assert r.code == 0, r.err
    assert r.json()["num_prompts"] == 1 and [s["index"] for s in r.json()["skipped_prompts"]] == [0]
