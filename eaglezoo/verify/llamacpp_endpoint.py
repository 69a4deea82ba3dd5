"""`verify --endpoint URL` on a running llama-server (llama.cpp b11434), and the measuring half of `--engine llamacpp`.

The engine is recognised by `GET /props`, which llama-server answers with its `build_info`, `model_path` and
`endpoint_metrics` (tools/server/server-context.cpp:4955-4999) and vLLM does not serve. Each prompt goes, as token
ids, to llama.cpp's own `/completion` (not its OpenAI route: only `/completion` takes `timings_per_token`, which
puts `timings.draft_n` and `timings.draft_n_accepted` in every streamed token, tools/server/server-context.cpp:
2214-2215, tools/server/server-common.cpp:99-102). The server updates both before it sends the tokens of a verify
step (server-context.cpp:3266 for a new draft, 4330 for what it accepted, 4350-4363 the tokens sent), so each
step's accepted count is read from the stream in order, draft by draft. The `/metrics` deltas (`--metrics`:
`llamacpp:spec_decode_num_drafts_total`, `_num_draft_tokens_total`, `_num_accepted_tokens_total`,
`_num_accepted_tokens_per_pos_total{position}`, tools/server/server-task.cpp:1564-1625) must add up to the same
totals, position by position, or nothing is reported. A request's counts reach `/metrics` when its slot is
released, right after its final chunk is sent (server-context.cpp:4360-4363, 582-601, 1439-1444), in the loop that
also answers `/metrics` (a task, server-context.cpp:5048-5053), so a scrape after the last answer counts it.
`/props`' `endpoint_metrics` says whether `--metrics` is on (without it `/metrics` answers an error naming the flag,
server-context.cpp:5025-5027).

Requests run one at a time with `cache_prompt` off, so that no prompt reuses another's state. llama.cpp shortens the
last drafts of a request to what it may still generate (server-context.cpp:517-535: `n_remaining - 1`); to measure
the steps eaglezoo's native engine and vLLM measure (every draft K tokens, rounds while fewer than N tokens exist,
verify/acceptance.py `decoding_path`), each request asks for N + K + 1 tokens and the steps and tokens past N are
dropped after the cross-check.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from ..checkpoint.config import target_config
from ..errors import EngineError, UsageError, printable
from .counters import SpecDecodeCounters, prometheus_count, scraped
from .endpoint import request, server_base
from .llama_server import LLAMACPP_BUILD
from .report.build import built
from .report.models import Engine, ServedConfig
from .workload import Measurement, Progress, Workload

PREFIX = "llamacpp:spec_decode_"
COUNTERS = {
    "num_drafts": "num_drafts",
    "num_draft_tokens": "num_draft_tokens",
    "num_accepted_tokens": "num_accepted_tokens",
}
PER_POSITION = "num_accepted_tokens_per_pos"


def ask(
    base: str, path: str, payload: dict[str, Any] | None = None, missing_ok: bool = False, raw: bool = False
) -> Any:
    """endpoint.request, its failure's hint naming llama-server."""
    try:
        return request(base, path, payload, missing_ok=missing_ok, raw=raw)
    except EngineError as exc:
        raise EngineError(exc.message, hint="check that llama-server is running there and answering") from None


@dataclass(frozen=True)
class Streamed:
    """One streamed completion: its tokens, each verify step's accepted count in order, its final timings."""

    tokens: list[int]
    steps: list[int]
    draft_n: int
    draft_n_accepted: int
    timings: dict[str, Any] | None = None  # the final chunk's (tools/server/server-common.cpp:84-104)


def llamacpp_props(base: str) -> dict[str, Any] | None:
    """llama-server's `/props`, or None where the server is not llama.cpp (vLLM answers 404; a server that answers
    it otherwise, or not at all, is left to the vLLM path, which says what is wrong in its own words)."""
    try:
        body = request(base, "/props", missing_ok=True)
    except EngineError:
        return None
    if isinstance(body, dict) and {"build_info", "model_path", "endpoint_metrics"} <= body.keys():
        return body
    return None


