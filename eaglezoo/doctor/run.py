"""One diagnosis: the server (or the planned deployment) measured, its files read as its engine reads them, the
native reference run for every hypothesis at once, and the verdict drawn from what the fixes restore."""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..checkpoint.config import target_config
from ..checkpoint.formats.aux_ids import Capture, vllm_captures
from ..checkpoint.formats.base import ReadOptions
from ..checkpoint.read import Drafter
from ..checkpoint.spec import DrafterSpec
from ..engine_versions import issues_for, touches
from ..errors import EaglezooError, EngineError, UsageError
from ..lint import lint_drafter
from ..names import COMPARE_ENGINES
from ..requirements import Requirements, broken
from ..serving import DEV_MODE
from ..verify.counters import SpecDecodeCounters
from ..verify.endpoint import ServerFacts, ServerFailed, check_depth, check_server, measure_requests, server_facts
from ..verify.llamacpp_endpoint import llamacpp_props
from ..verify.report.build import built
from ..verify.report.gate import NO_FLOORS, FloorTable
from ..verify.run import SAMPLED_ON_NATIVE, WorkloadPlan
from ..verify.sglang_server import sglang_facts
from ..verify.workload import Progress, Workload
from .ambiguity import Choice, Settled, prepare_settled, served_readings, settle_suspects
from .blocks import past_block, within_block
from .deployment import measure_deployment
from .family_suspects import FAMILIES, anchor_notes, family_suspects
from .fit import classify, fingerprint
from .llamacpp import LlamaNamed, diagnose_llamacpp
from .report import Acceptance, DoctorReport, Server
from .request import DEFAULT_K, DoctorRequest
from .sglang import Named as SglangNamed
from .sglang import diagnose_sglang
from .suspects import Suspect, as_named, as_served, k_table_zero, suspects
from .trials import Prompts, Reference, Variant, acceptance, run_trials
from .verdict import MIN_GAP, Answered, Evidence, judge


@dataclass(frozen=True)
class Sides:
    """The drafter and target named (what was trained and meant) and served (what the engine loaded)."""

    named_drafter: Path
    named_target: Path
    served_drafter: Path | None
    served_target: Path | None


@dataclass(frozen=True)
class Served:
    """What the server (or the planned deployment) did with the prompts."""

    facts: ServerFacts
    requests: Sequence[Answered]  # each: tokens, accepted per verify step (None without per-request metrics)
    counters: SpecDecodeCounters
    seconds: float
    refusal: EaglezooError | None = None  # the planned deployment's engine would not serve the folder


@dataclass(frozen=True)
class Named:
    """What the command named, resolved: the drafter and target folders (None: the server's own), the prompts file,
    how to read the drafter, the registry entry's floors at a K and whether its prompts are the ones run, and the
    names the report gives the drafter and target."""

    drafter_dir: Path | None = None
    target_dir: Path | None = None
    prompts_file: Path | None = None
    opts: ReadOptions | None = None
    floors: FloorTable = NO_FLOORS  # the registry entry's (T=0): doctor holds the server to `covering(K)`
    entry_prompts: bool = False
    target_name: str | None = None
    drafter_name: str | None = None
    requirements: Requirements = field(default_factory=Requirements)  # the registry entry's (requirements.py)


