"""A registry entry's floors reach verify, tune and doctor as one value (`Entry.floors(K, T)`, `Entry.floor_table(T)`),
and tune checks them with verify's own floor check."""

from __future__ import annotations

from eaglezoo.registry.schema import Entry
from eaglezoo.tune.model import Cell
from eaglezoo.tune.report import floor_checks
from eaglezoo.verify.report.gate import Floors, FloorTable

FLOORS = [
    {"k": 2, "temperature": 0.0, "per_position": [0.5, 0.3], "source": "t"},
    {"k": 4, "temperature": 0.0, "per_position": [0.6, 0.4, 0.2, 0.1], "mean_acceptance_length": 2.0, "source": "t"},
    {"k": 4, "temperature": 0.0, "condition": "code", "mean_acceptance_length": 2.5, "source": "t"},
    {"k": 3, "temperature": 0.0, "condition": "chat", "mean_acceptance_length": 1.5, "source": "t"},
    {"k": 4, "temperature": 1.0, "mean_acceptance_length": 1.8, "source": "t"},
]
ENTRY = Entry.model_validate(
    {
        "id": "e",
        "drafter": {"repo": "org/drafter"},
        "target": {"repo": "org/target"},
        "publisher": "tests",
        "sources": ["tests"],
        "eagle_version": "3",
        "null_reasons": {"hardware": "tests", "aux_layers": "tests"},
        "acceptance_floors": FLOORS,
    }
)


def test_the_floors_at_one_k_and_temperature_are_one_value():
    floors = ENTRY.floors(4, 0.0)
    assert floors == Floors(min_acceptance=[0.6, 0.4, 0.2, 0.1], min_al=2.0, condition_floors={"code": 2.5})
    assert floors.whole() == Floors(min_acceptance=[0.6, 0.4, 0.2, 0.1], min_al=2.0)
    assert floors.by_condition() == Floors(condition_floors={"code": 2.5})
    assert ENTRY.floors(4, 1.0) == Floors(min_al=1.8)  # like with like: the temperature's own
    assert not ENTRY.floors(5, 0.0) and "none applied at K=5 T=0" in ENTRY.floors_note(5, 0.0)
    assert ENTRY.floors_note(4, 0.0) is None


def test_the_table_serves_verify_tune_and_doctor():
    table = ENTRY.floor_table(0.0)
    assert table.at(4) == ENTRY.floors(4, 0.0) and not table.at(7)
    assert table.whole() == {2: Floors(min_acceptance=[0.5, 0.3]), 4: ENTRY.floors(4, 0.0).whole()}  # K=3: a condition
    assert table.covering(2) == [0.5, 0.3]
    assert table.covering(3) == [0.5, 0.3]  # the deepest shallower K's: positions 1..2 draft as at K=2
    assert table.covering(1) == [0.5]
    assert table.covering(6) == [0.6, 0.4, 0.2, 0.1]
    assert FloorTable().covering(3) is None


def cell(k: int, c: int, rates: list[float] | None, al: float | None) -> Cell:
    return Cell(
        k=k,
        concurrency=c,
        output_tokens_per_s=100.0,
        mean_tpot_ms=None,
        acceptance_length=al,
        acceptance_per_position=rates,
        repeats=[100.0],
        interval=[100.0, 100.0],
        interval_coverage=0.5,
        spread_pct=0.0,
        passes_per_repeat=1,
        latency=None,
    )


def test_tune_checks_each_cell_as_verify_checks_a_run():
    grid = [cell(4, 1, [0.7, 0.5, 0.1, 0.1], 2.4), cell(4, 8, [0.7, 0.5, 0.3, 0.2], 1.9), cell(2, 1, None, None)]
    checked, failures, notes = floor_checks(grid, 4, ENTRY.floor_table(0.0).whole() | {6: Floors(min_al=3.0)})
    assert failures == [
        "K=4 at concurrency 1: acceptance at position 3 is 0.100 < 0.2",
        "K=4 at concurrency 8: mean acceptance length 1.900 < 2.0",
    ]
    assert checked["4"].per_position == [0.6, 0.4, 0.2, 0.1] and checked["4"].mean_acceptance_length == 2.0
    assert notes == ["the registry entry's floors at K=6 were not checked: tune measured K up to 4"]
