"""vLLM's speculative-decoding counters as a server's `/metrics` reports them, held by a type that refuses what no
engine could have counted: a count that is negative, past what a float64 counter counts one by one, or breaks
what every draft adds (vllm/v1/spec_decode/metrics.py:41-49, `SpecDecodingStats.observe_draft`: a draft adds at
most K draft tokens, accepts at most what it drafted, and counts position i once when it accepted more than i
tokens). A run's figures are the difference of two readings: a counter that went backwards is refused too."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import EngineError
from ..limits import MAX_K

MAX_COUNT = 2**53  # Prometheus counters are float64: past this they no longer count one by one
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class SpecDecodeCounters(BaseModel):
    """The fields of vLLM's `SpecDecodingStats` (vllm/v1/spec_decode/metrics.py:17-31), summed over its engines.
    K is the number of positions the server counts (one per speculative token, metrics.py:259-262)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_drafts: Count
    num_draft_tokens: Count
    num_accepted_tokens: Count
    num_accepted_tokens_per_pos: tuple[Count, ...] = Field(max_length=MAX_K)

    @model_validator(mode="after")
    def _as_drafts_add_up(self) -> SpecDecodeCounters:
        k = len(self.num_accepted_tokens_per_pos) or MAX_K
        if self.num_draft_tokens > k * self.num_drafts:
            raise ValueError(
                f"num_draft_tokens = {self.num_draft_tokens}, more than K={k} per draft over {self.num_drafts} drafts"
            )
        if self.num_accepted_tokens > self.num_draft_tokens:
            raise ValueError(
                f"num_accepted_tokens = {self.num_accepted_tokens}, more than the "
                f"{self.num_draft_tokens} tokens drafted (at most K={k} per draft)"
            )
        for pos, n in enumerate(self.num_accepted_tokens_per_pos):
            if n > self.num_drafts:
                raise ValueError(
                    f"num_accepted_tokens_per_pos = {n} at position {pos}, more than the {self.num_drafts} drafts"
                )
        return self

    @classmethod
    def read(cls, where: str, **values: Any) -> SpecDecodeCounters:
        """The counters, or one line naming the first that no engine could have counted."""
        try:
            return cls(**values)
        except ValidationError as exc:
            error = exc.errors()[0]
            if error["type"] == "value_error":
                what = str(error["ctx"]["error"])
            else:
                name = ".".join(str(part) for part in error["loc"][:1]) or "a counter"
                value = values.get(name)
                what = f"{name} = {value if not isinstance(value, tuple) else list(value)} ({error['msg'].lower()})"
            raise EngineError(
                f"{where} reports {what}: no engine counts that, so there is no measurement",
                hint="point --endpoint at the vLLM server itself; its counters are not a measurement",
            ) from None

    def since(self, before: SpecDecodeCounters, where: str) -> SpecDecodeCounters:
        """What the run added: each counter's growth, refused where one went backwards."""
        positions = len(self.num_accepted_tokens_per_pos)
        earlier = before.num_accepted_tokens_per_pos + (0,) * (positions - len(before.num_accepted_tokens_per_pos))
        pairs = [
            (name, getattr(before, name), getattr(self, name))
            for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
        ]
        pairs += [
            (f"num_accepted_tokens_per_pos at position {pos}", a, b)
            for pos, (a, b) in enumerate(zip(earlier, self.num_accepted_tokens_per_pos, strict=False))
        ]
        if len(before.num_accepted_tokens_per_pos) > positions:
            pairs.append(
                ("num_accepted_tokens_per_pos (its positions)", len(before.num_accepted_tokens_per_pos), positions)
            )
        for name, a, b in pairs:
            if b < a:
                raise EngineError(
                    f"{where}: {name} went backwards during the measurement ({a} then {b}): the "
                    "server restarted, or its counters are not vLLM's",
                    hint="measure again on a server that runs throughout (a vLLM server's counters only grow)",
                )
        return SpecDecodeCounters.read(
            where,
            **{name: b - a for name, a, b in pairs[:3]},
            num_accepted_tokens_per_pos=tuple(b - a for _, a, b in pairs[3 : 3 + positions]),
        )

    @classmethod
    def none(cls) -> SpecDecodeCounters:
        """Nothing counted: no drafts (a run that never reached the engine)."""
        return cls(num_drafts=0, num_draft_tokens=0, num_accepted_tokens=0, num_accepted_tokens_per_pos=())

    def __add__(self, other: SpecDecodeCounters) -> SpecDecodeCounters:
        """Two runs' counts together (one K: the positions add up one by one; nothing counted yet adds as zeros)."""
        mine, theirs = self.num_accepted_tokens_per_pos, other.num_accepted_tokens_per_pos
        return SpecDecodeCounters(
            num_drafts=self.num_drafts + other.num_drafts,
            num_draft_tokens=self.num_draft_tokens + other.num_draft_tokens,
            num_accepted_tokens=self.num_accepted_tokens + other.num_accepted_tokens,
            num_accepted_tokens_per_pos=tuple(
                a + b for a, b in zip(mine or (0,) * len(theirs), theirs or (0,) * len(mine), strict=True)
            ),
        )

    @property
    def mean_acceptance_length(self) -> float:
        """1 + accepted / drafts, pooled over every draft, as vLLM's own logger counts it (1.0 without drafts)."""
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else 1.0

    def acceptance_rates(self) -> list[float]:
        """Accepted at position i / drafts, at each position the engine counts (0.0 each without drafts)."""
        drafts = self.num_drafts
        return [n / drafts if drafts else 0.0 for n in self.num_accepted_tokens_per_pos]

    def acceptance_per_position(self, k: int) -> list[float]:
        """The rates at positions 0..K-1: a position the engine did not count is 0.0."""
        return (self.acceptance_rates() + [0.0] * k)[:k]


def prometheus_count(value: float) -> int:
    """A Prometheus sample as a count: a whole number (a negative or huge one is the counters' type's to refuse)."""
    if not float(value).is_integer():
        raise ValueError(value)
    return int(value)


def scraped(where: str, counts: dict[str, int], per_position: dict[int, int], hint: str) -> SpecDecodeCounters:
    """The counters one /metrics scrape gave (vLLM's or llama.cpp's, by vLLM's field names): positions 0 to K-1 and
    nothing else, then every count checked by the type."""
    if sorted(per_position) != list(range(len(per_position))):
        raise EngineError(
            f"{where} reports num_accepted_tokens_per_pos at positions {sorted(per_position)[:8]}, not 0 to K-1: "
            "no engine counts that, so there is no measurement",
            hint=hint,
        )
    return SpecDecodeCounters.read(
        where, **counts, num_accepted_tokens_per_pos=tuple(per_position[p] for p in sorted(per_position))
    )
