"""What a running SGLang server says about itself, read as SGLang 0.5.23's own source writes it (no SGLang runs on
eaglezoo's machines: the fields below are cited from its wheel, `pip download --no-deps sglang==0.5.23`).

- `GET /server_info` (sglang/srt/entrypoints/http_server.py:863-892; `/get_server_info`, :853-860, the deprecated
  name and the only one of earlier releases) answers `build_server_info` (srt/utils/common.py:3584-3594): every
  ServerArgs field resolved (srt/server_args.py:316-333, `resolved_dict`, which also reports
  `enable_dp_attention` as `attn_dp_size > 1`), `launch_command` (the command as asked, secrets redacted,
  server_args.py:302-305), the scheduler's info, then `internal_states` (one per DP rank), `version` and
  `frontend` (http_server.py:883-890).
- The speculative settings are the `spec` namespace's fields (srt/arg_groups/fields/spec.py): speculative_algorithm
  (:31), speculative_draft_model_path (:36), speculative_num_steps (:58), speculative_eagle_topk (:62),
  speculative_num_draft_tokens (:66), speculative_accept_threshold_single / _acc (:109-116, default 1.0),
  speculative_use_rejection_sampling (:117, default False), speculative_draft_model_quantization (:216) and whether
  the user set it (`_speculative_draft_quantization_explicitly_set`, :226); the target's `quantization`
  (fields/model.py:177) and `attn_dp_size` (fields/parallel.py:81).
- The cumulative acceptance length: `internal_states[i].avg_spec_accept_length`
  (srt/managers/scheduler_components/internal_state.py:119-125, 243-253): tokens generated over verify steps since
  the server started, the bonus token included (batch_result_processor.py:982-991), as vLLM's 1 + accepted / drafts.
- Per request: `/generate`'s `meta_info` holds spec_accept_length (completion tokens /
  spec_verify_ct), spec_accept_rate, spec_num_correct_drafts, spec_num_proposed_drafts (spec_verify_ct x
  (speculative_num_draft_tokens - 1)), spec_verify_ct and spec_correct_drafts_histogram
  (srt/managers/tokenizer_manager.py:3148-3195); the OpenAI routes give the same as
  `sglext.spec_tokens_details` when the request sets `"return_spec_tokens_details": true`
  (srt/entrypoints/openai/protocol.py:393, 961, 456-503; utils.py:310-340).
- SGLang serves no `/version`: its version is `/server_info`'s.
- Its Prometheus counters (`/metrics`, served only with `--enable-metrics`: http_server.py:313-316,
  utils/common.py:2843-2854) are kept by the tokenizer manager as each request finishes
  (observability/metrics_collector.py:2093-2136, called at tokenizer_manager.py:3261-3290): `generation_tokens`
  (its completion tokens), `num_requests`, and `spec_verify_calls` (its verify steps: one per decode step,
  batch_result_processor.py:832, in `process_batch_result_decode` :1123). A request's first token comes from its
  prefill, each verify step gives its accepted drafts and the bonus token, so the drafts accepted are tokens -
  requests - verify steps (a request's last step cut at its stop counts what it kept). SGLang reports no
  per-position counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from prometheus_client.parser import text_string_to_metric_families

from ..errors import EngineError, printable
from ..limits import MAX_K
from .counters import SpecDecodeCounters, prometheus_count
from .endpoint import listed_model, request
from .server_facts import LOOPBACK, out_of_bounds

SERVER_INFO = ("/server_info", "/get_server_info")
MAX_DRAFT_TOKENS = 4096  # a tree's verify width (topk x steps + 1 and its budgets) stays far below this
SGLANG_KEYS = {"model_path", "speculative_algorithm"}  # every SGLang /server_info has them; vLLM's has vllm_config
COUNTERS = {  # metrics_collector.py:1856-1869, 1940-1944 (the families' names; each sample adds _total)
    "sglang:generation_tokens": "tokens",
    "sglang:num_requests": "requests",
    "sglang:spec_verify_calls": "verifies",
}


def is_sglang(info: object) -> bool:
    return isinstance(info, dict) and "vllm_config" not in info and bool(SGLANG_KEYS & info.keys())


@dataclass(frozen=True)
class SglangFacts:
    """The speculative settings an SGLang server resolved, and what it measured; named fields only (its
    /server_info holds secrets too: api_key, hf tokens in paths). A value out of SGLang's own bounds is refused."""

    url: str
    path: str  # which of SERVER_INFO answered
    version: str | None
    model: str  # the name requests use (/v1/models)
    model_path: str | None
    max_model_len: int | None
    algorithm: str | None
    drafter: str | None
    num_steps: int | None
    topk: int | None
    num_draft_tokens: int | None
    threshold_single: float
    threshold_acc: float
    rejection_sampling: bool
    quantization: str | None
    draft_quantization: str | None
    draft_quantization_explicit: bool | None  # None: the server does not say (releases before the field)
    attn_dp_size: int
    launch_command: str | None
    accept_lengths: tuple[float, ...]  # per DP rank, where the server has drafted

    def __post_init__(self) -> None:
        problem = (
            out_of_bounds("speculative_num_steps", self.num_steps, 1, MAX_K)
            or out_of_bounds("speculative_eagle_topk", self.topk, 1, MAX_DRAFT_TOKENS)
            or out_of_bounds("speculative_num_draft_tokens", self.num_draft_tokens, 1, MAX_DRAFT_TOKENS)
            or out_of_bounds("attn_dp_size", self.attn_dp_size, 1, 1 << 16)
            or out_of_bounds("max_model_len", self.max_model_len, 1, 1 << 24)
            or next((f"{name} is {x!r}, not from 0 to 1" for name, x in self.thresholds() if not 0 <= x <= 1), None)
            or next((f"avg_spec_accept_length {x!r} is below 1" for x in self.accept_lengths if not 1 <= x < 1e6), None)
        )
        if problem:
            raise EngineError(
                f"the SGLang server at {self.url} answers out of bounds: {problem}; SGLang writes no such value, "
                "so nothing it says is taken as read",
                hint="point --endpoint at the SGLang server itself",
            )

    @property
    def chain_k(self) -> int | None:
        """K in chain terms: the draft steps of a chain (top-k 1); None for a tree, whose K no chain floor fits."""
        return self.num_steps if self.topk in (None, 1) else None

    @property
    def drafted_per_verify(self) -> int:
        """Draft tokens per verify step, as SGLang's own logger counts them (metrics_reporter.py:975-978)."""
        return (self.num_draft_tokens - 1) if self.num_draft_tokens else (self.num_steps or MAX_K)

    def thresholds(self) -> list[tuple[str, float]]:
        return [
            ("speculative_accept_threshold_single", self.threshold_single),
            ("speculative_accept_threshold_acc", self.threshold_acc),
        ]

    def local(self, path: str | None) -> Path | None:
        """A path the server named, where it is a folder this machine can read (the server runs here)."""
        if path is None or urlparse(self.url).hostname not in LOOPBACK or not Path(path).is_dir():
            return None
        return Path(path)


