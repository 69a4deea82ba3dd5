"""What a model card shows of the registry beside a pushed run, as plain values: registry/listing.py builds them
(`beside_run`), hub/card.py renders them; kept free of heavy imports, since the registry's commands import it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CardFigure:
    """A registry figure as the card shows it: whose, its value with its conditions, and what keeps it from being
    compared with the pushed run (empty: comparable)."""

    entry: str  # the entry and origin: `tiny-example-eagle31 (reported)`
    label: str  # `2.27 (K=3, T=0, MT-Bench x80, vllm 0.10.1)`
    differs: tuple[str, ...] = ()


@dataclass(frozen=True)
class CardComparison:
    """The pushed run's acceptance length beside the registry's figures of its target (registry/listing.py
    `beside_run`): those taken under the same conditions side by side, the others apart with what differs."""

    measured: str  # the run's own label, in the same shape
    comparable: tuple[CardFigure, ...]
    apart: tuple[CardFigure, ...]
