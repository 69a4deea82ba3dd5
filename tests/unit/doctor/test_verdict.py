"""The verdict from the measurements: a suspect is the cause when its fix restores the acceptance; with no
suspect, the server below the reference is the engine's doing, and both below the floors the drafter's (on its own
prompts) or the workload's."""

from __future__ import annotations

from dataclasses import replace

from eaglezoo.doctor.report import Acceptance
from eaglezoo.doctor.suspects import Suspect
from eaglezoo.doctor.verdict import Evidence, judge, undrafted
from eaglezoo.verify.endpoint import Completion


def measured(source: str, length: float, rates=(0.6, 0.4, 0.2), spread: float = 0.1) -> Acceptance:
    return Acceptance(
        source=source,
        mean_acceptance_length=length,
        interval=[length - spread, length + spread],
        per_position=list(rates),
        prompts=12,
        drafts=100,
    )


def evidence(server: float, trials: dict, suspects=(), **fields) -> Evidence:
    """`fields`: Evidence's own (floors, entry_prompts, requests, k_table), over no floors, the entry's prompts, no
    requests and no K table; k_zero follows the K table."""
    healthy = Evidence(
        server=measured("server", server),
        requests=[],
        trials={s: measured(s, v) for s, v in trials.items()},
        suspects=list(suspects),
        floors=None,
        entry_prompts=True,
        k_zero=[],
        k_table=None,
    )
    k_zero = [r for r in fields.get("k_table") or [] if r[2] == 0]
    return replace(healthy, **fields, k_zero=k_zero)


AUX = Suspect("aux-ids-default", "engine-config", "ids", "set ids", fixed=object())
FLAGS = Suspect("norm-flags-dropped", "engine-config", "flags", "set flags", fixed=object())


def test_the_fix_that_restores_is_the_cause():
    e = evidence(
        1.7,
        {"as served": 1.7, "fix: aux-ids-default": 1.75, "fix: norm-flags-dropped": 2.25, "reference": 2.26},
        [AUX, FLAGS],
    )
    verdict, summary, findings, _ = judge(e)
    assert verdict == "engine-config" and summary == "flags"
    assert [(f.cause, f.confirmed) for f in findings] == [("norm-flags-dropped", True), ("aux-ids-default", False)]
    assert findings[0].restores == 2.25


def test_no_suspect_and_the_server_at_the_reference_is_healthy():
    verdict, summary, findings, notes = judge(
        evidence(2.25, {"as served": 2.25, "reference": 2.26}, floors=[0.5, 0.3, 0.2])
    )
    assert (verdict, findings, notes) == ("healthy", [], [])
    assert "meet the entry's floors" in summary


def test_no_suspect_and_the_server_below_the_reference_is_the_engine():
    verdict, _, findings, _ = judge(evidence(1.5, {"reference": 2.26}))
    assert verdict == "engine-config" and findings[0].cause == "server-below-reference"


def test_both_below_the_floors_is_the_drafter_on_its_prompts_and_the_workload_on_others():
    low = {"reference": 2.2}
    assert judge(evidence(2.2, low, floors=[0.7, 0.5, 0.3]))[0] == "drafter"
    verdict, _, findings, _ = judge(evidence(2.2, low, floors=[0.7, 0.5, 0.3], entry_prompts=False))
    assert verdict == "workload" and findings[0].cause == "workload-shift"


def test_a_k_table_sending_k_zero_is_seen_in_the_undrafted_tokens():
    requests = [
        Completion(tokens=list(range(33)), accepted=[1] * 10, num_spec_tokens=None),
        Completion(tokens=list(range(33)), accepted=[], num_spec_tokens=None),
    ]
    assert undrafted(requests) == (2 * 32 - 20, 64)
    verdict, _, findings, _ = judge(
        evidence(2.0, {"reference": 2.0}, requests=requests, k_table=[[1, 2, 0], [3, 256, 3]])
    )
    assert verdict == "engine-config" and findings[0].confirmed
    assert "[[1, 2, 3], [3, 256, 3]]" in findings[0].fix


def test_a_server_the_native_as_served_does_not_reproduce_is_noted():
    _, _, _, notes = judge(evidence(1.5, {"as served": 2.2, "reference": 2.2}))
    assert "something besides its files also differs" in notes[0]


def test_floors_of_a_shallower_k_hold_the_positions_they_share_and_a_thin_tail_is_flagged():
    rates = (0.6, 0.4, 0.25, 0.16, 0.12, 0.08, 0.06, 0.04)
    e = evidence(2.7, {"as served": 2.7, "reference": 2.7}, floors=[0.5, 0.3, 0.2])
    e = Evidence(**{**e.__dict__, "server": measured("server", 2.7, rates), "k": 8})
    verdict, _, findings, _ = judge(e)
    assert verdict == "engine-config" and findings[0].cause == "k-too-deep"
    assert "positions 4-8" in findings[0].what and "support K=3" in findings[0].what
    assert "cover positions 1-3 only" in findings[0].evidence[0]


def test_a_server_above_the_reference_is_no_fault():
    target = Suspect("target-fine-tuned", "target-mismatch", "the served target has other weights", "retrain")
    verdict, _, findings, notes = judge(evidence(2.4, {"as served": 2.4, "reference": 2.1}, [target]))
    assert (verdict, findings) == ("healthy", [])
    assert "not a fault" in notes[0]


def test_the_servers_acceptance_wins_over_eaglezoos_model_of_the_capture():
    """Where the server equals the reference prompt by prompt and the drafter as served (by eaglezoo's model of
    vLLM) does not, no aux-id capture is claimed: the model is what is wrong."""
    from eaglezoo.doctor.run import trust_server

    def prompts(source, values):
        return Acceptance(
            source=source,
            mean_acceptance_length=sum(values) / len(values),
            interval=[1.0, 3.0],
            per_position=[0.5],
            prompts=len(values),
            drafts=10,
            per_prompt=list(values),
        )

    server, reference, served = (
        prompts("server", [2.0, 2.5]),
        prompts("reference", [2.0, 2.5]),
        prompts("s", [1.9, 2.1]),
    )
    kept, notes = trust_server([AUX, FLAGS], {"as served": served, "reference": reference}, server)
    assert kept == [FLAGS] and "the server captures the layers the drafter was trained on" in notes[0]
    assert trust_server([AUX], {"as served": served, "reference": reference}, served)[0] == [AUX]  # server below