def sglang_facts(base: str) -> SglangFacts | None:
    """The server's facts when it is SGLang (its /server_info, else /get_server_info), else None."""
    for path in SERVER_INFO:
        info = request(base, path, missing_ok=True)
        if is_sglang(info):
            return read_info(base, path, info, listed_model(base))
        if info is not None:
            return None  # another server's answer: not SGLang
    return None


def read_info(base: str, path: str, info: dict, model: dict) -> SglangFacts:
    read = _Reader(base, path, info)
    return SglangFacts(
        url=printable(base),
        path=path,
        version=read.text("version"),
        model=printable(str(model["id"]))[:200],
        model_path=read.text("model_path"),
        max_model_len=model.get("max_model_len"),
        algorithm=read.text("speculative_algorithm"),
        drafter=read.text("speculative_draft_model_path"),
        num_steps=read.count("speculative_num_steps"),
        topk=read.count("speculative_eagle_topk"),
        num_draft_tokens=read.count("speculative_num_draft_tokens"),
        threshold_single=read.number("speculative_accept_threshold_single", 1.0),
        threshold_acc=read.number("speculative_accept_threshold_acc", 1.0),
        rejection_sampling=read.flag("speculative_use_rejection_sampling") or False,
        quantization=read.text("quantization"),
        draft_quantization=read.text("speculative_draft_model_quantization"),
        draft_quantization_explicit=read.flag("_speculative_draft_quantization_explicitly_set"),
        attn_dp_size=attention_dp(read),
        launch_command=read.text("launch_command", 4000),
        accept_lengths=accept_lengths(read),
    )


def attention_dp(read: _Reader) -> int:
    """The attention-DP width: attn_dp_size (0.5.23), else dp_size where enable_dp_attention says so (earlier)."""
    width = read.count("attn_dp_size")
    if width is not None:
        return width
    return (read.count("dp_size") or 1) if read.flag("enable_dp_attention") else 1


def accept_lengths(read: _Reader) -> tuple[float, ...]:
    states = read.info.get("internal_states")
    if states is None:
        return ()
    if not isinstance(states, list) or not all(isinstance(s, dict) for s in states):
        raise read.wrong("internal_states", "a list of objects")
    values = [s.get("avg_spec_accept_length") for s in states]
    return tuple(read.real(f"internal_states[{i}].avg_spec_accept_length", v) for i, v in enumerate(values) if v)