def diagnose(request: DoctorRequest, named: Named, progress: Progress = lambda *a, **kw: None) -> DoctorReport:
    t0 = time.perf_counter()
    drafter_dir, target_dir, target_name, drafter_name = (
        named.drafter_dir,
        named.target_dir,
        named.target_name,
        named.drafter_name,
    )
    base = check_server(request.endpoint) if request.endpoint else None
    props = llamacpp_props(base) if base else None
    if base and props is not None:
        return diagnose_llamacpp(base, props, llama_named(request, named), llama_reference(request), progress)
    if request.served_gguf is not None:
        raise UsageError(
            f"--served-gguf names the drafter a llama-server serves; {base or 'the planned deployment'} is not "
            "llama-server",
            hint="drop --served-gguf, or point --endpoint at the llama-server started with it",
        )
    sglang = sglang_facts(base) if base else None
    if sglang is not None:
        return diagnose_sglang(
            sglang,
            SglangNamed(
                drafter_dir,
                target_dir,
                named.opts,
                drafter_name,
                target_name,
                request.k,
                named.prompts_file,
                request.max_prompts,
                request.max_new_tokens,
            ),
        )
    facts = server_facts(base) if base else None
    sides = (
        endpoint_sides(facts, drafter_dir, target_dir)
        if facts
        else Sides(drafter_dir, target_dir, drafter_dir, target_dir)
    )
    k = depth(facts, request.k)
    try:
        plan = WorkloadPlan(
            sides.named_drafter,
            sides.named_target,
            target_name or str(sides.named_target),
            opts=named.opts or ReadOptions(),
            prompts_file=named.prompts_file,
            max_prompts=request.max_prompts,
            k=k,
            max_new_tokens=request.max_new_tokens,
            engines=COMPARE_ENGINES,  # the native reference beside the vLLM server
            max_model_len=server_context(facts, request),  # the server's context bounds the prompts
        )
        try:
            work, settled = prepare_settled(plan, ambiguity_reference(request, plan), progress)
        except UsageError as exc:
            inside = within_block(exc, plan) if facts else None  # a server drafting past a DFlash block: diagnosed
            if inside is None:
                raise
            work, settled = prepare_settled(inside, ambiguity_reference(request, plan), progress)
    except UsageError as exc:
        if SAMPLED_ON_NATIVE in exc.message:  # every row sampled: doctor's reason, not the native engine's
            raise UsageError(
                f"no prompt can be diagnosed: {DOCTOR_GREEDY}",
                hint="give rows at temperature 0 (the default) to diagnose the server",
            ) from None
        raise
    if work.spec.family not in ("eagle3", *FAMILIES):
        raise UsageError(
            f"doctor diagnoses EAGLE-3, EAGLE 3.1, P-EAGLE and DFlash drafters; this is a {work.spec.family} drafter",
            hint="measure it with eaglezoo verify DRAFTER --engine vllm (or natively), and lint it",
        )
    served = measure(base, facts, replace(work, k=k), sides, request, progress)
    readings, others, notes = gather_suspects(sides, work, served.facts, drafter_name, settled)
    if served.refusal is not None and not (others or any(r.suspects for r in readings)):
        raise served.refusal  # the engine's failure, which doctor cannot explain from the files
    server, said = observed(served, k)
    ref = Reference(request.device, request.reference_dtype, request.batch_size, work.trust_remote_code)
    chosen, trials, reference_s, passes, reading_notes = try_fixes(
        sides, work, Suspected(readings, others), server, ref, progress
    )
    found, trusted = trust_server(chosen.suspects, trials, server)
    found = refusal_first(found + others, served, sides, drafter_name)
    notes += (
        reading_notes
        + trusted
        + precision_note(request.reference_dtype)
        + ([settled.said()] if settled else [])
        + version_notes(served.facts.version, work.drafter.spec, work.drafter.dialect, max(work.temperatures()) > 0)
        + requirement_notes(named.requirements, served.facts, k)
    )
    floors = named.floors.covering(k)
    evidence = Evidence(
        server=server,
        requests=served.requests,
        trials=trials,
        suspects=found,
        floors=floors,
        entry_prompts=named.entry_prompts,
        k_zero=k_table_zero(served.facts.k_table),
        k_table=served.facts.k_table,
        refusal=served.refusal.message if served.refusal else None,
        k=k,
        files_read=sides.served_drafter is not None,
        family=work.spec.family,
        rules=past_block(work, k, server, trials["reference"]),
    )
    verdict, summary, findings, judged = judge(evidence)
    return built(
        DoctorReport,
        verdict=verdict,
        summary=summary,
        server=server_part(served.facts, served.requests, k, request.endpoint),
        drafter=str(sides.named_drafter),
        target=target_name or str(sides.named_target),
        prompts=len(work.encoded),
        max_new_tokens=work.max_new_tokens,
        measured=[a for a in (server, *trials.values()) if a is not None],
        findings=findings,
        floors=floors,
        notes=work.notes + skipped_notes(work) + said + notes + judged,
        timing={
            "server_s": served.seconds,
            "reference_s": reference_s,
            "target_passes": passes,
            "total_s": time.perf_counter() - t0,
        },
    )


