"""The native engine at its edges: remote code, quantized targets, MLA drafters. (At scale, prompt batches:
tests/e2e/test_native_batching.py.)"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import EXAMPLE, EXAMPLE_IDS, assert_clean_failure, run_cli, run_inprocess
from support.factory import make_drafter, make_mla_drafter, make_mxfp4_target, make_spec, quantized_copy

DRAFTER = EXAMPLE / "eagle3-safeai"
EXACT = (
    "per_prompt",
    "acceptance_per_position",
    "mean_acceptance_length",
    "num_drafts",
    "num_accepted",
    "histogram",
    "all_positions",
    "target_distinct_token_ratio",
    "skipped_prompts",
)


def verify(run, target, *extra, drafter=DRAFTER, env=None):
    return run(
        "verify",
        drafter,
        "--target",
        target,
        "--prompts",
        EXAMPLE / "prompts.jsonl",
        "--device",
        "cpu",
        *EXAMPLE_IDS,
        *extra,
        env=env,
    )


def test_mla_drafter_is_refused_naming_the_engine_that_serves_it(tmp_path):
    mla, _ = make_mla_drafter(tmp_path / "mla", hidden=128, vocab=1024, layer_output_ids=(1, 2, 3))
    r = run_inprocess("verify", mla, "--target", EXAMPLE / "target", "--max-prompts", "1", "--device", "cpu")
    assert_clean_failure(r, contains="MLA")
    assert "--engine vllm" in r.err


NVFP4 = {
    "modelopt": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16},
    "compressed-tensors": {
        "quant_method": "compressed-tensors",
        "format": "nvfp4-pack-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "format": "nvfp4-pack-quantized",
                "weights": {"num_bits": 4, "type": "float", "group_size": 16},
            }
        },
    },
}


@pytest.mark.parametrize("dialect", sorted(NVFP4))
def test_nvfp4_target_is_refused(tmp_path, dialect):
    target = quantized_copy(EXAMPLE / "target", tmp_path / "t", NVFP4[dialect])
    r = verify(run_inprocess, target, "--max-prompts", "1")
    assert_clean_failure(r, contains="NVFP4-quantized")
    assert "--engine vllm" in r.err


def test_mxfp4_target_is_never_dequantised_silently(tmp_path):
    target = quantized_copy(EXAMPLE / "target", tmp_path / "t", {"quant_method": "mxfp4"})
    r = verify(run_inprocess, target, "--max-prompts", "1")
    assert_clean_failure(r, contains="MXFP4-quantized")
    assert "--engine vllm" in r.err and "--dequantize-mxfp4" in r.err
    assert_clean_failure(
        verify(run_inprocess, EXAMPLE / "target", "--max-prompts", "1", "--dequantize-mxfp4"),
        contains="not MXFP4-quantized",
    )
    assert_clean_failure(
        verify(run_inprocess, target, "--dequantize-mxfp4", "--engine", "vllm"), contains="is for the native engine"
    )


def test_mxfp4_target_dequantised_on_request_and_said_in_the_report(tmp_path):
    target = make_mxfp4_target(tmp_path / "gpt-oss", EXAMPLE / "target")
    drafter = make_drafter(
        tmp_path / "d", "speculators", make_spec(hidden=64, target_hidden=64, vocab=1024, draft_vocab=256)
    )
    r = run_inprocess(
        "verify",
        drafter,
        "--target",
        target,
        "--prompts",
        EXAMPLE / "prompts.jsonl",
        "--max-prompts",
        "3",
        "--max-new-tokens",
        "8",
        "--device",
        "cpu",
        "--dequantize-mxfp4",
        "--json",
    )
    assert r.code in (0, 1), r.err  # random weights: the lint's findings may fail the gate, the report stands
    report = r.json()
    assert report["engine"]["target_quantization"] == {"method": "mxfp4", "dequantized": True}
    assert report["dtype"] == "float32" and report["num_drafts"] > 0


# Formats transformers loads only with a package this machine may lack; where it has it, they are not covered here.
NEEDS = {
    "fp8": (
        "accelerate",
        {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
    ),
    "compressed-tensors": (
        "compressed_tensors",
        {
            "quant_method": "compressed-tensors",
            "format": "float-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float"}}},
        },
    ),
}


@pytest.mark.parametrize("method", sorted(NEEDS))
def test_quantization_transformers_cannot_load_here_is_one_line(tmp_path, method):
    run = run_cli  # PYTHONPATH's sitecustomize hides the package: a process of its own
    package, config = NEEDS[method]
    hide = tmp_path / "hide"  # where the package is installed (the gguf extra brings accelerate), hide it:
    hide.mkdir()  # a None in sys.modules is what importlib.util.find_spec reports as absent
    (hide / "sitecustomize.py").write_text(f"import sys\nsys.modules[{package!r}] = None\n")
    target = quantized_copy(EXAMPLE / "target", tmp_path / "t", config)
    r = verify(run, target, "--max-prompts", "1", env={"PYTHONPATH": str(hide)})
    assert_clean_failure(r, contains=f"cannot load its {method} quantization")
    assert "--engine vllm" in r.err


REMOTE_CONFIG = """from transformers import LlamaConfig


class TinyConfig(LlamaConfig):
    model_type = "eaglezoo_tiny"
"""
REMOTE_MODEL = """from transformers import LlamaForCausalLM

from .configuration_tiny import TinyConfig


class TinyForCausalLM(LlamaForCausalLM):
    config_class = TinyConfig
"""


def test_trust_remote_code_loads_a_target_that_ships_its_code(tmp_path):
    """The example target's weights under a model type only its own code defines."""
    target = tmp_path / "remote"
    shutil.copytree(EXAMPLE / "target", target)
    (target / "configuration_tiny.py").write_text(REMOTE_CONFIG)
    (target / "modeling_tiny.py").write_text(REMOTE_MODEL)
    cfg = json.loads((target / "config.json").read_text())
    cfg.update(
        model_type="eaglezoo_tiny",
        architectures=["TinyForCausalLM"],
        auto_map={
            "AutoConfig": "configuration_tiny.TinyConfig",
            "AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM",
        },
    )
    (target / "config.json").write_text(json.dumps(cfg))
    # refused before any remote module is copied, so in the test's process; the run that copies them is a process of
    # its own: transformers reads HF_HOME (where it copies them) once, at import
    refused = verify(run_inprocess, target, "--max-prompts", "3", "--max-new-tokens", "16")
    assert_clean_failure(refused, contains="could not be loaded")
    assert "--trust-remote-code" in refused.err
    env = {"HF_HOME": str(tmp_path / "hf")}
    r = verify(
        run_cli, target, "--max-prompts", "3", "--max-new-tokens", "16", "--json", "--trust-remote-code", env=env
    )
    plain = verify(run_inprocess, EXAMPLE / "target", "--max-prompts", "3", "--max-new-tokens", "16", "--json")
    assert r.code == 0 and plain.code == 0, r.err + plain.err
    assert r.json()["engine"]["trust_remote_code"] is True and plain.json()["engine"]["trust_remote_code"] is False
    assert r.json()["per_prompt"] == plain.json()["per_prompt"]