def measure_llamacpp(
    work: Workload, url: str, props: dict[str, Any], progress: Progress, started: bool = False
) -> Measurement:
    """The workload on a llama-server; `started`: eaglezoo started it with the drafter (else the user did, and
    llama-server does not say which drafter it loaded)."""
    t_start = time.perf_counter()
    base = server_base(url)
    check_server(base, props, work)
    before = scrape(base)
    t0 = time.perf_counter()
    results = []
    for i in range(len(work.encoded)):
        results.append(completion(base, body(work, i)))
        progress(i + 1, len(work.encoded), phase=f"measuring {base}")
    wall = time.perf_counter() - t0
    counted = scrape(base).since(before, f"{base}/metrics")
    cross_check(base, results, counted, work.k)
    kept: list[list[int] | None] = [decoding_steps(r.steps, work.max_new_tokens) for r in results]
    return Measurement(
        accepted=kept,
        tokens=[r.tokens[: work.max_new_tokens] for r in results],
        engine=built(
            Engine,
            name="llamacpp",
            url=printable(base),
            model=printable(str(props.get("model_path")))[:200] or None,
            version=printable(str(props.get("build_info")))[:40] or None,
            speculative_config=ServedConfig(num_speculative_tokens=len(counted.num_accepted_tokens_per_pos) or None),
        ),
        device="local" if started else "remote",  # llama-server does not say which device it runs on
        dtype=printable(str(props.get("model_ftype") or "unknown"))[:40],
        timing={"measure_s": wall, "total_s": time.perf_counter() - t_start},
        notes=[]
        if started
        else [
            f"llama-server ({LLAMACPP_BUILD}) does not say which drafter it loaded: acceptance is reported for "
            "whatever it serves (its /metrics agreed with every response's timings, step for step)"
        ],
    )


def check_server(base: str, props: dict[str, Any], work: Workload) -> None:
    """Metrics on, a drafter loaded, the target's vocabulary and width."""
    if props.get("endpoint_metrics") is not True:
        raise EngineError(
            f"the llama-server at {base} runs without --metrics: eaglezoo cross-checks its spec-decode counters",
            hint="restart llama-server with --metrics (eaglezoo serve-config --engine llamacpp prints the command)",
        )
    slots = ask(base, "/slots", missing_ok=True)
    if isinstance(slots, list) and slots and all(isinstance(s, dict) and s.get("speculative") is False for s in slots):
        raise EngineError(
            f"the llama-server at {base} serves without a drafter (its slots do not speculate)",
            hint="start it with -md DRAFTER.gguf --spec-type draft-eagle3 (or draft-dflash) --spec-draft-n-max K",
        )
    models = ask(base, "/v1/models")
    meta = (models.get("data") or [{}])[0].get("meta") if isinstance(models, dict) else None
    tcfg = target_config(work.target_dir)
    for key, name in (("n_vocab", "vocab_size"), ("n_embd", "hidden_size")):
        served = meta.get(key) if isinstance(meta, dict) else None
        if isinstance(served, int) and tcfg.get(name) is not None and served != tcfg.get(name):
            raise EngineError(
                f"the llama-server at {base} serves a model with {key} {served}, and the target "
                f"{work.target_name} has {name} {tcfg.get(name)}: it serves another model",
                hint="give the --target it serves, or start llama-server with the target's GGUF (-m)",
            )


def body(work: Workload, i: int) -> dict[str, Any]:
    b = {
        "prompt": work.encoded[i],
        "n_predict": work.max_new_tokens + work.k + 1,  # every draft of the first N tokens is K long (module doc)
        "ignore_eos": True,
        "temperature": work.temperatures()[i],
        "top_k": 0,  # plain temperature sampling, as vLLM and the native engine sample: llama.cpp's default
        "top_p": 1.0,  # chain also cuts by top-k 40, top-p 0.95 and min-p 0.05 (/props default_generation_settings)
        "min_p": 0.0,
        "cache_prompt": False,
        "stream": True,
        "timings_per_token": True,
    }
    seeds = work.seeds()
    return b | ({"seed": seeds[i]} if seeds is not None else {})


