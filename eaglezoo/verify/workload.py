"""What every engine is given and what it returns: the prompts, the workload (drafter read once,
prompts tokenised once) and one engine's measurement. A leaf: engines import it, never `run.py`."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from ..checkpoint.problems import Finding
from ..checkpoint.read import Drafter
from ..checkpoint.spec import DrafterSpec
from ..errors import BadInput, UsageError
from ..fsutil import parse_json, regular_file
from ..limits import MAX_PROMPTS
from ..names import Thinking
from .counters import SpecDecodeCounters
from .prompt_set import PromptSet, Skipped, bucket_problem

if TYPE_CHECKING:
    from .report.models import ByKRow, Engine, Speedup, Tallied

Progress = Callable[..., None]  # progress(done, total, phase="...")


Turn = Annotated[str, StringConstraints(pattern=r"\S")]  # an earlier user turn: not blank


class Prompt(BaseModel):
    model_config = ConfigDict(strict=True)  # a prompt set's JSON types are taken as they are, never coerced

    prompt: str
    bucket: str = "default"  # the category, or the robustness condition
    chat: bool = False  # a user message: the target's chat template is applied when it has one
    system: str | None = None  # chat: a system message before it
    thinking: bool | None = None  # chat: the template's thinking switch (enable_thinking), where it has one
    context: Annotated[int, Field(ge=1)] | None = None  # this many target tokens of a long document before the question
    history: Annotated[list[Turn], Field(min_length=1)] | None = None  # chat: earlier user turns, each answered first
    temperature: Annotated[float, Field(ge=0, le=100)] | None = None  # this row's sampling temperature (else the run's)


SUITES = (
    "standard",
    "robustness",
)  # prompt suites shipped in eaglezoo/data/suites (their README names sources and licences)


def suite_path(name: str) -> Path:
    if name not in SUITES:
        raise UsageError(f"unknown suite {name!r}", hint=f"choose one of {', '.join(SUITES)}")
    return Path(str(resources.files("eaglezoo").joinpath("data", "suites", f"{name}.jsonl")))


DEFAULT_SET = "default"  # the shipped prompt set (eaglezoo/data/prompts.jsonl)


def prompt_set_name(path: Path | None) -> str:
    """A prompt set's name: `default` (the shipped set), `suite:NAME` for a shipped suite, else the file's path."""
    if path is None:
        return DEFAULT_SET
    for name in SUITES:
        if Path(path).resolve() == suite_path(name).resolve():
            return f"suite:{name}"
    return str(path)


def select_rows(prompts: list[Prompt], limit: int | None, spread: bool) -> tuple[list[int], str]:
    """The rows a run takes, in the set's order, and how they were chosen. `spread` (a suite): round robin over
    its conditions in the order they first appear (a row of each condition, then a second of each, ...), so
    that N rows sample every condition they can instead of the first few; deterministic, no randomness."""
    n = len(prompts)
    if limit is None or limit >= n:
        return list(range(n)), f"all {n} rows"
    if not spread:
        return list(range(limit)), f"the first {limit} of {n} rows (--max-prompts)"
    by_bucket: dict[str, list[int]] = {}
    for i, p in enumerate(prompts):
        by_bucket.setdefault(p.bucket, []).append(i)
    queues, taken = list(by_bucket.values()), []
    depth = 0
    while len(taken) < limit:
        taken += [q[depth] for q in queues if depth < len(q)][: limit - len(taken)]
        depth += 1
    covered = len({prompts[i].bucket for i in taken})
    missed = "" if covered == len(queues) else f"; give --max-prompts {len(queues)} or more to take each"
    return sorted(taken), (
        f"{limit} of {n} rows (--max-prompts), round robin over its conditions in the order they "
        f"first appear: {covered} of {len(queues)} conditions taken{missed}"
    )


def read_prompt_set(path: Path | None, limit: int | None = None) -> tuple[list[Prompt], list[int], PromptSet]:
    """The prompts a run takes, their rows in the set, and the set they come from (a suite is sampled across its
    conditions, a file taken from the top)."""
    text = _prompt_text(path)
    prompts = parse_prompts(text, _where(path))
    name = prompt_set_name(path)
    rows, how = select_rows(prompts, limit, spread=name.startswith("suite:"))
    digest = text_sha256(text)
    return (
        [prompts[i] for i in rows],
        rows,
        PromptSet(name=name, sha256=digest, rows=len(prompts), taken=len(rows), selection=how),
    )


@dataclass
class Workload:
    """What every engine measures: the same drafter, target, prompts (tokenised once) and K."""

    drafter: Drafter  # read once; every engine works from it
    target_dir: Path  # local: config and tokenizer at least
    target_name: str  # what an engine loads: the local path, or the Hub repo id
    target_revision: str | None
    findings: list[Finding]
    prompts: list[Prompt]
    encoded: list[list[int]]
    skipped: list[Skipped]
    k: int
    max_new_tokens: int
    temperature: float = 0.0
    seed: int | None = None
    indices: list[int] = field(default_factory=list)  # each measured prompt's line in the prompt set
    trust_remote_code: bool = False  # the target's own code (tokenizer here; the native engine's model)
    notes: list[str] = field(default_factory=list)  # said in every report of this workload
    answers: dict[int, list[str]] = field(default_factory=dict)  # by prompt index: the target's earlier turns
    context: int = 1 << 62  # what every prompt, its new tokens and drafts must fit
    target_layers: int | None = None  # the target's decoder layers: what an engine captures by default
    prompt_set: PromptSet | None = None  # the set the prompts were taken from, and how
    thinking: Thinking | None = None  # the chat prompts' thinking mode (prompting.thinking_mode)

    def reachable(self, levels: list[int]) -> list[int]:
        """The concurrency levels these prompts can fill. Above their number no more requests are ever in flight, so
        such a level would measure the prompt count's load under another name: dropped, and said."""
        n = len(self.encoded)
        dropped = [c for c in levels if c > n]
        if dropped:
            self.notes.append(
                f"concurrency {', '.join(map(str, dropped))} not measured: with {n} prompts no more than "
                f"{n} requests are ever in flight (give more prompts to measure it)"
            )
        return [c for c in levels if c <= n]

    @property
    def spec(self) -> DrafterSpec:
        return self.drafter.spec

    def seeds(self) -> list[int] | None:
        """Request seeds by the prompt's own index: a skipped prompt never shifts another's seed."""
        return None if self.seed is None else [self.seed + i for i in self.indices]

    def temperatures(self) -> list[float]:
        """Each prompt's sampling temperature: its own where the prompt set gives one, else the run's."""
        return [self.temperature if p.temperature is None else p.temperature for p in self.prompts]