def llama_named(request: DoctorRequest, named: Named) -> LlamaNamed:
    """The llama-server case: llama-server names neither the drafter nor the target's folder, so both are named."""
    if named.drafter_dir is None or named.target_dir is None:
        raise UsageError(
            "a llama-server does not say which drafter and target folders it was converted from",
            hint="name both: eaglezoo doctor DRAFTER --target TARGET --endpoint URL --served-gguf DRAFT.gguf",
        )
    return LlamaNamed(
        request.served_gguf,
        named.drafter_dir,
        named.target_dir,
        named.opts or ReadOptions(),
        named.drafter_name,
        named.target_name,
        named.prompts_file,
        request.max_prompts,
        request.max_new_tokens,
        request.k or DEFAULT_K,
    )


def ambiguity_reference(request: DoctorRequest, plan: WorkloadPlan) -> Reference:
    return Reference(request.device, request.reference_dtype, request.batch_size, plan.trust_remote_code)


def llama_reference(request: DoctorRequest) -> Reference:
    return Reference(request.device, request.reference_dtype, request.batch_size)


def server_context(facts: ServerFacts | None, request: DoctorRequest) -> int | None:
    """The server's context (its /v1/models), or the planned deployment's --max-model-len: a prompt that does not fit
    with its new and draft tokens is skipped with its reason, as verify skips it, never sent to a 400."""
    if facts is not None:
        return facts.max_model_len
    return getattr(request.engine_options, "max_model_len", None)


DOCTOR_GREEDY = (
    "doctor compares the server with the greedy native reference: a row at temperature > 0 is measured "
    "on the server by eaglezoo verify DRAFTER --endpoint URL"
)


def skipped_notes(work: Workload) -> list[str]:
    """The rows not measured, counted by reason (a sampled row's reason is doctor's own, not the native engine's)."""
    reasons: dict[str, int] = {}
    for s in work.skipped:
        reason = DOCTOR_GREEDY if s.reason == SAMPLED_ON_NATIVE else s.reason
        reasons[reason] = reasons.get(reason, 0) + 1
    return [f"{n} prompt{'s' if n > 1 else ''} skipped: {reason}" for reason, n in reasons.items()]


def precision_note(dtype: str) -> list[str]:
    if dtype in ("float32", "fp32"):
        return []
    return [
        (
            f"the native reference ran in {dtype} (--reference-dtype): its figures come close to a server's, not "
            "count for count as in float32"
        )
    ]


def depth(facts: ServerFacts | None, asked: int | None) -> int:
    """K: the server's where it says it, else the one asked (3 by default); checked against what it drafts."""
    if facts and facts.k and asked and facts.k != asked:
        raise UsageError(f"the server drafts K={facts.k}, not {asked}", hint=f"run with -k {facts.k}, or without -k")
    return (facts.k if facts else None) or asked or DEFAULT_K


def measure(
    base: str | None,
    facts: ServerFacts | None,
    work: Workload,
    sides: Sides,
    request: DoctorRequest,
    progress: Progress,
) -> Served:
    if base is not None:
        try:
            requests, counters, seconds = measure_requests(base, facts.model, work, progress)
        except EngineError as exc:
            failure = server_failure(base, exc)
            if failure is None:
                raise
            return Served(facts, [], SpecDecodeCounters.none(), 0.0, failure)
        check_depth(requests, counters, work.k)  # a server that does not say its K shows it in what it drafts
        return Served(facts, requests, counters, seconds)
    return Served(*measure_deployment(work, sides.named_drafter, request, progress))


def server_failure(base: str, exc: EngineError) -> EngineError | None:
    """A server that failed on the requests (an HTTP 5xx) or died under them: a finding once doctor can say why.
    A timeout, or a refusal of the request itself (4xx), is the error it is."""
    if isinstance(exc, ServerFailed):
        said = f" ({exc.hint})" if exc.hint and not exc.hint.startswith("point --endpoint") else ""
        return EngineError(f"the server at {base} failed on doctor's requests: {exc.message}{said}", hint=exc.hint)
    try:
        check_server(base)
    except EngineError:
        return EngineError(
            f"the server at {base} stopped answering under doctor's requests (it died: its own log says why)",
            hint=exc.hint,
        )
    return None


