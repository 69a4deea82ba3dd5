"""What a verify report says of the prompts it measured, apart from reading them (workload.py): the prompt set
(`PromptSet`), the prompts not measured (`Skipped`, built where they are skipped and carried by the workload to the
report) and the one rule for a bucket's name (`bucket_problem`), which the prompt reader and the report's readers
share. A leaf: the report models import it, and the workload that reads prompts."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


class PromptSet(BaseModel):
    """The prompt set a run measured: its name, its hash, its size, and which of its rows were taken."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """`default` (the shipped set), `suite:NAME`, or the file's path."""
    sha256: str
    """The sha256 of its bytes as read."""
    rows: int
    """Its rows."""
    taken: int
    """The rows this run took (measured or skipped with their reason)."""
    selection: str
    """How they were taken: every row, the first N, or N across its conditions (round robin)."""

    @property
    def complete(self) -> bool:
        return self.taken == self.rows


BUCKET_UNSEEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def bucket_problem(name: str) -> str | None:
    """What is wrong with a bucket's name, or None: the one rule, at both ends. The prompt reader refuses a row
    that breaks it; the saved-report reader (verify/saved.py) refuses a report that does, so what verify writes,
    its readers read."""
    if not name.strip():
        return "is blank; expected a name of visible text"
    found = BUCKET_UNSEEN.search(name)
    if found is None:
        return None
    c = found.group()
    what = (
        "a bidirectional control"
        if c in "\u061c\u200e\u200f" or "\u202a" <= c <= "\u202e" or "\u2066" <= c <= "\u2069"
        else "a lone surrogate"
        if "\ud800" <= c <= "\udfff"
        else "a control character"
    )
    return f"holds {what} (U+{ord(c):04X}); expected one line of text without control characters"


def _bucket(name: str) -> str:
    problem = bucket_problem(name)  # the prompt reader's own rule: what verify writes, its readers read
    if problem:
        raise ValueError(f"a bucket name that {problem}")
    return name


Bucket = Annotated[str, AfterValidator(_bucket)]


class Skipped(BaseModel):
    # a prompt not measured (it does not fit the context or the engine), with why: a verify report's skipped_prompts

    model_config = ConfigDict(extra="forbid")

    index: Annotated[int, Field(ge=0)]
    bucket: Bucket
    reason: str
    tokens: Annotated[int, Field(ge=0)] | None = None
