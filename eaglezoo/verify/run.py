"""`eaglezoo verify`: run the drafter against its target and measure acceptance.

One workload (drafter read and linted once, prompts tokenised once, over-long prompts skipped)
goes to one or more engines, each returning a `Measurement`: the accepted length of every verify
step of every prompt, as a speculative decoder visits them. One report is built from it, whatever
the engine: `native` (transformers, the exact fp32 reference, `native.py`), `vllm` (vLLM's
offline engine in a subprocess, `vllm_engine.py`) or a running server (`endpoint.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..checkpoint.config import target_config, target_layers
from ..checkpoint.formats.base import ReadOptions
from ..checkpoint.formats.blocks import max_k
from ..checkpoint.problems import provenance_findings, refuse_misfit
from ..checkpoint.read import read_drafter
from ..errors import UsageError
from ..limits import MAX_TEMPERATURE
from ..lint import lint_drafter
from ..names import FAMILIES_MEASURED
from .conversation import converse
from .dspark_form import native_refusal
from .endpoint import Connected, measure_endpoint, reach, server_base
from .llamacpp_endpoint import llamacpp_props, measure_llamacpp
from .llamacpp_engine import LlamacppOptions, check_llamacpp_options
from .llamacpp_run import llamacpp_session
from .prompt_set import Skipped
from .prompting import encode, load_tokenizer, thinking_mode
from .quantization import load_kwargs, quantization_config
from .report import NO_GATE, Gate, VerifyReport
from .report.build import NO_ORIGIN, Origin, compare_engines, report_for
from .vllm_engine import EngineOptions, check_vllm_options, vllm_session
from .workload import (
    Measurement,
    NativeOptions,
    Progress,
    Prompt,
    Workload,
    dtype_name,
    prompt_context,
    read_prompt_set,
    too_long,
)


@dataclass(frozen=True)
class VerifyRequest:
    """How to measure, built once by the command that asks: the engines and their settings, K, the workload's
    size and the sampling. Where the drafter, target and prompts come from is resolved beside it."""

    engines: tuple[str, ...] = ("native",)
    endpoint: str | None = None
    engine_options: Any = None  # vllm_engine.EngineOptions, for --engine vllm
    llamacpp: LlamacppOptions = field(default_factory=LlamacppOptions)  # for --engine llamacpp
    device: str = "auto"
    dtype: str = "auto"
    k: int = 3
    max_new_tokens: int = 64
    max_prompts: int | None = None
    temperature: float = 0.0
    seed: int | None = None
    speedup: tuple[int, ...] | None = None  # the loads --speedup measures
    trust_remote_code: bool = False
    native: NativeOptions = field(default_factory=NativeOptions)


@dataclass(frozen=True)
class Sources:
    """Where verify's files are, once names are folders: the drafter and the target (its name as reported: the Hub
    repo it came from, else its folder), the prompts file (None: the built-in set) and how to read the drafter."""

    drafter_dir: Path
    target_dir: Path
    target_name: str | None = None
    prompts_file: Path | None = None
    opts: ReadOptions | None = None


@dataclass(frozen=True)
class WorkloadPlan:
    """What `prepare` builds a Workload from, once names are folders: the drafter and target (the target's name and
    revision as reported), how to read the drafter, the prompts, and the settings that bound them (K, new tokens,
    sampling, the engines that will measure and their context)."""

    drafter_dir: Path
    target_dir: Path
    target_name: str
    target_revision: str | None = None
    opts: ReadOptions = field(default_factory=ReadOptions)
    prompts_file: Path | None = None
    max_prompts: int | None = None
    k: int = 3
    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int | None = None
    engines: tuple[str, ...] = ("native",)
    max_model_len: int | None = None
    trust_remote_code: bool = False


def verify(
    sources: Sources,
    request: VerifyRequest = VerifyRequest(),
    *,
    gate: Gate = NO_GATE,
    origin: Origin = NO_ORIGIN,
    progress: Progress = lambda *a, **kw: None,
    server: Connected | None = None,
) -> VerifyReport:
    """`server`: the endpoint as the caller already connected it (check_settings), else it is connected here."""
    r, target_dir = request, sources.target_dir
    engines = list(r.engines)
    speedup = list(r.speedup) if r.speedup else None
    check_request(r, gate.stated.min_acceptance)
    given = server if server is not None and r.endpoint and server.base == server_base(r.endpoint) else None
    server = check_settings(engines, None if given else r.endpoint, r.engine_options, r.device, r.dtype, r.native)
    server = server or given
    check_llamacpp(engines, r.llamacpp)
    if "native" in engines:
        check_target(target_dir, r.native)
    work = prepare(
        WorkloadPlan(
            sources.drafter_dir,
            target_dir,
            sources.target_name or str(target_dir),
            origin.target_revision,
            sources.opts or ReadOptions(),
            sources.prompts_file,
            r.max_prompts,
            r.k,
            r.max_new_tokens,
            r.temperature,
            r.seed,
            measured_by(r, server),
            r.engine_options.max_model_len if r.engine_options else None,
            r.trust_remote_code,
        )
    )
    if "native" in engines:
        from .native import refuse  # noqa: PLC0415 - native.py holds torch at its top: loaded only when the native engine runs

        refuse(work)
    # Engines first: what they refuse is refused before a long native pass, and the GPU is free after them.
    first, *rest = sorted(engines, key=lambda name: name == "native")
    with runs_on(first, work, r, progress, server) as measure_first:
        work = converse(work, lambda sub: measure_first(sub, None, answering(progress)), first)
        measured = {first: measure_first(work, speedup, progress)}
    for name in rest:
        measured[name] = measure(name, work, r, progress, server)
    other = next((name for name in measured if name != "native"), None)
    comparison = (
        compare_engines(report_for(work, measured["native"]), report_for(work, measured[other]))
        if len(measured) == 2 and other is not None
        else None
    )
    return report_for(work, measured[engines[-1]], gate, origin, comparison)


def measured_by(r: VerifyRequest, server: Connected | None) -> tuple[str, ...]:
    """The engines that measure, as the workload is bounded by them: an endpoint that is a llama-server is llama.cpp
    (its families, FAMILIES_MEASURED), any other endpoint is vLLM's."""
    if server is not None and server.props is not None:
        return tuple("llamacpp" if e == "endpoint" else e for e in r.engines)
    return r.engines