def refusal_first(found: list[Suspect], served: Served, sides: Sides, drafter_name: str | None) -> list[Suspect]:
    """The planned deployment's engine refusing the folder is a finding when doctor can say why, else the error."""
    if served.refusal is None:
        return found
    if not found:
        raise served.refusal
    name = shlex.quote(drafter_name or str(sides.named_drafter))
    started = served.facts.url == "(started by eaglezoo)"  # deployment.measure_deployment's
    what = (
        f"vLLM refuses to serve {sides.served_drafter} as it is ({served.refusal.message})"
        if started
        else f"{served.refusal.message}: vLLM cannot serve {sides.served_drafter} as it is"
    )
    return [
        Suspect(
            "engine-refuses" if started else "server-fails",
            "engine-config",
            what,
            f"serve OUT after `eaglezoo convert {name} OUT` (`eaglezoo serve-config {name}` prints the whole path)",
        ),
        *found,
    ]


def observed(served: Served, k: int) -> tuple[Acceptance | None, list[str]]:
    """The server's acceptance (None where the engine refused to serve), with what it could not be read from."""
    if served.refusal is not None:
        return None, [f"vLLM could not serve the folder as it is: {served.refusal.message}"]
    if served.counters.num_drafts == 0 and not k_table_zero(served.facts.k_table):
        raise EngineError(
            f"{served.facts.url} ran no speculative decoding for these requests (0 drafts)",
            hint="start it with --speculative-config (vLLM #25250: a missing drafter is silent)",
        )
    return server_acceptance(served.requests, served.counters, k)


def endpoint_sides(facts: ServerFacts, drafter_dir: Path | None, target_dir: Path | None) -> Sides:
    if facts.dev_mode and facts.method is None:
        raise EngineError(
            f"the server at {facts.url} runs without speculative decoding (no speculative_config)",
            hint="start vllm serve with --speculative-config; doctor diagnoses a drafter's acceptance",
        )
    if facts.method not in (None, "eagle3", "eagle", "dflash"):
        raise UsageError(
            f"the server at {facts.url} drafts with method {facts.method}: doctor diagnoses EAGLE-3, P-EAGLE and "
            "DFlash drafters",
            hint="measure it with eaglezoo verify DRAFTER --endpoint URL where verify reads it",
        )
    served_drafter, served_target = facts.local(facts.drafter), facts.local(facts.root)
    named_drafter, named_target = drafter_dir or served_drafter, target_dir or served_target
    if named_drafter is None:
        raise UsageError(
            f"the server at {facts.url} does not say which drafter it loaded, or loaded it from a "
            "folder this machine cannot read",
            hint=f"name the drafter (a registry id or its folder), or start the server with {DEV_MODE} on this machine",
        )
    if named_target is None:
        raise UsageError(
            f"the server at {facts.url} serves {facts.root}, which is not a folder this machine can read",
            hint="name the target it was trained for with --target (a folder or Hub repo id)",
        )
    return Sides(named_drafter, named_target, served_drafter, served_target)


def server_acceptance(
    requests: Sequence[Answered], counters: SpecDecodeCounters, k: int
) -> tuple[Acceptance, list[str]]:
    """The server's acceptance from its per-request figures, else from its counters, with the bias that costs."""
    steps = [r.accepted for r in requests]
    if steps and all(s is not None for s in steps):
        return acceptance("server", [s for s in steps if s is not None], k), []
    mean = counters.mean_acceptance_length
    return Acceptance(
        source="server",
        mean_acceptance_length=mean,
        interval=[mean, mean],
        per_position=counters.acceptance_rates()[:k],
        prompts=len(requests),
        drafts=counters.num_drafts,
    ), [
        "the server gave no per-request acceptance: restart it with --per-request-spec-decode-metrics detailed for "
        "per-prompt figures and intervals. Read from /metrics instead: vLLM's per-position counter has no "
        "drafted-per-position twin, so its rates are skewed wherever K varies (a K table)"
    ]


