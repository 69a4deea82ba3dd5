"""An ambiguous fact settled by trying (doctor/ambiguity.py), on real files: the example's EAGLE 3.1 drafter laid out
as SpecForge lays a drafter out, whose stored `norm_output` is ambiguous (its meaning changed with SpecForge PR #879:
the strict reader refuses it). Each reading is measured natively on the example target, and the weights' own, the
one that accepts most, is the one the workload reads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLE

from eaglezoo.doctor.ambiguity import Choice, prepare_settled, served_readings
from eaglezoo.doctor.trials import Reference
from eaglezoo.errors import Ambiguous
from eaglezoo.verify.run import WorkloadPlan, prepare


@pytest.fixture(scope="module")
def specforge(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("specforge") / "d"
    shutil.copytree(EXAMPLE / "eagle31-safeai", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(architectures=["LlamaForCausalLMEagle3"], eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 2, 3]})
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def plan(folder: Path) -> WorkloadPlan:
    return WorkloadPlan(
        folder, EXAMPLE / "target", "target", prompts_file=EXAMPLE / "prompts.jsonl", max_prompts=8, max_new_tokens=24
    )


def test_the_strict_reader_refuses_it_as_ambiguous(specforge):
    with pytest.raises(Ambiguous) as refused:
        prepare(plan(specforge))
    assert refused.value.fact == "norm_output" and refused.value.values == (True, False)


def test_each_reading_is_measured_and_the_trained_one_kept(specforge):
    work, settled = prepare_settled(plan(specforge), Reference(), lambda *a, **kw: None)
    assert settled is not None and settled.trained == Choice("norm_output", True), settled.said()
    assert work.drafter.spec.norm_output is True
    accepted = {c.value: a.mean_acceptance_length for c, a in settled.measured.items()}
    assert accepted[True] > accepted[False] + 0.05, accepted
    assert "the weights were trained for norm_output=true" in settled.said()


def test_the_served_folder_is_read_as_stored(specforge):
    """vLLM reads a stored flag as stored: one reading of the served folder (only an absent key has two)."""
    [(choice, drafter)] = served_readings(specforge)
    assert choice is None and drafter.spec.norm_output is True