def answering(progress: Progress) -> Progress:
    return lambda done, total, **_: progress(done, total, phase="answering earlier turns")


def check_request(r: VerifyRequest, min_acceptance: list[float] | None) -> None:
    k, max_new_tokens, max_prompts, temperature = r.k, r.max_new_tokens, r.max_prompts, r.temperature
    engines, speedup = list(r.engines), r.speedup
    if k < 1 or max_new_tokens < 1 or (max_prompts is not None and max_prompts < 1):
        raise UsageError("K, --max-new-tokens and --max-prompts must be at least 1", hint="give values of 1 or more")
    if min_acceptance and len(min_acceptance) > k:
        raise UsageError(f"{len(min_acceptance)} acceptance floors for K={k}", hint="give at most K floors")
    if not 0.0 <= temperature <= MAX_TEMPERATURE:
        raise UsageError(
            f"--temperature {temperature}: give a value from 0 to {MAX_TEMPERATURE:g}", hint="e.g. --temperature 0.7"
        )
    if temperature > 0 and "native" in engines:
        raise UsageError(
            "the native engine measures greedy acceptance only (temperature 0)",
            hint="use --engine vllm (or --endpoint URL) for rejection-sampling acceptance at T > 0",
        )
    if speedup and engines != ["vllm"]:
        raise UsageError(
            "--speedup runs the engine with and without the drafter: it needs --engine vllm", hint="add --engine vllm"
        )


def connect(url: str) -> Connected:
    """The endpoint, connected once: it answers as a model server (one /v1/models), and whether it is a llama-server
    (one /props)."""
    base, model = reach(url)
    return Connected(base, model, llamacpp_props(base))