def completion(base: str, payload: dict[str, Any]) -> Streamed:
    """One streamed completion, read token by token."""
    text = ask(base, "/completion", payload, raw=True)
    tokens: list[int] = []
    steps: list[int] = []
    last_drafted, last_accepted, final, last_timings = 0, 0, None, None
    try:
        for line in text.splitlines():
            if not line.startswith("data: "):
                continue
            chunk = json.loads(line[6:])
            timings = chunk.get("timings") or {}
            drafted, accepted = int(timings.get("draft_n", 0)), int(timings.get("draft_n_accepted", 0))
            if chunk.get("tokens"):
                if drafted > last_drafted:  # a new draft: this token opens a verify step
                    steps.append(accepted - last_accepted)
                elif accepted != last_accepted and steps:
                    steps[-1] += accepted - last_accepted
                last_drafted, last_accepted = drafted, accepted
                tokens += [int(t) for t in chunk["tokens"]]
            if chunk.get("stop"):
                final, last_timings = (drafted, accepted), timings
    except (ValueError, TypeError, AttributeError, OverflowError, RecursionError):
        raise EngineError(
            f"{base}/completion streamed something that is not llama.cpp's completion",
            hint="point --endpoint at llama-server itself",
        ) from None
    if final is None:
        raise EngineError(
            f"{base}/completion ended before the completion finished: the server stopped or failed mid-run",
            hint="check that llama-server is still running (its log says why it stopped)",
        )
    return Streamed(tokens, steps, *final, timings=last_timings)


def decoding_steps(steps: list[int], max_new_tokens: int) -> list[int]:
    """The steps a decoder takes while fewer than N tokens exist (the first comes from the prompt)."""
    kept, produced = [], 1
    for a in steps:
        if produced >= max_new_tokens:
            break
        kept.append(a)
        produced += a + 1
    return kept


def scrape(base: str) -> SpecDecodeCounters:
    """llama.cpp's spec-decode counters from /metrics (tools/server/server-task.cpp:1564-1625)."""
    text = ask(base, "/metrics")
    out = dict.fromkeys(COUNTERS.values(), 0)
    per_position: dict[int, int] = {}
    try:
        for sample in (s for f in text_string_to_metric_families(text) for s in f.samples):
            name = sample.name.removeprefix(PREFIX).removesuffix("_total")
            if not sample.name.startswith(PREFIX):
                continue
            if name in COUNTERS:
                out[COUNTERS[name]] = prometheus_count(sample.value)
            elif name == PER_POSITION:
                per_position[int(sample.labels.get("position", -1))] = prometheus_count(sample.value)
    except (ValueError, OverflowError):
        raise EngineError(
            f"{base}/metrics is not llama.cpp's Prometheus text", hint="point --endpoint at llama-server itself"
        ) from None
    return scraped(f"{base}/metrics", out, per_position, "point --endpoint at llama-server itself")


def cross_check(base: str, results: list[Streamed], counted: SpecDecodeCounters, k: int) -> None:
    """The responses' timings against the /metrics deltas: drafts, draft tokens, accepted, per position."""
    positions = len(counted.num_accepted_tokens_per_pos)
    if positions and positions != k:
        raise UsageError(f"the llama-server at {base} drafts K={positions}, not {k}", hint=f"run with -k {positions}")
    steps = [a for r in results for a in r.steps]
    if any(not 0 <= a <= k for a in steps):
        raise EngineError(
            f"{base}/completion reports a step accepting more than K={k} tokens: no engine accepts that",
            hint="point --endpoint at llama-server itself",
        )
    timed = SpecDecodeCounters.read(
        f"{base}/completion",
        num_drafts=len(steps),
        num_draft_tokens=sum(r.draft_n for r in results),
        num_accepted_tokens=sum(r.draft_n_accepted for r in results),
        num_accepted_tokens_per_pos=tuple(sum(a > i for a in steps) for i in range(positions)),
    )
    differ = [
        f"{name} {getattr(timed, name)} by the responses, {getattr(counted, name)} by /metrics"
        for name in SpecDecodeCounters.model_fields
        if getattr(timed, name) != getattr(counted, name)
    ]
    if sum(steps) != timed.num_accepted_tokens:
        differ.insert(0, f"accepted {sum(steps)} step by step, {timed.num_accepted_tokens} in the final timings")
    if differ:
        raise EngineError(
            f"the llama-server at {base} disagrees with itself: {differ[0]}; another client used it during the "
            "measurement, or its counters are not llama.cpp's",
            hint="measure on a server nothing else uses (eaglezoo verify --engine llamacpp starts its own)",
        )
