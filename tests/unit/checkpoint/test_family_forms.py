"""The families beside EAGLE-3 read into the one spec, and converted between their native and speculators forms:
every tensor accounted for, round trips that give back the same bytes."""

from __future__ import annotations

import json

import pytest
from safetensors import safe_open
from support import families as F

from eaglezoo.checkpoint.read import read_config, read_drafter
from eaglezoo.convert import ConvertRequest, apply, plan
from eaglezoo.errors import EaglezooError

MAKERS = {"dflash": F.zlab_dflash, "dspark": F.deepspec_dspark, "peagle": F.peagle_native}
SPECULATORS = {"dflash": "speculators-dflash", "dspark": "speculators-dspark", "peagle": "speculators-peagle"}


def convert(src, out, to):
    return apply(plan(ConvertRequest(source=src, to=to)), out)


def tensors(folder) -> dict[str, bytes]:
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return {n: f.get_tensor(n).numpy().tobytes() for n in f.keys()}  # noqa: SIM118 - safe_open is not a dict


def test_each_native_form_reads_into_its_family(tmp_path):
    dflash = read_drafter(F.zlab_dflash(tmp_path / "d"))
    assert (dflash.dialect, dflash.spec.family) == ("dflash", "dflash")
    assert dflash.spec.aux.boundary() == [1, 3]  # target_layer_ids [0, 2] are "after layer i"
    assert (dflash.spec.family_fields.block_size, dflash.spec.family_fields.mask_token_id) == (4, 31)
    dspark = read_drafter(F.deepspec_dspark(tmp_path / "s"))
    assert (dspark.dialect, dspark.spec.family, dspark.spec.family_fields.markov_rank) == ("dspark", "dspark", 2)
    peagle = read_drafter(F.peagle_native(tmp_path / "p"))
    assert (peagle.dialect, peagle.spec.family, peagle.spec.family_fields.mask_token_id) == ("peagle", "peagle", 29)


@pytest.mark.parametrize("family", list(MAKERS))
def test_round_trips_are_byte_identical(tmp_path, family):
    native = MAKERS[family](tmp_path / "native")
    record = convert(native, tmp_path / "spec", "speculators")
    assert read_drafter(tmp_path / "spec").dialect == SPECULATORS[family]
    assert set(record["renames"]) == set() and record["drops"] == {}
    convert(tmp_path / "spec", tmp_path / "back", "native")
    assert json.loads((tmp_path / "back" / "config.json").read_text()) == json.loads(
        (native / "config.json").read_text()
    )
    assert tensors(tmp_path / "back") == tensors(native)
    convert(tmp_path / "back", tmp_path / "spec2", "speculators")
    for name in ("config.json", "model.safetensors"):
        assert (tmp_path / "spec2" / name).read_bytes() == (tmp_path / "spec" / name).read_bytes()


def test_speculators_ids_are_boundary_ids(tmp_path):
    convert(F.zlab_dflash(tmp_path / "n"), tmp_path / "s", "speculators")
    cfg = json.loads((tmp_path / "s" / "config.json").read_text())
    assert cfg["aux_hidden_state_layer_ids"] == [1, 3]
    assert cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] == 3  # block 4, anchor = bonus


def test_a_tensor_the_family_lacks_is_refused(tmp_path):
    import torch
    from safetensors.torch import save_file

    folder = F.zlab_dflash(tmp_path / "n")
    from safetensors.torch import load_file

    t = load_file(str(folder / "model.safetensors"))
    t["stray.weight"] = torch.zeros(2)
    save_file(t, str(folder / "model.safetensors"))
    with pytest.raises(EaglezooError, match="stray.weight"):
        read_drafter(folder)


def test_deepspec_eagle3_reads_as_eagle3(tmp_path):
    cfg = {
        "architectures": ["Qwen3Eagle3Model"],
        **F.BODY,
        "target_layer_ids": [0, 1, 2, 3, 4],
        "ttt_length": 7,
        "num_target_layers": 8,
        "draft_num_hidden_layers": 1,
        "draft_vocab_size": F.VOCAB,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    d = read_config(tmp_path / "config.json")
    assert (d.dialect, d.spec.family, d.spec.aux.boundary()) == ("deepspec-eagle3", "eagle3", [1, 2, 3, 4, 5])


@pytest.mark.parametrize(
    "cfg,what",
    [
        (
            {
                "architectures": ["DeepseekV4ForCausalLM"],
                "dspark_block_size": 5,
                "dspark_target_layer_ids": [58, 59, 60],
            },
            "DSpark heads inside",
        ),
        ({"speculators_model_type": "mtp", "architectures": ["MTPSpeculator"]}, "MTP head"),
        ({"architectures": ["Qwen3ForCausalLM"], "pard_token": 151669}, "PARD"),
    ],
)
def test_other_decoders_are_named_not_read(tmp_path, cfg, what):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EaglezooError) as exc:
        read_config(tmp_path / "config.json")
    assert what in exc.value.message and exc.value.hint