@dataclass(frozen=True)
class Reading:
    """One way vLLM may run the served folder (a model runner's capture of the aux layers), with the suspects it
    implies; where vLLM's runners read the folder differently, the server's acceptance says which it ran."""

    capture: Capture | None
    suspects: list[Suspect]
    served: Drafter | None = None  # the served folder under this reading
    choice: Choice | None = None  # the reading of a fact its files leave ambiguous (doctor/ambiguity.py)

    def said(self) -> str:
        return "; ".join(
            [
                *([self.capture.said()] if self.capture else []),
                *([f"read with {self.choice.said()}"] if self.choice else []),
            ]
        )

    def runner(self) -> str:
        by = f"the {'/'.join(self.capture.runners)} runner's reading" if self.capture else "the reading"
        return by + (f" with {self.choice.said()}" if self.choice else "")


@dataclass(frozen=True)
class Suspected:
    """The suspects the served files raise: per reading of the folder by vLLM's runners, and the others (whatever
    the reading), which every reading's trials try too."""

    readings: list[Reading]
    others: list[Suspect]


def gather_suspects(
    sides: Sides, work: Workload, facts: ServerFacts, drafter_name: str | None, settled: Settled | None = None
) -> tuple[list[Reading], list[Suspect], list[str]]:
    """Every difference between what is served and what was trained (per reading of the served folder, and those of
    the target), and what could not be compared."""
    notes, readings, found = [], [], []
    if sides.served_drafter is None:
        notes.append(
            f"the server's drafter {facts.drafter} is not a folder on this machine: its files were not "
            "compared with the drafter named"
            if facts.drafter
            else "the server does not say which drafter "
            f"it loaded (start it with {DEV_MODE}): its files were not compared with the drafter "
            "named"
        )
    else:
        each = served_readings(sides.served_drafter)
        readings = [
            Reading(
                c,
                settle_suspects(
                    suspects(served, work.drafter, c, drafter_name)
                    + family_suspects(served, work.drafter, c, drafter_name),
                    choice,
                    settled,
                    sides.served_drafter,
                ),
                served,
                choice,
            )
            for choice, served in each
            for c in vllm_captures(served.config, work.target_layers) or [None]
        ]
        notes += served_lint(each[0][1], sides.served_target or sides.named_target)
        notes += anchor_notes(each[0][1], work.drafter)
    if sides.served_target is None:
        notes.append(f"the served target {facts.root} is not a folder here: its fit was not fingerprinted")
    elif sides.served_target.resolve() != sides.named_target.resolve():
        fit, parts = classify(fingerprint(sides.served_target), fingerprint(sides.named_target))
        if fit != "fits":
            found.append(target_suspect(fit, parts, sides))
    if facts.quantization:
        notes.append(
            f"the server runs its target quantized ({facts.quantization}): a drafter trained on the "
            "unquantized target reads other hidden states (docs/doctor.md, target-quantized)"
        )
    if facts.draft_sample_method:
        notes.append(
            f"the server drafts with draft_sample_method={facts.draft_sample_method}: doctor measures at "
            "temperature 0, where it plays no part; at T > 0 it moves acceptance (vllm/config/speculative.py)"
        )
    if facts.k_table is None and facts.dev_mode is False:
        notes.append(
            "the server's speculative config could not be read (/server_info answers only with "
            f"{DEV_MODE}): its K table and sampling were not checked"
        )
    return readings, found, notes


def served_lint(served, target_dir: Path) -> list[str]:
    """What lint says of the served folder against the served target (context, RoPE, keys an engine ignores, engine
    versions...): said beside the findings, which are only what the trials can try."""
    try:
        findings = lint_drafter(served, target_config(target_dir), target_dir)
    except EaglezooError as exc:
        return [f"lint of the served drafter stopped: {exc.message}"]
    return [
        f"lint of the served drafter: {f.severity} {f.code}: {f.message}"
        for f in findings
        if f.severity in ("error", "warning") and not f.code.startswith("aux-ids") and about_vllm(f)
    ]  # the aux ids: a suspect


