"""doctor on an SGLang server: its resolved speculative settings (verify/sglang_server.py) against the drafter named,
each rule a cause code with its fix (docs/doctor.md). SGLang is not run here: every rule is read from SGLang 0.5.23's
source (cited by file:line), and the report says so (SOURCE_NOTE). The measured acceptance: the server's own
cumulative figure, where it has drafted, and, where the drafter and target are folders here, the prompts sent as
token ids, greedy, each answer's acceptance read from `sglext.spec_tokens_details`."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from ..checkpoint.config import target_config
from ..checkpoint.formats.base import ReadOptions
from ..checkpoint.read import Drafter, read_drafter
from ..checkpoint.spec import default_boundary_ids
from ..engine_versions import issues_for, touches
from ..errors import EaglezooError, EngineError, UsageError
from ..verify.endpoint import request, run_wave
from ..verify.report.build import built
from ..verify.run import SAMPLED_ON_NATIVE, WorkloadPlan, prepare
from ..verify.sglang_server import SglangFacts, spec_steps
from ..verify.workload import Workload
from .report import Acceptance, DoctorReport, Finding, Server
from .trials import acceptance

SOURCE_NOTE = "SGLang rules checked against its source (0.5.23), not a running server"
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN")  # NEXTN aliases EAGLE (sglang srt/arg_groups/speculative_hook.py:162)
NESTED_IDS = "eagle_config.eagle_aux_hidden_state_layer_ids"


@dataclass(frozen=True)
class Named:
    """The drafter and target the command named (None: the server's own, where its folder is on this machine)."""

    drafter_dir: Path | None
    target_dir: Path | None
    opts: ReadOptions | None
    drafter_name: str | None
    target_name: str | None
    k: int | None  # -k: the depth the user means to serve
    prompts_file: Path | None = None
    max_prompts: int | None = None
    max_new_tokens: int = 64


@dataclass(frozen=True)
class Case:
    facts: SglangFacts
    drafter: Drafter | None
    drafter_name: str
    target_layers: int | None
    k: int | None


def diagnose_sglang(facts: SglangFacts, named: Named) -> DoctorReport:
    t0 = time.perf_counter()
    if facts.algorithm is None:
        raise EngineError(
            f"the SGLang server at {facts.url} runs no speculative decoding (its {facts.path} says "
            "speculative_algorithm null)",
            hint="start it with --speculative-algorithm EAGLE3 --speculative-draft-model-path DRAFTER "
            "(eaglezoo serve-config DRAFTER --engine sglang prints the whole command)",
        )
    notes: list[str] = [SOURCE_NOTE]
    work = workload(facts, named, notes)
    case = Case(
        facts,
        work.drafter if work else drafter_of(facts, named, notes),
        named.drafter_name or facts.drafter or "the server's drafter",
        target_layers(facts, named.target_dir),
        named.k,
    )
    check_family(case.drafter)
    server = measure(facts, work) if work else None
    if work and server is None:
        notes.append(
            "the server's answers carry no sglext.spec_tokens_details (return_spec_tokens_details): no per-prompt "
            "acceptance; its cumulative figure only"
        )
    findings = [f for rule in RULES if (f := rule(case, notes)) is not None]
    findings.sort(key=lambda f: not f.confirmed)
    notes += (work.notes + skipped(work) if work else []) + measured_notes(facts, server)
    confirmed = [f for f in findings if f.confirmed]
    verdict = confirmed[0].verdict if confirmed else "healthy"
    summary = confirmed[0].what if confirmed else healthy_summary(facts, findings)
    return built(
        DoctorReport,
        verdict=verdict,
        summary=summary,
        server=server_part(facts, server),
        drafter=str(case.drafter.path) if case.drafter else case.drafter_name,
        target=named.target_name or facts.model_path or facts.model,
        prompts=server.prompts if server else 0,
        max_new_tokens=work.max_new_tokens if server and work else 0,
        measured=[server] if server else [],
        findings=findings,
        notes=notes,
        timing={"total_s": time.perf_counter() - t0},
    )


def skipped(work: Workload) -> list[str]:
    """The rows not sent, counted by reason (a sampled row: doctor measures greedy rows)."""
    reasons: dict[str, int] = {}
    for row in work.skipped:
        reason = (
            "a row at temperature > 0 (doctor sends greedy rows)" if row.reason == SAMPLED_ON_NATIVE else row.reason
        )
        reasons[reason] = reasons.get(reason, 0) + 1
    return [f"{n} prompt(s) not sent: {reason}" for reason, n in reasons.items()]


def server_part(facts: SglangFacts, measured: Acceptance | None) -> Server:
    return Server(
        url=facts.url,
        engine="sglang",
        version=facts.version,
        target=facts.model_path or facts.model,
        drafter=facts.drafter,
        method=facts.algorithm,
        k=facts.num_steps or 0,
        k_table=None,
        draft_sample_method=None,
        max_model_len=facts.max_model_len,
        per_request_metrics=measured is not None,
        config_readable=True,
    )


def drafter_of(facts: SglangFacts, named: Named, notes: list[str]) -> Drafter | None:
    """The drafter named, else the server's own folder where it is on this machine; read once, strictly."""
    folder = named.drafter_dir or facts.local(facts.drafter)
    if folder is None:
        notes.append(
            f"the server's drafter {facts.drafter or '(not said)'} is not a folder on this machine: name the drafter "
            "(doctor DRAFTER --endpoint URL) for the rules that read it (its family, its aux ids)"
        )
        return None
    return read_drafter(folder, opts=named.opts or ReadOptions())


def check_family(drafter: Drafter | None) -> None:
    if drafter is not None and drafter.spec.family != "eagle3":
        raise UsageError(
            f"doctor's SGLang rules are for EAGLE-3 and EAGLE 3.1 drafters; this is a {drafter.spec.family} drafter",
            hint="lint it (eaglezoo lint DRAFTER) and print SGLang's command with eaglezoo serve-config DRAFTER "
            "--engine sglang",
        )


def workload(facts: SglangFacts, named: Named, notes: list[str]) -> Workload | None:
    """The prompts, tokenised by the target named (or the server's own folder), where the drafter and target are
    folders here and the server drafts; else None and a note saying why no prompts were sent."""
    drafter = named.drafter_dir or facts.local(facts.drafter)
    target = named.target_dir or facts.local(facts.model_path)
    if drafter is None or target is None or facts.algorithm not in EAGLE_FAMILY or facts.num_steps is None:
        notes.append(
            "no prompts sent: doctor measures an SGLang server where the drafter and target are folders here (name "
            "them, or run doctor beside the server) and it drafts EAGLE-style"
        )
        return None
    served_drafter = facts.local(facts.drafter)
    if served_drafter is not None and served_drafter.resolve() != drafter.resolve():
        notes.append(
            f"the server's drafter is the folder {facts.drafter}, not the drafter named ({drafter}): the rules hold "
            "what SGLang reads from its folder to what the drafter named was trained with"
        )
    served = facts.local(facts.model_path)
    if served is not None and served.resolve() != target.resolve():
        notes.append(
            f"the server serves {facts.model_path}, not the target named ({target}): the prompts were tokenised by the "
            "target named, and the drafter's acceptance there is not the one it was trained for"
        )
    plan = WorkloadPlan(
        drafter,
        target,
        named.target_name or str(target),
        opts=named.opts or ReadOptions(),
        prompts_file=named.prompts_file,
        max_prompts=named.max_prompts,
        k=facts.num_steps,
        max_new_tokens=named.max_new_tokens,
        max_model_len=facts.max_model_len,
    )
    try:
        return prepare(plan)
    except UsageError as exc:
        if SAMPLED_ON_NATIVE not in exc.message:
            raise
        notes.append("no prompts sent: every row samples (T > 0); doctor measures greedy rows")
        return None


def sglang_completion(base: str, body: dict) -> object:
    return request(base, "/v1/completions", body)


def measure(facts: SglangFacts, work: Workload) -> Acceptance | None:
    """The prompts as token ids to /v1/completions, greedy, each answer's verify steps read from
    sglext.spec_tokens_details; None where the server gives none."""

    def body(i: int) -> dict:
        return {
            "model": facts.model,
            "prompt": work.encoded[i],
            "max_tokens": work.max_new_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "return_spec_tokens_details": True,  # protocol.py:393
            "stream": False,
        }

    steps: list[list[int]] = []
    for _, answer in run_wave(facts.url, list(range(len(work.encoded))), body, send=sglang_completion):
        found = spec_steps(facts.url, answer, work.k)
        if found is None:
            return None
        steps.append(found)
    return acceptance("server", steps, work.k)


def target_layers(facts: SglangFacts, target_dir: Path | None) -> int | None:
    folder = target_dir or facts.local(facts.model_path)
    if folder is None:
        return None
    try:
        layers = target_config(folder).get("num_hidden_layers")
    except EaglezooError:
        return None
    return layers if isinstance(layers, int) else None


def eagle_not_eagle3(case: Case, notes: list[str]) -> Finding | None:
    """SGLang captures aux hidden states only for EAGLE3 (srt/model_executor/model_runner_components/
    spec_aux_hidden_state.py:184-196; the draft's input width, srt/speculative/eagle_utils.py:265-266): an EAGLE-3
    drafter under EAGLE gets none of the target layers it was trained on, and its acceptance length falls to 1."""
    if case.facts.algorithm not in ("EAGLE", "NEXTN") or case.drafter is None:
        return None
    return Finding(
        cause="sglang-eagle-not-eagle3",
        verdict="engine-config",
        what=f"SGLang runs this EAGLE-3 drafter as {case.facts.algorithm}: it captures none of the target's aux "
        "hidden states the drafter reads, so nearly every draft is rejected (acceptance length about 1.0)",
        evidence=[
            f"speculative_algorithm: {case.facts.algorithm}",
            f"drafter: {case.drafter.spec.family} ({case.drafter.path})",
            *accepted(case.facts),
        ],
        fix="--speculative-algorithm EAGLE3",
        confirmed=True,
    )


def draft_quantization(case: Case, notes: list[str]) -> Finding | None:
    """Without --speculative-draft-model-quantization SGLang gives the drafter the target's --quantization
    (srt/arg_groups/serving_hook.py:675-689; the draft's ModelConfig reads it, srt/configs/model_config.py:944-948),
    recording that the user did not choose it (fields/spec.py:223-229)."""
    f = case.facts
    explicit = (
        f.draft_quantization_explicit
        if f.draft_quantization_explicit is not None
        else "--speculative-draft-model-quantization" in (f.launch_command or "")
    )
    drafter_quantized = case.drafter is not None and "quantization_config" in case.drafter.config
    if f.quantization is None or f.draft_quantization != f.quantization or explicit or drafter_quantized:
        return None
    return Finding(
        cause="sglang-draft-quantization",
        verdict="engine-config",
        what=f"SGLang loads the drafter with the target's quantization ({f.quantization}): the draft model "
        "inherits --quantization when --speculative-draft-model-quantization is not given",
        evidence=[
            f"quantization: {f.quantization}",
            f"speculative_draft_model_quantization: {f.draft_quantization} (not set by the user)",
            "the drafter's config has no quantization_config" if case.drafter else "the drafter was not read",
        ],
        fix="--speculative-draft-model-quantization unquant (the drafter as trained)",
        confirmed=case.drafter is not None,
    )


def accept_threshold(case: Case, notes: list[str]) -> Finding | None:
    """speculative_accept_threshold_single / _acc (fields/spec.py:109-116, default 1.0) accept a draft token the
    target gives less than full probability: the output is no longer the target's, and the acceptance length counts
    tokens exact verification would have rejected."""
    f = case.facts
    low = [(name, x) for name, x in f.thresholds() if x < 1.0]
    if not low:
        return None
    flags = " and ".join("--" + name.replace("_", "-") for name, _ in low)
    return Finding(
        cause="sglang-accept-threshold",
        verdict="engine-config",
        what="SGLang accepts drafts below the target's own choice (accept thresholds under 1.0): lossy output, and an "
        "acceptance length inflated beyond what the drafter earns",
        evidence=[f"{name}: {x:g} (exact verification: 1.0)" for name, x in low],
        fix=f"drop {flags} (1.0, the default)",
        confirmed=True,
    )


def rejection_sampling(case: Case, notes: list[str]) -> Finding | None:
    """At temperature > 0 without speculative_use_rejection_sampling (fields/spec.py:117, default False), EAGLE
    verify takes the target-only sampler on CUDA, the draft's own probabilities unused, and the target's argmax on
    CPU, XPU and ROCm, ignoring the temperature (srt/speculative/eagle_utils.py:485-500, 640-648). Rejection
    sampling needs topk 1 and thresholds of 1.0 (srt/arg_groups/speculative_hook.py:1210-1253)."""
    f = case.facts
    if f.rejection_sampling or f.algorithm not in EAGLE_FAMILY or f.topk != 1:
        return None
    return Finding(
        cause="sglang-no-rejection-sampling",
        verdict="engine-config",
        what="requests at temperature > 0 are verified without rejection sampling: SGLang's target-only sampler on "
        "CUDA, the target's argmax (the temperature ignored) on ROCm and CPU; greedy requests are not affected",
        evidence=["speculative_use_rejection_sampling: false", "speculative_eagle_topk: 1"],
        fix="--speculative-use-rejection-sampling (for sampled traffic; needs topk 1 and both accept thresholds 1.0)",
        confirmed=False,
    )


def dp_attention(case: Case, notes: list[str]) -> Finding | None:
    """Attention data parallel (`attn_dp_size`, fields/parallel.py:81; `enable_dp_attention` as /server_info reports
    it, server_args.py:332): sglang #16274 saw the aux states gathered on the wrong group, AL 2.35 falling to 1.48."""
    if case.facts.attn_dp_size <= 1:
        return None
    return Finding(
        cause="sglang-dp-attention",
        verdict="engine-config",
        what=f"attention runs data parallel ({case.facts.attn_dp_size} wide): SGLang has gathered the drafter's aux "
        "states on the wrong group under attention DP (sglang #16274: AL 2.35 fell to 1.48)",
        evidence=[f"attn_dp_size: {case.facts.attn_dp_size}", *accepted(case.facts)],
        fix="compare with the same server without attention DP (drop --attn-dp-size / --enable-dp-attention); "
        "if acceptance recovers, serve without it",
        confirmed=False,
    )


def draft_tokens(case: Case, notes: list[str]) -> Finding | None:
    """K is speculative_num_steps; speculative_num_draft_tokens counts the verified tokens, K + 1 with topk 1, and
    SGLang sets it so whatever was asked (srt/arg_groups/speculative_hook.py:1255-1266)."""
    f = case.facts
    if f.num_steps is None:
        return None
    asked = launch_value(f.launch_command, "--speculative-num-draft-tokens")
    overridden = f.topk == 1 and asked is not None and asked != f.num_draft_tokens
    if case.k in (None, f.num_steps) and not overridden:
        return None
    k = case.k if case.k is not None else asked
    evidence = [
        f"speculative_num_steps: {f.num_steps} (K), speculative_eagle_topk: {f.topk}, "
        f"speculative_num_draft_tokens: {f.num_draft_tokens}"
    ]
    if overridden:
        evidence.append(f"launched with --speculative-num-draft-tokens {asked}; SGLang set it to num_steps + 1")
    return Finding(
        cause="sglang-draft-tokens",
        verdict="engine-config",
        what=f"SGLang drafts K={f.num_steps} (speculative_num_steps)"
        + (f", not the K={case.k} asked" if case.k not in (None, f.num_steps) else "")
        + ": speculative_num_draft_tokens is K + 1 with topk 1 (the verified tokens, the bonus one included)",
        evidence=evidence,
        fix=f"--speculative-num-steps {k} --speculative-eagle-topk 1 --speculative-num-draft-tokens {(k or 0) + 1}",
        confirmed=case.k is not None,
    )


def aux_ids(case: Case, notes: list[str]) -> Finding | None:
    """SGLang reads the aux ids from the served config's eagle_config only, in the layer-output convention, adding 1
    on load (spec_aux_hidden_state.py:184-196; srt/models/llama.py:929-941); without them it captures its default
    [2, L // 2, L - 3] (llama.py:933-936; other targets may differ)."""
    f = case.facts
    served = f.local(f.drafter)
    if f.algorithm != "EAGLE3" or case.drafter is None:
        return None
    if served is None:
        notes.append(f"the server's drafter {f.drafter} is not a folder here: the aux ids SGLang reads were not read")
        return None
    trained = case.drafter.spec.aux
    captured = sglang_captures(served, case.target_layers)
    if trained is None or captured is None:
        notes.append("the aux ids SGLang captures could not be compared: the drafter's or the target's layers unknown")
        return None
    if captured == trained.boundary():
        return None
    return Finding(
        cause="sglang-aux-ids",
        verdict="engine-config",
        what=f"SGLang captures the target's layers {captured} (boundary), not the {trained.boundary()} the drafter "
        f"was trained on: it reads the ids from {NESTED_IDS} only",
        evidence=[
            f"served config ({served / 'config.json'}): "
            + (f"{NESTED_IDS} = {nested_ids(served)}" if nested_ids(served) else f"no {NESTED_IDS}: SGLang's default"),
            f"trained (boundary): {trained.boundary()}",
        ],
        fix=f"eaglezoo serve-config {case.drafter_name} --engine sglang (converts it, writing the ids where SGLang "
        "reads them, then serves the converted folder)",
        confirmed=True,
    )


def known_issue(case: Case, notes: list[str]) -> Finding | None:
    """The engine releases known to read a drafter wrongly or to count differently (eaglezoo/engine_versions.py)."""
    f = case.facts
    if f.version is None:
        notes.append("the server does not say its version: the known engine issues were not checked")
        return None
    rows = issues_for("sglang", f.version)
    if rows is None:
        notes.append(
            f"the server's version {f.version[:40]!r} does not parse as a release (N.N.N): the known engine issues "
            "(eaglezoo/engine_versions.py) were not checked"
        )
        return None
    spec = case.drafter.spec if case.drafter else None
    flagged = bool(spec and (spec.fc_norm or spec.norm_output))
    rows = [
        r
        for r in rows
        if touches(r, fc_norm=flagged, mla=bool(spec and spec.arch == "mla"), speculators=False, sampled=False)
    ]
    if not rows:
        return None
    return known_issue_finding("SGLang", f.version, rows)


def known_issue_finding(engine: str, version: str, rows: list) -> Finding:
    fixed = [r.before for r in rows if r.before]
    return Finding(
        cause="engine-known-issue",
        verdict="engine-config",
        what=f"{engine} {version} is a release known to serve this drafter wrongly: {rows[0].what}",
        evidence=[f"{r.key} ({r.releases()}): {r.what}; {r.source}" for r in rows],
        fix=f"upgrade {engine} to {max(fixed)} or later" if fixed else f"see {rows[0].source}",
        confirmed=True,
    )


RULES = (eagle_not_eagle3, aux_ids, draft_quantization, accept_threshold, known_issue, draft_tokens)
RULES += (rejection_sampling, dp_attention)


def accepted(f: SglangFacts) -> list[str]:
    if not f.accept_lengths:
        return []
    shown = ", ".join(f"{x:.3f}" for x in f.accept_lengths)
    return [f"the server's acceptance length since it started: {shown} (avg_spec_accept_length, per DP rank)"]


def measured_notes(f: SglangFacts, server: Acceptance | None) -> list[str]:
    said = (
        [
            f"the server accepts {server.mean_acceptance_length:.3f} on these {server.prompts} prompts "
            "(sglext.spec_tokens_details, greedy)"
        ]
        if server
        else []
    )
    return said + accepted(f) or [
        "the server has not drafted yet (no avg_spec_accept_length): send it traffic, then run doctor again for its "
        "measured acceptance"
    ]


def healthy_summary(f: SglangFacts, findings: list[Finding]) -> str:
    al = f" (acceptance length since it started: {', '.join(f'{x:.3f}' for x in f.accept_lengths)})"
    to_check = f"; {len(findings)} setting(s) to check for some traffic: " + ", ".join(x.cause for x in findings)
    return (
        f"no fault seen in the SGLang server's speculative settings{al if f.accept_lengths else ''}"
        f"{to_check if findings else ''}"
    )


def launch_value(command: str | None, flag: str) -> int | None:
    """A whole-number flag's value in the launch command (`--flag N` or `--flag=N`), else None."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        return None
    for i, word in enumerate(words):
        value = word.removeprefix(flag + "=") if word.startswith(flag + "=") else None
        if word == flag and i + 1 < len(words):
            value = words[i + 1]
        if value is not None:
            return int(value) if value.isdigit() else None
    return None


def nested_ids(folder: Path) -> list[int] | None:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ids = (
        (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") if isinstance(config, dict) else None
    )
    return list(ids) if isinstance(ids, list) and all(isinstance(i, int) for i in ids) else None


def sglang_captures(folder: Path, layers: int | None) -> list[int] | None:
    """The target layers SGLang captures for the served folder, as boundary ids."""
    ids = nested_ids(folder)
    if ids is not None:
        return [i + 1 for i in ids]
    return default_boundary_ids(layers) if layers else None
