"""Files that match two dialects (doctor/ambiguity.py): the example's SafeAILab EAGLE-3 drafter exported with NeMo's
tensor names (`model.layers.0.`, `model.fc`), TorchSpec's version marker carried in its config and its aux ids in
`eagle_config`. The strict reader refuses it ("ambiguous dialect: matches torchspec, nemo"); doctor reads each
dialect: TorchSpec's reader refuses the NeMo names (no reading), NeMo's leaves the convention of the ids open (no
documented one), so each convention is measured natively and the weights' own (layer outputs: boundary [2, 3, 4],
as the example was trained) accepts most. vLLM does not read dialects, so no server is needed to tell them apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import EXAMPLE
from safetensors.torch import save_file

from eaglezoo.doctor.ambiguity import Choice, prepare_settled, served_readings
from eaglezoo.doctor.trials import Reference
from eaglezoo.errors import Ambiguous
from eaglezoo.verify.run import WorkloadPlan, prepare


@pytest.fixture(scope="module")
def two_dialects(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dialects") / "d"
    folder.mkdir()
    cfg = json.loads((EXAMPLE / "eagle3-safeai" / "config.json").read_text())
    cfg.update(_torchspec_version="0.1.0", eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 3]})
    (folder / "config.json").write_text(json.dumps(cfg))
    state = torch.load(EXAMPLE / "eagle3-safeai" / "pytorch_model.bin", weights_only=True)
    names = {k: "model." + k.replace("midlayer.", "layers.0.") for k in state}  # NeMo's names
    save_file({names[k]: v.contiguous() for k, v in state.items()}, folder / "model.safetensors")
    return folder


def plan(folder: Path) -> WorkloadPlan:
    return WorkloadPlan(
        folder, EXAMPLE / "target", "target", prompts_file=EXAMPLE / "prompts.jsonl", max_prompts=8, max_new_tokens=24
    )


def test_the_strict_reader_refuses_the_dialect_as_ambiguous(two_dialects):
    with pytest.raises(Ambiguous) as refused:
        prepare(plan(two_dialects))
    assert refused.value.fact == "dialect" and refused.value.values == ("torchspec", "nemo")


def test_each_dialect_is_read_and_the_trained_reading_kept(two_dialects):
    work, settled = prepare_settled(plan(two_dialects), Reference(), lambda *a, **kw: None)
    assert settled is not None, "refused"
    layer_output = Choice("dialect", "nemo", (Choice("aux_convention", "layer-output"),))
    assert set(settled.measured) == {layer_output, Choice("dialect", "nemo", (Choice("aux_convention", "boundary"),))}
    assert settled.trained == layer_output, settled.said()
    assert work.drafter.dialect == "nemo" and list(work.drafter.spec.aux.boundary()) == [2, 3, 4]
    said = settled.said()
    assert "ambiguous dialect: matches torchspec, nemo" in said
    assert "the weights were trained for the nemo dialect and aux ids in the layer-output convention" in said, said
    assert settled.trained.flag() == "--from nemo --aux-convention layer-output"


def test_the_served_folder_is_read_in_each_dialect(two_dialects):
    """Read as a served folder is (ids of no documented convention allowed: vLLM reads them its own way), both
    dialects read it; the server's acceptance tells which reading's trial it matches."""
    readings = served_readings(two_dialects)
    assert {c.said() for c, _ in readings if c} == {"the torchspec dialect", "the nemo dialect"}