def about_vllm(f) -> bool:
    """A finding that concerns the vLLM server doctor measures: not another engine's row of lint's engine table,
    nor what llama.cpp's own converter would bake."""
    other_engine = f.code == "engine-unfaithful" and not f.message.startswith("vllm")
    return not other_engine and not f.code.startswith("llamacpp-")


def target_suspect(fit: str, parts: list[str], sides: Sides) -> Suspect:
    served, named = sides.served_target, sides.named_target
    what = {
        "fine-tuned": f"the served target {served} has the config and tokenizer of {named} but other weights",
        "quantized": f"the served target {served} is {named} quantized differently",
        "different": f"the served target {served} is not {named}: its {', '.join(parts)} differ",
    }[fit]
    fix = (
        "retrain the drafter on the fine-tuned target (its hidden states moved), or serve the target it was "
        f"trained for: vllm serve {named}"
        if fit == "fine-tuned"
        else f"serve the target the drafter was trained for: vllm serve {named} (or a drafter trained on {served})"
    )
    return Suspect(f"target-{fit}", "target-mismatch", what, fix)


def try_fixes(
    sides: Sides, work: Workload, suspected: Suspected, server: Acceptance | None, ref: Reference, progress: Progress
) -> tuple[Reading, dict, float, int, list[str]]:
    """Native trials: on the served target the drafter as served and with each fix alone, for every reading of the
    served folder; the drafter as named on its own target (the same pass where the targets are one). The reading
    whose trial reproduces the server is the one it ran."""
    t0 = time.perf_counter()
    readings, others = suspected.readings, suspected.others
    prompts = Prompts(work.encoded, work.k, work.max_new_tokens)
    reference = as_named(work.drafter)
    passes: list[tuple[Path, list[Variant]]] = []
    if sides.served_drafter is not None:
        served_target = sides.served_target or sides.named_target
        variants = [v for i, r in enumerate(readings) for v in reading_variants(r.served, r, others, i, len(readings))]
        if served_target.resolve() == sides.named_target.resolve():
            variants.append(reference)
        else:
            passes.append((sides.named_target, [reference]))
        passes.insert(0, (served_target, variants))
    else:
        passes.append((sides.named_target, [reference]))
    trials = {}
    for target_dir, variants in passes:
        paths = run_trials(target_dir, variants, prompts, ref, progress)
        trials.update({source: acceptance(source, steps, work.k) for source, steps in paths.items()})
    chosen, notes = choose(readings, trials, server)
    prefix = f"{readings.index(chosen)}|" if len(readings) > 1 else ""
    trials = {
        source.removeprefix(prefix): a for source, a in trials.items() if "|" not in source or source.startswith(prefix)
    }
    trials = {s: a.model_copy(update={"source": s}) for s, a in trials.items()}
    order = ["as served", *[s for s in trials if s.startswith("fix: ")], "reference"]
    chosen = chosen or Reading(None, [])
    return chosen, {s: trials[s] for s in order if s in trials}, time.perf_counter() - t0, len(passes), notes


def reading_variants(served, reading: Reading, others: list[Suspect], i: int, n: int) -> list[Variant]:
    """The drafter as served under one reading and with each of its fixes alone; none vLLM itself could not run
    (fewer aux states than the drafter's fc takes: the server fails on its first drafting request)."""
    base = as_served(served, reading.capture)
    variants = [base, *[s.fixed for s in reading.suspects + others if s.fixed is not None]]
    if reading.capture is not None and not reading.capture.fits:
        variants = [v for v in variants if v.boundary != base.boundary]
    return [replace(v, source=f"{i}|{v.source}") if n > 1 else v for v in variants]