DTYPE_ALIASES = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "float64": "float64",
}  # --dtype's names, both engines


def dtype_name(name: str) -> str:
    """`--dtype`'s name as torch spells it; checked here, without importing torch, so a typo fails at once."""
    if name not in DTYPE_ALIASES:
        raise UsageError(f"unknown --dtype {name!r}", hint=f"use one of auto, {', '.join(DTYPE_ALIASES)}")
    return DTYPE_ALIASES[name]


@dataclass
class NativeOptions:
    """The native engine's settings: prompts per target batch, and consent to dequantise an MXFP4 target."""

    batch_size: int = 32
    dequantize_mxfp4: bool = False


@dataclass
class Measurement:
    """What one engine saw. `accepted[i]` lists the accepted draft tokens of each verify step of
    prompt i; `counters` are the engine's own totals for the run (deltas), when it keeps them."""

    accepted: list[list[int] | None]
    tokens: list[list[int]]
    engine: Engine
    device: str
    dtype: str
    timing: dict[str, float]  # named seconds, by the engine's phases (the report's `timing`, a map of its own keys)
    counters: SpecDecodeCounters | None = None
    all_positions: Tallied | None = None
    feedback_rms: list[float] | None = None
    speedup: Speedup | None = None
    by_k: list[ByKRow] | None = None  # acceptance at every K <= K, replayed exactly (native)
    notes: list[str] = field(default_factory=list)


