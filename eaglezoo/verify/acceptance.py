"""Acceptance from chain drafts against the target's greedy continuation.

From every slot t the drafter proposes K tokens; the chain's accepted length is the number of
leading drafts equal to the target's tokens. Two views are reported:

* **decoding path**: the chains a real greedy speculative decoder visits (start after the prompt,
  then jump by accepted + 1), with a round whenever fewer than N tokens have been produced, as in
  vLLM. This is what vLLM's counters measure; `tests/support/reference_decode.py` reproduces it with a
  plain sequential decoding loop.
* **all positions**: every slot of the continuation; more samples, same drafter.

Mean acceptance length is counted as vLLM counts it: 1 + accepted / drafts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def accepted_lengths(drafts: torch.Tensor, tokens: torch.Tensor, first: int, last: int, start: int = 0) -> list[int]:
    """drafts [K, T - start]: depth i from slot t (column t - start) predicts tokens[t + i + 2].
    Slots first..last inclusive. (torch is imported here: the report, and every refusal before an engine runs,
    read this module without it.)"""
    import torch

    k = drafts.shape[0]
    if last < first:
        return []
    slots = torch.arange(first, last + 1, device=drafts.device)
    truth = torch.stack([tokens[slots + i + 2] for i in range(k)])
    matches = drafts[:, slots - start] == truth.to(drafts.device)
    return matches.long().cumprod(0).sum(0).tolist()


def decoding_path(accepted: list[int], max_new_tokens: int) -> list[int]:
    """The accepted lengths a greedy speculative decoder sees. accepted[j] belongs to the round
    started when j + 1 tokens had been produced; rounds run while fewer than max_new_tokens exist."""
    path, produced = [], 1
    while produced < max_new_tokens and produced - 1 < len(accepted):
        a = accepted[produced - 1]
        path.append(a)
        produced += a + 1
    return path


@dataclass
class Tally:
    k: int
    accepted: list[int] = field(default_factory=list)

    def add(self, lengths: list[int]) -> None:
        self.accepted += lengths

    @property
    def num_drafts(self) -> int:
        return len(self.accepted)

    @property
    def num_accepted(self) -> int:
        return sum(self.accepted)

    def per_position(self) -> list[float]:
        n = max(1, self.num_drafts)
        return [sum(a > i for a in self.accepted) / n for i in range(self.k)]

    def mean_acceptance_length(self) -> float:
        return 1.0 + self.num_accepted / max(1, self.num_drafts)

    def histogram(self) -> list[int]:
        return [sum(a == j for a in self.accepted) for j in range(self.k + 1)]

    def summary(self) -> dict:
        return {
            "acceptance_per_position": self.per_position(),
            "mean_acceptance_length": self.mean_acceptance_length(),
            "num_drafts": self.num_drafts,
            "num_accepted": self.num_accepted,
            "histogram": self.histogram(),
        }


def by_k_exact(lengths: list[list[int]], k_max: int, max_new_tokens: int) -> list[dict]:
    """Acceptance at every K <= k_max from one run's chains, exactly: a K-token draft is the first K tokens of the
    k_max-token draft from the same slot (depth i never reads deeper drafts), so from slot t it accepts
    min(a_t, K); the decoding path a run at K visits is replayed on those lengths. `lengths`: every slot's
    accepted length, per prompt."""
    rows = []
    for k in range(1, k_max + 1):
        tally = Tally(k)
        for per_slot in lengths:
            tally.add(decoding_path([min(a, k) for a in per_slot], max_new_tokens))
        rows.append({"k": k, **tally.summary()})
    return rows


def by_k_estimate(per_position: list[float]) -> list[dict]:
    """Acceptance at every K <= K_max estimated from a K_max run's per-position rates: 1 + the first K rates.
    An estimate: a run at K visits other slots than the K_max run did."""
    return [
        {"k": k, "acceptance_per_position": per_position[:k], "mean_acceptance_length": 1 + sum(per_position[:k])}
        for k in range(1, len(per_position) + 1)
    ]


RESAMPLES, SEED = 2000, 0
INTERVAL = f"95% percentile bootstrap over prompts, {RESAMPLES} resamples, seed {SEED}"


def pooled_length(requests: list[list[int]]) -> float:
    """Acceptance length of some requests' verify steps, pooled as vLLM counts it: 1 + accepted / drafts."""
    drafts = sum(len(r) for r in requests)
    return 1 + sum(map(sum, requests)) / drafts if drafts else 1.0


def bootstrap_interval(samples: list, statistic) -> list[float]:
    """The 95% percentile interval of statistic(a resample of samples), prompts drawn with replacement."""
    rng = random.Random(SEED)
    values = sorted(statistic([samples[rng.randrange(len(samples))] for _ in samples]) for _ in range(RESAMPLES))
    return [values[int(0.025 * RESAMPLES)], values[int(0.975 * RESAMPLES) - 1]]