def check_settings(
    engines: list[str],
    endpoint: str | None = None,
    engine_options=None,
    device: str = "auto",
    dtype: str = "auto",
    native: NativeOptions | None = None,
) -> Connected | None:
    """What each engine refuses from its settings alone, before anything is read or any engine starts (the CLI
    also asks before it resolves a name, so that a typo downloads nothing): a wrong interpreter, address, device
    or dtype fails at once, and the native engine's before vLLM has run. The endpoint, connected: what it said, for
    the rest of the run (None without one)."""
    if native is not None and native.dequantize_mxfp4 and "native" not in engines:
        raise UsageError("--dequantize-mxfp4 is for the native engine", hint="vLLM runs MXFP4 weights as they are")
    if "vllm" in engines:
        check_vllm_options(engine_options or EngineOptions())
    server = connect(endpoint) if endpoint else None
    if "native" in engines and dtype != "auto":
        dtype_name(dtype)
    if "native" in engines and device != "auto":  # auto always resolves; a named device needs torch to check
        from .target import resolve_device  # noqa: PLC0415 - target.py holds torch at its top: a named device only

        resolve_device(device)
    return server


def check_llamacpp(engines: list[str], options: LlamacppOptions) -> None:
    """--engine llamacpp's settings (the binary, the target's GGUF), checked before anything is read; given
    without it, they are refused rather than ignored."""
    if "llamacpp" in engines:
        check_llamacpp_options(options)
    elif options != LlamacppOptions():
        flag = "--target-gguf" if options.target_gguf is not None else "--llama-server"
        raise UsageError(f"{flag} is for --engine llamacpp", hint=f"add --engine llamacpp, or drop {flag}")


VLLM_ONLY = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "distributed_executor_backend",
    "quantization",
    "gpu_memory_utilization",
    "enforce_eager",
    "extra",
)


def check_engine_only(engines: list[str], engine_options) -> None:
    """vLLM's own settings asked for where no vLLM runs would be silently ignored: refused instead."""
    if "vllm" in engines or engine_options is None:
        return
    engine_only = VLLM_ONLY + (("max_model_len",) if engines == ["native"] else ())  # an endpoint's context too
    given = [name for name in engine_only if getattr(engine_options, name) != getattr(EngineOptions(), name)]
    if given:
        flag = "--engine-args" if given[0] == "extra" else "--" + given[0].replace("_", "-")
        raise UsageError(
            f"{flag} is a vLLM setting, and --engine {','.join(engines)} runs no vLLM",
            hint=f"add --engine vllm (or native,vllm), or drop {flag}",
        )


def check_target(target_dir: Path, native: NativeOptions) -> None:
    """A target quantization the native engine must not run, refused from the target's config alone."""
    target_config(target_dir)  # a missing or malformed target config is refused in its own words first
    load_kwargs(target_dir, quantization_config(target_dir), native.dequantize_mxfp4)


def prepare(plan: WorkloadPlan) -> Workload:
    drafter_dir, target_dir, k, max_new_tokens = plan.drafter_dir, plan.target_dir, plan.k, plan.max_new_tokens
    engines, opts, trust_remote_code = list(plan.engines), plan.opts, plan.trust_remote_code
    prompts, rows, prompt_set = read_prompt_set(plan.prompts_file, plan.max_prompts)
    tcfg = target_config(target_dir)
    layers = target_layers(tcfg)
    drafter = read_drafter(drafter_dir, None, replace(opts, target_layers=layers))
    refuse_family(drafter.spec.family, engines)
    refuse_native_dspark(drafter, engines)
    refuse_past_block(drafter, k)
    refuse_misfit(drafter.spec.aux, drafter.spec.target_hidden_size, drafter.spec.vocab_size, tcfg)
    findings = lint_drafter(drafter, tcfg, target_dir) + provenance_findings(drafter_dir, drafter.spec)
    tokenizer = load_tokenizer(target_dir, trust_remote_code)
    encoded, unfit, notes = encode(tokenizer, prompts)
    unfit += sampled_on_native(prompts, encoded, engines)
    for s in unfit:
        encoded[s.index] = None
    context = prompt_context(drafter.spec, tcfg, engines, plan.max_model_len)
    skipped = sorted(unfit + too_long(prompts, encoded, context, max_new_tokens + k), key=lambda s: s.index)
    kept = [i for i in range(len(prompts)) if i not in {s.index for s in skipped}]
    if not kept and unfit:
        raise UsageError(
            f"no prompt can be measured here: {skipped[0].reason}",
            hint="give prompts this target can take (--prompts, --suite)",
        )
    if not kept:
        raise UsageError(
            f"every prompt is too long for the context ({context} tokens) with {max_new_tokens} new tokens",
            hint="use shorter prompts, a smaller --max-new-tokens or a larger --max-model-len",
        )
    skipped = [s.model_copy(update={"index": rows[s.index]}) for s in skipped]  # by their row in the prompt set
    return Workload(
        drafter,
        target_dir,
        plan.target_name,
        plan.target_revision,
        findings,
        [prompts[i] for i in kept],
        [encoded[i] for i in kept],
        skipped,
        k,
        max_new_tokens,
        plan.temperature,
        plan.seed,
        [rows[i] for i in kept],
        trust_remote_code,
        notes,
        context=context,
        target_layers=layers,
        prompt_set=prompt_set,
        thinking=thinking_mode(tokenizer, [prompts[i] for i in kept]),
    )