def text_sha256(text: str) -> str:
    """A prompt set's hash: of its text as read (a file's line endings as Python reads them)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompts_sha256(path: Path | None) -> str:
    """The hash `read_prompt_set` gives this set, without parsing it (a floor's recorded set, to match a run's)."""
    return text_sha256(_prompt_text(path))


def _where(path: Path | None) -> str:
    return "default prompt set" if path is None else str(path)


def _prompt_text(path: Path | None) -> str:
    if path is None:
        return resources.files("eaglezoo").joinpath("data/prompts.jsonl").read_text()
    regular_file(path, "prompts file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"prompts file {path} is not UTF-8 text", hint="save the prompts file as UTF-8") from None
    if text.startswith("\ufeff"):
        raise BadInput(
            f"prompts file {path} starts with a byte-order mark (BOM), which JSON Lines does not allow",
            hint="save the prompts file as UTF-8 without a BOM",
        )
    return text


def load_prompts(path: Path | None) -> list[Prompt]:
    return parse_prompts(_prompt_text(path), _where(path))


def parse_prompts(text: str, where: str) -> list[Prompt]:
    prompts = []
    # JSON Lines ends lines with "\n" only (read_text has made "\r\n" one); str.splitlines() would also
    # break at U+2028, U+0085 and the like, which JSON allows unescaped inside a string.
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = parse_json(line, f"{where}: line {n}")
        except (json.JSONDecodeError, RecursionError):
            raise BadInput(
                f"{where}: line {n} is not JSON", hint='give one JSON object per line, each with a "prompt" string'
            ) from None
        if isinstance(row, str):
            row = {"prompt": row}
        if not isinstance(row, dict) or not isinstance(row.get("prompt", row.get("text")), str):
            raise BadInput(
                f"{where}: line {n} needs a string field 'prompt'",
                hint='give each line as {"prompt": "...", "bucket": "..."}',
            )
        _refuse_surrogates(row, where, n)
        if len(prompts) == MAX_PROMPTS:  # its report could not hold them
            raise BadInput(f"{where}: more than {MAX_PROMPTS:,} prompts", hint="split the file into smaller sets")
        prompts.append(prompt_of(row, where, n))
    if not prompts:
        raise BadInput(
            f"{where}: no prompts", hint='give a file with one JSON object per line, each with a "prompt" string'
        )
    return prompts


SURROGATE = re.compile("[\ud800-\udfff]")


def _refuse_surrogates(row: dict, where: str, n: int) -> None:
    """A lone surrogate (`"\\ud800"` written as a JSON escape) is no character: no tokenizer encodes it, no
    report can print it. Refused by line and field, in every string the row holds (the prompt, its bucket, the
    system message, each earlier turn)."""

    def strings(value, name):
        if isinstance(value, str):
            yield name, value
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from strings(item, f"{name}[{i}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                yield from strings(item, f"{name}.{key}" if name else str(key))

    try:
        found = next((name for name, text in strings(row, "") if SURROGATE.search(text)), None)
    except RecursionError:
        raise BadInput(
            f"{where}: line {n} is nested too deeply",
            hint="give each line as a flat JSON object of the fields the prompt format names",
        ) from None
    if found is not None:
        raise BadInput(
            f"{where}: line {n}: {found!r} holds a lone surrogate (a \\ud800-\\udfff escape "
            "without its pair), which is not text",
            hint="write the character itself, or its full surrogate pair, or remove it",
        )


FIELDS = {
    "bucket": "a string",
    "chat": "true or false",
    "system": "a string",
    "thinking": "true or false",
    "context": "a positive integer",
    "history": "a list of strings (the earlier user turns)",
    "temperature": "a number from 0 to 100",
}
FIELDS_HINT = (
    'e.g. {"prompt": "...", "chat": true, "system": "...", "thinking": false, "context": 2048, '
    '"history": ["an earlier question"], "temperature": 0.7}'
)


# A bucket's name is shown on a terminal, on pages, in plots and in the registry: one line of text that shows as
# it is. Refused: C0 and C1 controls (a tab, a newline, ESC and its colour codes, BEL), U+2028/U+2029 (a line
# break), lone surrogates, and the bidirectional controls that reorder the text around them.
def prompt_of(row: dict, where: str, n: int) -> Prompt:
    try:
        prompt = Prompt(prompt=row.get("prompt", row.get("text")), **{k: row[k] for k in FIELDS if k in row})
    except ValidationError as exc:
        key = exc.errors()[0]["loc"][0]
        raise BadInput(f"{where}: line {n}: {key!r} must be {FIELDS[key]}", hint=FIELDS_HINT) from None
    problem = bucket_problem(prompt.bucket)
    if problem:
        raise BadInput(
            f"{where}: line {n}: 'bucket' {problem}",
            hint='name the bucket in one line of visible text, e.g. "bucket": "code"',
        )
    chat_only = [key for key in ("history", "system", "thinking") if getattr(prompt, key) is not None]
    if chat_only and not prompt.chat:
        what = "a conversation" if chat_only[0] == "history" else "a chat message"
        raise BadInput(
            f'{where}: line {n}: a row with a {chat_only[0]!r} is {what} and needs "chat": true', hint=FIELDS_HINT
        )
    return prompt


def prompt_context(spec: DrafterSpec, tcfg: dict, engines: list[str], max_model_len: int | None) -> int:
    """Native runs the drafter at its own context; engines raise the drafter's to max_model_len
    (vllm/config/speculative.py), which defaults to the target's."""
    limits = [tcfg.get("max_position_embeddings")]
    if "native" in engines:
        limits.append(spec.max_position_embeddings)
    if any(e != "native" for e in engines):
        limits.append(max_model_len)
    return min([x for x in limits if x] or [1 << 62])


def too_long(prompts: list[Prompt], encoded: list[list[int]], context: int, extra: int) -> list[Skipped]:
    skipped: list[Skipped] = []
    for n, (p, ids) in enumerate(zip(prompts, encoded, strict=True)):
        if ids is None:  # skipped already, for another reason
            continue
        if not ids:
            raise BadInput(
                f"prompt {n + 1} ({p.prompt[:30]!r}) is empty after tokenisation",
                hint="remove that prompt from the file",
            )
        if len(ids) + extra > context:
            skipped.append(
                Skipped(
                    index=n,
                    tokens=len(ids),
                    bucket=p.bucket,
                    reason=f"{len(ids)} + {extra} new and draft tokens exceed the context of {context}",
                )
            )
    return skipped
