"""The gate's pure parts: which rows --max-prompts takes from a suite, when an entry's floors may gate a run (like
with like) and what each floor's check says, and the reproduction a report carries."""

from __future__ import annotations

from eaglezoo.reproduce import Reproduction, command_line, reproduction
from eaglezoo.verify.report import Basis, Floors, Gate, gated, not_like_with_like
from eaglezoo.verify.report.models import Tallied
from eaglezoo.verify.workload import Prompt, PromptSet, select_rows

SET = PromptSet(name="suite:robustness", sha256="a" * 64, rows=10, taken=10, selection="all 10 rows")
BASIS = Basis(prompt_set="suite:robustness", prompts_sha256="a" * 64, engine=None, k=3, temperature=0.0)
FIGURES = Tallied(
    acceptance_per_position=[0.6, 0.3, 0.1], mean_acceptance_length=2.0, num_drafts=10, num_accepted=10, histogram=[]
)


def test_a_suite_is_sampled_round_robin_over_its_conditions():
    prompts = [Prompt(prompt=str(i), bucket=b) for i, b in enumerate("aaaabbbbcc")]
    rows, how = select_rows(prompts, 5, spread=True)
    assert rows == [0, 1, 4, 5, 8]  # a, b, c, then a second a and b
    assert "3 of 3 conditions taken" in how
    rows, how = select_rows(prompts, 2, spread=True)
    assert rows == [0, 4] and "give --max-prompts 3 or more" in how
    assert select_rows(prompts, 2, spread=False)[0] == [0, 1]  # a file: its first rows, as --max-prompts says
    assert select_rows(prompts, None, spread=True) == (list(range(10)), "all 10 rows")


def test_floors_gate_only_the_whole_set_they_were_measured_on_and_their_engine():
    assert not_like_with_like(BASIS, SET, "native") == []
    part = SET.model_copy(update={"taken": 4})
    assert not_like_with_like(BASIS, part, "native") == [
        "this run took 4 of the 10 rows of suite:robustness (--max-prompts)"
    ]
    other = SET.model_copy(update={"name": "default", "sha256": "b" * 64})
    assert not_like_with_like(BASIS, other, "native") == [
        "the floors were measured on suite:robustness, this run on default"
    ]
    on_vllm = BASIS.model_copy(update={"engine": "vllm"})
    assert not_like_with_like(on_vllm, SET, "native") == [
        "the floors were measured on the vllm engine, this run on native"
    ]
    unreadable = BASIS.model_copy(update={"prompts_sha256": None})
    assert "cannot be read here" in not_like_with_like(unreadable, SET, "native")[0]


def test_compared_floors_give_the_difference_and_never_fail_the_run():
    gate = Gate(entry=Floors(min_acceptance=[0.9, 0.2]), measured_on=BASIS)
    _, failures, _, result = gated(gate, FIGURES, {}, [], SET.model_copy(update={"taken": 3}), "native")
    assert failures == [] and result.verdict == "compared, not gated"
    first = result.checks[0]
    assert (first.gated, first.met, round(first.difference, 6)) == (False, False, -0.3)
    _, failures, _, result = gated(gate, FIGURES, {}, [], SET, "native")
    assert result.verdict == "FAIL" and failures == ["acceptance at position 1 is 0.600 < 0.9"]


def test_a_stated_floor_is_added_to_the_entrys_never_in_place_of_them():
    gate = Gate(stated=Floors(min_al=1.0), entry=Floors(min_acceptance=[0.9]), measured_on=BASIS)
    thresholds, failures, _, result = gated(gate, FIGURES, {}, [], SET, "native")
    assert {c.source for c in result.checks} == {"command line", "registry"}
    assert failures == ["acceptance at position 1 is 0.600 < 0.9"] and result.verdict == "FAIL"
    assert thresholds.min_al == 1.0 and thresholds.min_acceptance == [0.9]


def test_a_condition_never_measured_is_said_not_failed():
    gate = Gate(entry=Floors(condition_floors={"context:512": 1.5}), measured_on=BASIS)
    _, failures, notes, result = gated(gate, FIGURES, {}, [], SET, "native")
    assert failures == [] and result.checks[0].met is None
    assert notes == ["no prompt of condition context:512 was measured: its floor (1.5) was not checked"]


def test_a_reproduction_outside_a_command_names_no_command_and_reads_back():
    assert command_line() is None
    rep = reproduction(engine="native", prompt_set="default", prompts_sha256="c" * 64, seed=3, bootstrap_seed=0)
    assert rep.command is None and rep.machine is not None and rep.machine.cpu
    assert Reproduction.model_validate(rep.model_dump(mode="json")) == rep
    lines = rep.lines()
    assert lines[0] == "rerun: (built by a library call)" and "seeds: sampling 3, bootstrap 0" in lines


def test_gpus_are_named_from_the_nvidia_drivers_files(tmp_path, monkeypatch):
    """The driver's /proc files as it writes them (one folder per GPU): no subprocess, no torch import."""
    from eaglezoo import reproduce

    for bus, model in (("0000:19:00.0", "NVIDIA H100 80GB HBM3"), ("0000:3b:00.0", "NVIDIA H100 80GB HBM3")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(f"Model: \t\t {model}\nIRQ:   \t\t 42\nGPU UUID: \t GPU-1\n")
    monkeypatch.setattr(reproduce, "NVIDIA_GPUS", tmp_path)
    assert reproduce.gpu_names() == ["NVIDIA H100 80GB HBM3"] * 2


def test_a_condition_floor_naming_no_set_gates_any_whole_set_holding_it():
    anywhere = Basis(prompt_set=None, k=3, temperature=0.0)
    assert not_like_with_like(anywhere, SET, "native") == []
    assert not_like_with_like(anywhere, SET.model_copy(update={"taken": 2}), "native") != []
    gate = Gate(conditions=Floors(condition_floors={"x": 2.5}), conditions_measured_on=anywhere)
    _, failures, _, result = gated(gate, FIGURES, {"x": 2.0}, [], SET, "native")
    assert failures == ["condition x: acceptance length 2.000 < 2.5"] and result.entry_floors == "gated"
