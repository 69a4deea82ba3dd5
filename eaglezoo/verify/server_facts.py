"""What a server says about itself, held by a type that refuses what no vLLM server could say: a context of no
tokens or of more than any model has, a draft depth past eaglezoo's bounds, a K table vLLM would not have started
with. The one rule for a K table is here too: doctor's planned deployment is held to it before vLLM starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from ..errors import EngineError, printable
from ..limits import MAX_K, MAX_MODEL_LEN

LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


@dataclass(frozen=True)
class ServerFacts:
    """What a vLLM server says about itself: `/version`, `/v1/models` and, in dev mode (`VLLM_SERVER_DEV_MODE=1`),
    `/server_info`'s speculative and model config. Only named fields are kept: the config holds secrets too
    (`hf_token`). A fact the server states out of bounds is refused where it is held (`__post_init__`)."""

    url: str
    version: str | None
    model: str  # the name requests use
    root: str  # the path or repo the target was loaded from
    max_model_len: int | None
    dev_mode: bool  # /server_info answered: the fields below are read, not guessed
    method: str | None = None
    drafter: str | None = None
    k: int | None = None
    k_table: list[list[int]] | None = None  # num_speculative_tokens_per_batch_size
    draft_sample_method: str | None = None
    dtype: str | None = None
    quantization: str | None = None

    def __post_init__(self) -> None:
        problem = (
            out_of_bounds("max_model_len", self.max_model_len, 1, MAX_MODEL_LEN)
            or out_of_bounds("num_speculative_tokens", self.k, 1, MAX_K)
            or (k_table_problem(self.k_table, None) if self.k_table is not None else None)
        )
        if problem:
            raise EngineError(
                f"the server at {self.url} answers out of bounds: {problem}; no vLLM server runs so, "
                "so nothing it says is taken as measured",
                hint="point --endpoint at the vLLM server itself",
            )

    def local(self, path: str | None) -> Path | None:
        """A path the server named, where it is a folder this machine can read (the server runs here)."""
        if path is None or urlparse(self.url).hostname not in LOOPBACK or not Path(path).is_dir():
            return None
        return Path(path)


def is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def out_of_bounds(name: str, value, low: int, high: int) -> str | None:
    """What is wrong with a whole number that must lie in [low, high] (None: said nothing, or right)."""
    if value is None or (is_count(value) and low <= value <= high):
        return None
    return f"{name} is {printable(str(value))[:40]}, not a whole number from {low} to {high}"


def k_table(value) -> list[list[int]] | None:
    """vLLM's num_speculative_tokens_per_batch_size as rows of three whole numbers, else None (its shape wrong)."""
    if not isinstance(value, list) or not value:
        return None
    rows = [list(row) for row in value if isinstance(row, list | tuple) and len(row) == 3]
    return rows if len(rows) == len(value) and all(is_count(x) for row in rows for x in row) else None


def k_table_problem(value, k: int | None) -> str | None:
    """What vLLM would refuse in a K table (vllm/v1/spec_decode/dynamic/utils.py:30-54: three whole numbers a row,
    batch sizes from 1 with the first no larger than the last, K from 0) and, where the deployment's K is given,
    a K past it, which vLLM cuts to K without a word (utils.py:118-122). K is at most limits.MAX_K."""
    rows = k_table(value)
    if rows is None:
        return "num_speculative_tokens_per_batch_size must be a list of [first batch size, last batch size, K] rows"
    most = MAX_K if k is None else min(k, MAX_K)
    for row in rows:
        start, end, depth = row
        if not 1 <= start <= end:
            return (
                f"num_speculative_tokens_per_batch_size row {row}: its batch sizes must run from 1 up, the first "
                "no larger than the last"
            )
        if not 0 <= depth <= most:
            why = (
                f"past the deployment's K={k} (-k, at most {MAX_K})"
                if k is not None and depth > k
                else f"outside 0 to {most}"
            )
            return f"num_speculative_tokens_per_batch_size row {row}: K {depth} is {why}"
    return None