def refuse_past_block(drafter, k: int) -> None:
    """A block drafter drafts at most its block (less the anchor): a longer K measures what no engine serves."""
    most = max_k(drafter.spec, drafter.dialect) if drafter.spec.family in ("dflash", "dspark") else None
    if most is not None and k > most:
        raise UsageError(
            f"K={k} is past this {drafter.spec.family} drafter's block: it drafts at most {most} tokens",
            hint=f"use -k {most} or less",
            code="k-beyond-block",
        )


def refuse_native_dspark(drafter, engines: list[str]) -> None:
    """A DSpark drafter the native engine does not run (verify/dspark_form.py), before anything loads."""
    if drafter.spec.family != "dspark" or "native" not in engines:
        return
    why = native_refusal(drafter.spec, drafter.dialect)
    if why:
        raise UsageError(
            f"the native engine cannot run this dspark drafter: {why}",
            hint="serve it on llama.cpp and measure it there: eaglezoo serve-config DRAFTER --engine llamacpp, "
            "then verify --engine llamacpp",
            code="family-unverified",
        )


def refuse_family(family: str, engines: list[str]) -> None:
    unable = [e for e in engines if family not in FAMILIES_MEASURED.get(e, ("eagle3",))]
    if unable:
        able = [e for e, families in FAMILIES_MEASURED.items() if family in families]
        raise UsageError(
            f"verify --engine {unable[0]} does not measure {family} drafters",
            hint=f"use --engine {able[0]}"
            if able
            else "eaglezoo lint, convert and serve-config read it (serve it, then measure it on the engine)",
            code="family-unverified",
        )


SAMPLED_ON_NATIVE = (
    "the native engine measures greedy acceptance only: a row at temperature > 0 needs --engine vllm or --endpoint"
)


def sampled_on_native(prompts: list[Prompt], encoded: list, engines: list[str]) -> list[Skipped]:
    """Rows at their own temperature > 0 where the native engine measures (greedy only): skipped for every engine,
    so that two engines measure the same prompts."""
    if "native" not in engines:
        return []
    return [
        Skipped(index=n, bucket=p.bucket, reason=SAMPLED_ON_NATIVE)
        for n, (p, ids) in enumerate(zip(prompts, encoded, strict=True))
        if p.temperature and ids is not None
    ]


@contextmanager
def runs_on(
    name: str, work: Workload, request: VerifyRequest, progress: Progress, server: Connected | None = None
) -> Iterator[Callable[..., Measurement]]:
    """measure(work, speedup, progress) on one engine for several workloads (a conversation's earlier turns, then
    the measurement): vLLM is started once for all of them."""
    if name == "vllm":
        with vllm_session(work, request.engine_options or EngineOptions(), progress) as session:
            yield session.measure
        return
    if name == "llamacpp":
        with llamacpp_session(work, request.llamacpp, progress) as measure_on_server:
            yield measure_on_server
        return
    yield lambda sub, _speedup, shown: measure(name, sub, request, shown, server)


def measure(
    name: str, work: Workload, request: VerifyRequest, progress: Progress, server: Connected | None = None
) -> Measurement:
    """One run on the native engine or an endpoint (vLLM runs through `runs_on`)."""
    if name == "native":
        from .native import measure_native  # noqa: PLC0415 - native.py holds torch at its top: loaded only when the native engine runs

        return measure_native(work, request.device, request.dtype, request.native, progress)
    assert request.endpoint is not None
    server = server or connect(request.endpoint)
    if server.props is not None:
        return measure_llamacpp(work, server.base, server.props, progress)
    return measure_endpoint(work, server, progress)