def choose(readings: list[Reading], trials: dict, server: Acceptance | None) -> tuple[Reading | None, list[str]]:
    """The reading the server ran: the one whose native trial reproduces the server's acceptance (prompt by prompt
    where both are known); a server that failed ran a reading vLLM cannot serve."""
    if len(readings) <= 1:
        return (readings[0] if readings else None), []
    said = " / ".join(r.said() for r in readings)
    runnable = [i for i, r in enumerate(readings) if f"{i}|as served" in trials]
    if server is None:
        failing = [i for i, r in enumerate(readings) if i not in runnable]
        pick = (failing or runnable or [0])[0]
        why = (
            f"the server failed, which {readings[pick].runner()} explains"
            if failing
            else "the server gave no acceptance to tell which it ran"
        )
        return readings[pick], [f"vLLM may read the served folder in more than one way ({said}); {why}"]
    pick = min(runnable, key=lambda i: distance(trials[f"{i}|as served"], server)) if runnable else 0
    return readings[pick], [
        (
            f"vLLM may read the served folder in more than one way ({said}); the server's acceptance is that of "
            f"{readings[pick].runner()}"
        )
    ]


def distance(trial: Acceptance, server: Acceptance) -> float:
    if server.per_prompt and len(server.per_prompt) == len(trial.per_prompt):
        return sum(abs(a - b) for a, b in zip(trial.per_prompt, server.per_prompt, strict=True))
    return abs(trial.mean_acceptance_length - server.mean_acceptance_length)


def trust_server(found: list[Suspect], trials: dict, server: Acceptance | None) -> tuple[list[Suspect], list[str]]:
    """The server's own acceptance wins over eaglezoo's model of the engine: where the server equals the reference
    prompt by prompt and the drafter as served (by that model) does not, no aux-id capture is claimed."""
    served, reference = trials.get("as served"), trials.get("reference")
    if server is None or served is None or reference is None or not same(server, reference) or same(server, served):
        return found, []
    kept = [s for s in found if not s.cause.startswith("aux-ids")]
    if len(kept) == len(found):
        return found, []
    return kept, [
        (
            "the server's acceptance equals the reference's prompt by prompt, while the drafter as eaglezoo "
            "reads it served does not: the server captures the layers the drafter was trained on, whatever "
            "its config seems to say (please report this config: eaglezoo's model of vLLM missed it)"
        )
    ]


def same(a: Acceptance, b: Acceptance) -> bool:
    if a.per_prompt and len(a.per_prompt) == len(b.per_prompt):
        return all(abs(x - y) < 1e-6 for x, y in zip(a.per_prompt, b.per_prompt, strict=True))
    return abs(a.mean_acceptance_length - b.mean_acceptance_length) < MIN_GAP


def server_part(facts: ServerFacts, requests: Sequence[Answered], k: int, endpoint: str | None) -> Server:
    return Server(
        url=facts.url if endpoint else None,
        engine="vllm" if endpoint else "vllm (started by eaglezoo)",
        version=facts.version,
        target=facts.root,
        drafter=facts.drafter,
        method=facts.method,
        k=k,
        k_table=facts.k_table,
        draft_sample_method=facts.draft_sample_method,
        max_model_len=facts.max_model_len,
        per_request_metrics=bool(requests) and all(r.accepted is not None for r in requests),
        config_readable=facts.dev_mode,
    )


def requirement_notes(req: Requirements, facts: ServerFacts, k: int) -> list[str]:
    """Each requirement the drafter declares (its registry entry's) that the vLLM server breaks: its /version below
    the least release, its K, its context."""
    found = broken(req, engine="vllm", version=facts.version, k=k, context=facts.max_model_len)
    return [f"requirement broken: {line}" for line in found]


def version_notes(version: str | None, spec: DrafterSpec, dialect: str | None, sampled: bool) -> list[str]:
    """The known-issue rows (eaglezoo/engine_versions.py) the vLLM server's /version falls in, for this drafter and
    these prompts (`sampled`: a row at temperature > 0); or why they were not checked."""
    if version is None:
        return []
    rows = issues_for("vllm", version)
    if rows is None:
        return [
            f"the server's version {version[:40]!r} does not parse as a release (N.N.N): the known engine issues "
            "(eaglezoo/engine_versions.py) were not checked"
        ]
    fc_norm = spec.fc_norm or spec.norm_output
    hit = [
        r
        for r in rows
        if touches(r, fc_norm=fc_norm, mla=spec.arch == "mla", speculators=dialect == "speculators", sampled=sampled)
    ]
    return [f"vLLM {version} is in a known engine issue, {r.key} ({r.releases()}): {r.what}; {r.source}" for r in hit]
