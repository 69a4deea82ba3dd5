"""vLLM's spec-decode counters as one typed value (verify/counters.py), named and shaped as vLLM's SpecDecodingStats
(vllm/v1/spec_decode/metrics.py:17-31): the rates are computed on it once, and verify's headline, tune's cells and
doctor's server figures are those rates, whichever engine counted."""

from __future__ import annotations

import pytest

from eaglezoo.doctor.run import server_acceptance
from eaglezoo.errors import EngineError
from eaglezoo.tune.measure import Samples, cell_of
from eaglezoo.verify import vllm_worker
from eaglezoo.verify.acceptance import Tally
from eaglezoo.verify.counters import SpecDecodeCounters
from eaglezoo.verify.endpoint import Completion
from eaglezoo.verify.report.build import headline_from_counters
from eaglezoo.verify.vllm_process import PassEvent, RequestResult, worker_result

COUNTED = SpecDecodeCounters(
    num_drafts=10, num_draft_tokens=30, num_accepted_tokens=12, num_accepted_tokens_per_pos=(6, 4, 2)
)
ENGINE = {"version": "0.32.0", "device": "cpu", "dtype": "float32", "start_s": 1.5}


def test_the_rates_are_vllms_own_arithmetic():
    assert COUNTED.mean_acceptance_length == 1 + 12 / 10
    assert COUNTED.acceptance_rates() == [0.6, 0.4, 0.2]
    assert COUNTED.acceptance_per_position(3) == [0.6, 0.4, 0.2]
    assert COUNTED.acceptance_per_position(5) == [0.6, 0.4, 0.2, 0.0, 0.0]  # a position not counted is 0
    assert COUNTED.acceptance_per_position(2) == [0.6, 0.4]


def test_no_drafts_is_a_length_of_one_and_no_acceptance():
    none = SpecDecodeCounters.none()
    assert (none.num_drafts, none.num_accepted_tokens_per_pos) == (0, ())
    assert none.mean_acceptance_length == 1.0
    assert none.acceptance_per_position(3) == [0.0, 0.0, 0.0]
    zero = SpecDecodeCounters(num_drafts=0, num_draft_tokens=0, num_accepted_tokens=0, num_accepted_tokens_per_pos=(0,))
    assert zero.acceptance_rates() == [0.0]


def test_two_runs_add_up_count_by_count():
    total = SpecDecodeCounters.none() + COUNTED + COUNTED
    assert total == SpecDecodeCounters(
        num_drafts=20, num_draft_tokens=60, num_accepted_tokens=24, num_accepted_tokens_per_pos=(12, 8, 4)
    )
    assert total.mean_acceptance_length == COUNTED.mean_acceptance_length
    other_k = SpecDecodeCounters(
        num_drafts=1, num_draft_tokens=2, num_accepted_tokens=0, num_accepted_tokens_per_pos=(0, 0)
    )
    with pytest.raises(ValueError):
        COUNTED + other_k  # two Ks: no one run counted that


def test_the_type_refuses_what_no_engine_counts():
    with pytest.raises(EngineError, match="num_accepted_tokens = 31, more than the 30 tokens drafted"):
        SpecDecodeCounters.read(
            "a test",
            num_drafts=10,
            num_draft_tokens=30,
            num_accepted_tokens=31,
            num_accepted_tokens_per_pos=(10, 10, 10),
        )


def test_the_worker_counts_by_the_types_own_field_names():
    """The worker runs without eaglezoo: what it emits is read into the type as it is, field for field."""
    emitted = {*vllm_worker.COUNTERS.values(), vllm_worker.PER_POSITION_FIELD}
    assert emitted == set(SpecDecodeCounters.model_fields)
    assert all(name.removeprefix("vllm:spec_decode_") in emitted for name in vllm_worker.COUNTERS)
    assert vllm_worker.PER_POSITION.removeprefix("vllm:spec_decode_") == vllm_worker.PER_POSITION_FIELD


def _pass(counters: dict, requests: int = 2) -> dict:
    request = {"tokens": [1, 2, 3], "e2e_s": 0.5, "ttft_s": 0.1, "accepted": [1, 0]}
    return {
        "event": "pass",
        "index": 0,
        "concurrency": requests,
        "wall_s": 1.0,
        "requests": [request] * requests,
        "counters": counters,
    }


def test_the_workers_result_stays_typed_to_the_report():
    counters = vllm_worker.delta(
        {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0, "num_accepted_tokens_per_pos": []},
        {"num_drafts": 10, "num_draft_tokens": 30, "num_accepted_tokens": 12, "num_accepted_tokens_per_pos": [6, 4, 2]},
    )
    result = worker_result([_pass(counters), {"event": "done"}], ENGINE, 1, None)
    first = result.passes[0]
    assert first.counters == COUNTED
    assert isinstance(first.requests[0], RequestResult) and first.requests[0].accepted == [1, 0]
    assert result.engine.start_s == 1.5


def test_a_worker_counting_what_no_engine_counts_is_no_result():
    bad = {"num_drafts": 1, "num_draft_tokens": 3, "num_accepted_tokens": 4, "num_accepted_tokens_per_pos": [1, 1, 1]}
    with pytest.raises(EngineError, match="without a complete result"):
        worker_result([_pass(bad), {"event": "done"}], ENGINE, 1, None)


def test_verifys_headline_is_the_counters_rates():
    tally = Tally(3)
    tally.add([2, 1, 0])
    s, note = headline_from_counters(COUNTED, tally, 3)
    assert s.acceptance_per_position == COUNTED.acceptance_per_position(3)
    assert s.mean_acceptance_length == COUNTED.mean_acceptance_length
    assert (s.num_drafts, s.num_accepted, s.histogram) == (10, 12, [1, 1, 1, 0])
    assert note and "(10 drafts, 12 accepted)" in note and "(3, 3)" in note


def test_tune_sums_the_passes_counters_and_takes_their_rates():
    samples = Samples(passes_per_repeat=2)
    samples.add([PassEvent.model_validate(_pass(COUNTED.model_dump())) for _ in range(2)])
    assert samples.counters == COUNTED + COUNTED
    cell = cell_of(3, 2, samples)
    assert cell.acceptance_length == COUNTED.mean_acceptance_length
    assert cell.acceptance_per_position == COUNTED.acceptance_rates()
    assert cell_of(0, 2, samples).acceptance_length is None  # K = 0 drafts nothing


def test_doctor_reads_the_server_from_the_same_rates():
    """Without per-request metrics doctor reads the server's counters: the same arithmetic as verify's."""
    requests = [Completion(tokens=[1, 2], accepted=None, num_spec_tokens=None)]
    got, notes = server_acceptance(requests, COUNTED, 3)
    assert got.mean_acceptance_length == COUNTED.mean_acceptance_length
    assert got.per_position == COUNTED.acceptance_rates() and got.drafts == 10
    assert notes and "no per-request acceptance" in notes[0]