class _Reader:
    """One field of /server_info at a time: its type as SGLang's dataclass declares it, else one line naming it."""

    def __init__(self, base: str, path: str, info: dict):
        self.base, self.path, self.info = base, path, info

    def wrong(self, key: str, expected: str) -> EngineError:
        shown = printable(repr(self.info.get(key)))[:40] if "[" not in key else "another value"
        return EngineError(
            f"{self.base}{self.path} answers {shown} for {key}, not {expected}: SGLang writes no such value",
            hint="point --endpoint at the SGLang server itself",
        )

    def text(self, key: str, most: int = 400) -> str | None:
        value = self.info.get(key)
        if value in (None, ""):
            return None
        if not isinstance(value, str):
            raise self.wrong(key, "a string")
        return printable(value)[:most]

    def count(self, key: str) -> int | None:
        value = self.info.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise self.wrong(key, "a whole number")
        return value

    def flag(self, key: str) -> bool | None:
        value = self.info.get(key)
        if value is not None and not isinstance(value, bool):
            raise self.wrong(key, "true or false")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.info.get(key, default)
        return self.real(key, default if value is None else value)

    def real(self, key: str, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.wrong(key, "a finite number")
        return float(value)


def spec_steps(base: str, answer: object, k: int) -> list[int] | None:
    """One completion's verify steps, each its number of accepted drafts, from `sglext.spec_tokens_details` (the
    request set `return_spec_tokens_details`; serving_completions.py:554-571, SpecTokensDetails at protocol.py:456):
    the histogram of accepted drafts per step (schedule_batch.py:1566-1572, batch_result_processor.py:832-836) read
    back as steps. None where the server gave none (a release without it); what no SGLang writes is refused."""
    sglext = answer.get("sglext") if isinstance(answer, dict) else None
    details = sglext.get("spec_tokens_details") if isinstance(sglext, dict) else None
    if isinstance(details, list) and len(details) == 1:
        details = details[0]
    if details is None:
        return None
    problem = steps_problem(details, k)
    if isinstance(problem, str):
        raise EngineError(
            f"{base}/v1/completions reports sglext.spec_tokens_details {problem}: SGLang counts no such thing, so "
            "there is no measurement",
            hint="point --endpoint at the SGLang server itself",
        )
    return problem


def steps_problem(details: object, k: int) -> list[int] | str:
    """The steps, or what is wrong: counts that are whole numbers, a histogram of at most K + 1 bins whose steps are
    spec_verify_ct and whose accepted drafts are spec_num_correct_drafts."""
    if not isinstance(details, dict):
        return "that is not an object"
    hist = details.get("spec_correct_drafts_histogram") or []
    counts = [details.get("spec_verify_ct", 0), details.get("spec_num_correct_drafts", 0), *hist]
    if not isinstance(hist, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in counts):
        return "with a count that is not a whole number"
    verify_ct, correct = counts[0], counts[1]
    if len(hist) > k + 1:
        return f"with a step accepting {len(hist) - 1} drafts at K={k}"
    if sum(hist) != verify_ct or sum(i * n for i, n in enumerate(hist)) != correct:
        return f"whose histogram {printable(str(hist))[:60]} is not its {verify_ct} steps and {correct} accepted drafts"
    return [i for i, n in enumerate(hist) for _ in range(n)]


def scrape(base: str, drafted_per_verify: int) -> SpecDecodeCounters:
    """SGLang's speculative counts from its /metrics, summed over every label set, as vLLM's counter fields (no
    per-position counts): drafts = verify steps, accepted = tokens - requests - verify steps."""
    text = request(base, "/metrics", missing_ok=True)
    if text is None:
        raise EngineError(
            f"the SGLang server at {base} serves no /metrics: it runs without --enable-metrics",
            hint="restart it with --enable-metrics (watch reads its counters)",
        )
    sums = dict.fromkeys(COUNTERS.values(), 0)
    try:
        for family in text_string_to_metric_families(text):
            if family.name in COUNTERS:
                total = family.name + "_total"
                values = (prometheus_count(x.value) for x in family.samples if x.name == total)
                sums[COUNTERS[family.name]] += sum(values)
    except (ValueError, OverflowError):
        raise EngineError(
            f"{base}/metrics is not SGLang's Prometheus text", hint="point it at the SGLang server itself"
        ) from None
    verifies = sums["verifies"]
    return SpecDecodeCounters.read(
        f"{base}/metrics",
        num_drafts=verifies,
        num_draft_tokens=drafted_per_verify * verifies,
        # a request aborted before its first token finishes with none: never below zero
        num_accepted_tokens=max(0, sums["tokens"] - sums["requests"] - verifies),
        num_accepted_tokens_per_pos=(),
    )
