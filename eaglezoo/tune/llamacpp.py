"""tune's second engine: llama-server (llama.cpp b11434), run the way `Bench` runs vLLM's session.

A configuration is tune's speculative config (`report.speculative_config`): K (`num_speculative_tokens`, or the
table's K at the load, `num_speculative_tokens_per_batch_size`) and llama.cpp's `p_min`; None is the target served
alone (no `-md`). llama.cpp takes one K for every slot, so each load `c` is measured on a server of its own started
with `-np c` (the slots a user serves that load with): a pass sends every prompt with at most `c` requests in
flight. The server is kept while the (K, p-min, slots) it serves stays the same, so a warm-up and the repeats after
it run on one server, as on vLLM's engine; every fresh server (one started for another load in between included) is
warmed by a discarded pass of its own before a pass is measured on it.

Tokens per second are the tokens the server streamed back (exactly N a request: `n_predict` N, `ignore_eos`) over
the pass's wall time, as vLLM's offline passes are counted; each request's time to first token is the server's own
`timings.prompt_ms` from its final answer (tools/server/server-common.cpp:84-104). The drafts accepted come from the
server's `/metrics` deltas over the pass (`llamacpp_endpoint.scrape`).
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ..errors import UsageError, printable
from ..verify.llamacpp_endpoint import Streamed, body, completion, llamacpp_props, scrape
from ..verify.llamacpp_engine import LlamacppOptions, LlamaServer, llama_server
from ..verify.llamacpp_run import GGUF_DTYPE, gguf_pair
from ..verify.vllm_process import EngineEvent, PassEvent, RequestResult, WorkerResult
from ..verify.workload import Progress, Workload
from .decide import table_k
from .rule import WARMUP_PASSES

# The p-min grid. b11434's EAGLE-3 and DFlash drafters stop a draft at the first position whose top token's
# probability is below --spec-draft-p-min (common/speculative.cpp:871 in the EAGLE-3 draft loop, 1369 in DFlash's
# block); 0, the default (common/common.h:333), never stops. Under greedy verification a stopped draft loses only
# tokens the drafter itself doubted, and saves verifying them: it pays where verifying is dear (many slots), and
# costs acceptance where it is cheap. 0.75 is the one other value measured, the p-min llama-server's own README shows
# in its /props examples (tools/server/README.md:1040, 1105): two points keep the grid small, and the second is
# measured only at the K the grid chose, at each load where that K drafts.
P_MIN_DEFAULT = 0.0
P_MIN_TRIED = 0.75


def k_at(config: dict | None, c: int) -> int:
    if config is None:
        return 0
    table = config.get("num_speculative_tokens_per_batch_size")
    return table_k(table, c) if table else int(config["num_speculative_tokens"])


class LlamacppSession:
    """Passes of the workload on llama-server, one server per (K, p-min, slots), kept while that stays."""

    def __init__(self, files: tuple[Path, Path], family: str, options: LlamacppOptions, progress: Progress):
        self.target, self.drafter = files
        self.family, self.options, self.progress = family, options, progress
        self.version = "unknown"
        self._key: tuple[int, float, int] | None = None
        self._stack = contextlib.ExitStack()
        self._server: LlamaServer | None = None

    def close(self) -> None:
        self._stack.close()
        self._key = self._server = None

    def _serve(self, work: Workload, key: tuple[int, float, int]) -> float:
        """A server for `key` (the one running, or a new one); the seconds its start took."""
        if key == self._key and self._server is not None:
            return 0.0
        self.close()
        k, p_min, slots = key
        self.progress(0, None, phase=f"starting llama-server (K={k}, p-min {p_min:g}, -np {slots})")
        server = replace(self.options.server, ctx=work.context + work.k + 2, parallel=slots, p_min=p_min)
        t0 = time.perf_counter()
        self._server = self._stack.enter_context(
            llama_server(self.target, self.drafter if k else None, self.family, k, server)
        )
        self._key = key
        props = llamacpp_props(self._server.url) or {}
        self.version = printable(str(props.get("build_info") or "unknown"))[:40]
        for _ in range(WARMUP_PASSES):
            self._pass(work, slots)
        return time.perf_counter() - t0

    def run(self, work: Workload, config: dict | None, label: str, loads: list[int]) -> WorkerResult:
        start_s, passes = 0.0, []
        p_min = float(config.get("p_min", P_MIN_DEFAULT)) if config else P_MIN_DEFAULT
        for i, c in enumerate(loads):
            start_s += self._serve(work, (k_at(config, c), p_min, c))
            self.progress(i + 1, len(loads), phase=f"measuring {label} at concurrency {c}")
            passes.append(self._pass(work, c))
        # llama-server does not say which device it runs on (verify --engine llamacpp reports it so too)
        engine = EngineEvent(version=self.version, device="local", dtype=GGUF_DTYPE, start_s=start_s)
        return WorkerResult(engine=engine, passes=passes)

    def _pass(self, work: Workload, c: int) -> PassEvent:
        assert self._server is not None
        base = self._server.url
        before = scrape(base)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=c) as pool:
            results = list(pool.map(lambda i: timed(base, work, i), range(len(work.encoded))))
        wall = time.perf_counter() - t0
        counters = scrape(base).since(before, f"{base}/metrics")
        return PassEvent(concurrency=c, wall_s=wall, requests=results, counters=counters)


def timed(base: str, work: Workload, i: int) -> RequestResult:
    """One prompt, N tokens exactly (no draft alignment: tune counts throughput), timed by the server."""
    t0 = time.perf_counter()
    r: Streamed = completion(base, body(work, i) | {"n_predict": work.max_new_tokens})
    e2e = time.perf_counter() - t0
    t = r.timings or {}
    prompt_ms = t.get("prompt_ms")
    return RequestResult(
        tokens=r.tokens,
        e2e_s=e2e,
        ttft_s=float(prompt_ms) / 1000 if isinstance(prompt_ms, int | float) else None,
        accepted=r.steps,
    )


@contextlib.contextmanager
def llamacpp_tune_session(work: Workload, options: LlamacppOptions, progress: Progress) -> Iterator[LlamacppSession]:
    """The drafter and the target converted to GGUF (fp32, as verify --engine llamacpp does), then servers on
    demand; every server stopped when the block ends."""
    if any(p.history for p in work.prompts):
        raise UsageError(
            "tune --engine llamacpp measures single-turn prompts; the prompt set has conversations",
            hint="give --prompts FILE without a history, or tune them on vLLM (--engine vllm)",
        )
    with tempfile.TemporaryDirectory(prefix="eaglezoo-tune-llamacpp-") as tmp:
        target, drafter, _warnings = gguf_pair(work, options, Path(tmp), progress)
        session = LlamacppSession((target, drafter), work.drafter.spec.family, options, progress)
        try:
            yield session
        finally:
            session.close()
