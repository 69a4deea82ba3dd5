"""The serving path serve-config prints for a P-EAGLE drafter is one vLLM 0.32 accepts (issue 46): vLLM prefixes
`Eagle3` to any architecture under method eagle3 (vllm/transformers_utils/configs/eagle.py:55-64), so the native
form's `PeagleLlamaForCausalLM` became `Eagle3PeagleLlamaForCausalLM`, "not supported for now". The path, run as
printed (the convert step, then the command's target and --speculative-config), is handed to vLLM's own
`EngineArgs(...).create_engine_config()` in .venv-vllm: the whole config check `vllm serve` runs, no server started."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
from conftest import CLI_ENV, EXAMPLE, ROOT
from support.engine import CPU_ENV, VLLM_PY

pytestmark = pytest.mark.vllm

PARSE = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
args = EngineArgs(model=sys.argv[1], speculative_config=json.loads(sys.argv[2]), max_model_len=256, enforce_eager=True)
spec = args.create_engine_config().speculative_config
print(json.dumps({"method": spec.method, "parallel_drafting": spec.parallel_drafting,
                  "architectures": spec.draft_model_config.hf_config.architectures}))
"""


def eaglezoo(cwd, *args) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "eaglezoo", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        env={**CLI_ENV, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_vllm_accepts_the_printed_peagle_path(vllm_ready, tmp_path):
    sc = json.loads(eaglezoo(tmp_path, "serve-config", EXAMPLE / "peagle", "--target", EXAMPLE / "target", "--json"))
    if sc["convert_command"]:  # the path as printed: its convert step first
        eaglezoo(tmp_path, *shlex.split(sc["convert_command"])[1:])
    words = shlex.split(sc["command"])
    target, config = words[words.index("serve") + 1], words[words.index("--speculative-config") + 1]
    proc = subprocess.run(
        [str(VLLM_PY), "-c", PARSE, target, config],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        env={**CLI_ENV, **CPU_ENV},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    parsed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert parsed == {"method": "eagle3", "parallel_drafting": True, "architectures": ["LlamaForCausalLMEagle3"]}
    assert not [w for w in sc["warnings"] if "does not load" in w], sc["warnings"]  # nothing left to do by hand
