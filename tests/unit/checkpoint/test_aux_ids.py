"""The aux-id conventions (eaglezoo/checkpoint/formats/aux_ids.py): each key converts to boundary ids and back. Their
agreement with vLLM's own resolvers runs vLLM's code: tests/engine/test_aux_ids_vs_vllm.py."""

from __future__ import annotations

from eaglezoo.checkpoint.formats import aux_ids


def test_each_key_converts_both_ways():
    for key in (aux_ids.EAGLE_TOP, aux_ids.DFLASH_TARGET, aux_ids.DSPARK_TARGET, aux_ids.DEEPSPEC_TARGET):
        assert key.from_boundary(key.to_boundary([3, 5])) == [3, 5]
    assert aux_ids.DFLASH_TARGET.to_boundary([1, 9]) == [2, 10]
    assert aux_ids.dspark_target_key({"model_type": "deepseek_v41"}).to_boundary([58]) == [58]
