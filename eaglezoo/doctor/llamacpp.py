"""doctor on a llama-server (llama.cpp b11434): the drafter GGUF it serves, read as llama.cpp reads it
(checkpoint/formats/gguf_read.py), against the drafter named; the served acceptance measured through the llama.cpp
endpoint path (verify/llamacpp_endpoint.py); each difference a suspect whose fix the native reference tries, as on
vLLM (doctor/trials.py).

llama-server does not say which drafter it loaded: its `/props` carries the target's `model_path` only
(tools/server/server-context.cpp:4968-4990, get_res_props), so the user names the served GGUF (`--served-gguf`). Its
tensors are not compared with the drafter named: what a conversion loses is a fact llama.cpp reads, not the weights.

What llama.cpp does with the GGUF's facts: the taps `{arch}.target_layers` are boundary ids (common/speculative.cpp:
600-604); `norm_before_residual` and `norm_before_fc` read false when absent (src/models/eagle3.cpp:26, 33). A GGUF
without `d2t` is no running server's fault: llama.cpp then sizes the drafter's output by the target's vocabulary
(src/models/eagle3.cpp:44-55), so a drafter with a smaller draft vocabulary fails to load ("tensor 'output.weight' has
wrong shape", measured on b11434) and the server never starts; `eaglezoo lint DRAFT.gguf` names it (gguf-d2t-missing).
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..checkpoint.formats import gguf_read
from ..errors import UsageError
from ..verify.llamacpp_endpoint import measure_llamacpp
from ..verify.report.build import built
from ..verify.run import WorkloadPlan, prepare
from ..verify.workload import Progress, Workload
from .report import DoctorReport, Finding, Server
from .suspects import Suspect
from .trials import Prompts, Reference, Variant, acceptance, run_trials
from .verdict import Evidence, judge

FLAGS = ("norm_before_residual", "norm_before_fc")  # the flags llama.cpp b11434's eagle3 graph reads


@dataclass(frozen=True)
class LlamaNamed:
    """What doctor on a llama-server needs beside the server: the served GGUF, the drafter and target named."""

    served_gguf: Path | None
    drafter_dir: Path
    target_dir: Path
    opts: Any
    drafter_name: str | None
    target_name: str | None
    prompts_file: Path | None
    max_prompts: int | None
    max_new_tokens: int
    k: int


def diagnose_llamacpp(
    base: str, props: dict[str, Any], named: LlamaNamed, ref: Reference, progress: Progress
) -> DoctorReport:
    t0 = time.perf_counter()
    facts = served_facts(base, named.served_gguf)
    if facts.arch == "dflash":
        return diagnose_block(base, props, facts, named, progress)
    work = prepare(
        WorkloadPlan(
            named.drafter_dir,
            named.target_dir,
            named.target_name or str(named.target_dir),
            opts=named.opts,
            prompts_file=named.prompts_file,
            max_prompts=named.max_prompts,
            k=named.k,
            max_new_tokens=named.max_new_tokens,
        )
    )
    if work.spec.family != "eagle3":
        raise UsageError(
            f"doctor diagnoses EAGLE-3 drafters on llama.cpp; this is a {work.spec.family} drafter",
            hint="measure it with eaglezoo verify DRAFTER --endpoint URL, and lint its GGUF (eaglezoo lint DRAFT.gguf)",
        )
    measured = measure_llamacpp(work, base, props, progress, started=True)
    server_s = time.perf_counter() - t0
    steps = [a for a in measured.accepted if a is not None]
    server = acceptance("server", steps, work.k)
    found = suspects(facts, work, named)
    t1 = time.perf_counter()
    variants = [as_served(facts, work), *[s.fixed for s in found if s.fixed is not None], reference(work)]
    paths = run_trials(named.target_dir, variants, Prompts(work.encoded, work.k, work.max_new_tokens), ref, progress)
    trials = {source: acceptance(source, p, work.k) for source, p in paths.items()}
    verdict, summary, findings, judged = judge(
        Evidence(
            server=server,
            requests=[],
            trials=trials,
            suspects=found,
            floors=None,
            entry_prompts=False,
            k_zero=[],
            k_table=None,
            k=work.k,
        )
    )
    return built(
        DoctorReport,
        verdict=verdict,
        summary=summary,
        server=Server(
            url=base,
            engine="llamacpp",
            version=str(props.get("build_info"))[:40] or None,
            target=str(props.get("model_path"))[:200],
            drafter=str(facts.path),
            method="eagle3",
            k=work.k,
            k_table=None,
            draft_sample_method=None,
            max_model_len=None,
            per_request_metrics=True,
            config_readable=False,
        ),
        drafter=named.drafter_name or str(named.drafter_dir),
        target=named.target_name or str(named.target_dir),
        prompts=len(work.encoded),
        max_new_tokens=work.max_new_tokens,
        measured=[server, *trials.values()],
        findings=[llamacpp_fix(f) for f in findings],
        floors=None,
        notes=[
            *work.notes,
            f"the served drafter read from {facts.path} (--served-gguf): llama-server's /props names the target's "
            "file only (tools/server/server-context.cpp:4968-4990); its tensors were not compared with the drafter "
            "named, only the facts llama.cpp reads",
            *judged,
        ],
        timing={"server_s": server_s, "reference_s": time.perf_counter() - t1, "total_s": time.perf_counter() - t0},
    )


def llamacpp_fix(f: Finding) -> Finding:
    """verdict.too_deep's fix in llama-server's words: K is its --spec-draft-n-max."""
    if f.cause != "k-too-deep" or f.what.rpartition("support K=")[2] == "":
        return f
    k = f.what.rpartition("support K=")[2]
    return f.model_copy(
        update={
            "fix": f"restart llama-server with --spec-draft-n-max {k}, or measure the best K at your load with "
            "eaglezoo tune"
        }
    )


def served_facts(base: str, path: Path | None) -> gguf_read.GgufFacts:
    if path is None:
        raise UsageError(
            f"the llama-server at {base} does not say which drafter GGUF it loaded (its /props names the target's "
            "file only)",
            hint="give the file it was started with: --served-gguf DRAFT.gguf (the -md of its command)",
        )
    if not path.is_file():
        raise UsageError(
            f"--served-gguf {path}: no such file", hint="give the -md file the llama-server was started with"
        )
    return gguf_read.read(path)


def block_cap(facts: gguf_read.GgufFacts) -> tuple[int, int]:
    """(block size, the most llama-server drafts with it): block - 1 for DFlash, the block for DSpark sampling from
    its anchor (common/speculative.cpp:1039-1048, 1073-1075). DSpark is told by the GGUF's Markov head, as llama-server
    tells it (speculative.cpp:2378-2381): /props carries no server-wide type (its `speculative.types` is the
    per-request default, server-task.cpp:81, "none" on a server started with --spec-type draft-dspark)."""
    block = int(facts.key("{arch}.block_size") or 16)  # 16 when absent (common/speculative.cpp:1040)
    dspark = gguf_read.family(facts) == "dspark"
    return block, block if dspark and gguf_read.anchor_sampled(facts) else block - 1


def diagnose_block(
    base: str, props: dict[str, Any], facts: gguf_read.GgufFacts, named: LlamaNamed, progress: Progress
) -> DoctorReport:
    """A DFlash/DSpark GGUF: doctor checks the K asked against the block. llama-server clamps a larger
    --spec-draft-n-max to what one block drafts, with a warning in its log only (common/speculative.cpp:1076-1080);
    the acceptance is measured at the K it drafts. Other DFlash faults: eaglezoo verify and lint."""
    t0 = time.perf_counter()
    block, cap = block_cap(facts)
    k = min(named.k, cap)
    work = prepare(
        WorkloadPlan(
            named.drafter_dir, named.target_dir, named.target_name or str(named.target_dir), opts=named.opts,
            prompts_file=named.prompts_file, max_prompts=named.max_prompts, k=k, max_new_tokens=named.max_new_tokens,
        )
    )  # fmt: skip
    if work.spec.family not in ("dflash", "dspark"):
        raise UsageError(
            f"--served-gguf {facts.path} is a {facts.arch} drafter, the drafter named a {work.spec.family} one",
            hint="give the GGUF converted from the drafter named (eaglezoo convert DRAFTER OUT --to gguf)",
        )
    measured = measure_llamacpp(work, base, props, progress, started=True)
    server = acceptance("server", [a for a in measured.accepted if a is not None], k)
    findings = (
        [
            Finding(
                cause="llamacpp-k-above-block",
                verdict="engine-config",
                what=f"-k {named.k} is above what one block of {block} drafts: llama-server clamps "
                f"--spec-draft-n-max to {cap} (common/speculative.cpp:1073-1080) and drafts K={cap}",
                evidence=[f"server: acceptance length {server.mean_acceptance_length:.3f} at K={cap}"],
                fix=f"restart llama-server with --spec-draft-n-max {cap} (or convert and train a larger block)",
                confirmed=True,
            )
        ]
        if named.k > cap
        else []
    )
    return built(
        DoctorReport,
        verdict=findings[0].verdict if findings else "healthy",
        summary=findings[0].what if findings else f"the server drafts K={k} within its block of {block}",
        server=Server(
            url=base, engine="llamacpp", version=str(props.get("build_info"))[:40] or None,
            target=str(props.get("model_path"))[:200], drafter=str(facts.path), method=facts.arch, k=k,
            k_table=None, draft_sample_method=None, max_model_len=None, per_request_metrics=True,
            config_readable=False,
        ),
        drafter=named.drafter_name or str(named.drafter_dir),
        target=named.target_name or str(named.target_dir),
        prompts=len(work.encoded),
        max_new_tokens=work.max_new_tokens,
        measured=[server],
        findings=findings,
        floors=None,
        notes=[*work.notes, "a DFlash/DSpark GGUF: doctor checks its K against the block; verify and lint the rest"],
        timing={"server_s": time.perf_counter() - t0, "total_s": time.perf_counter() - t0},
    )  # fmt: skip


def served_flags(facts: gguf_read.GgufFacts) -> dict[str, bool]:
    return {flag: bool(facts.key("{arch}." + flag)) for flag in FLAGS}  # false when absent (eagle3.cpp:26, 33)


def served_taps(facts: gguf_read.GgufFacts) -> tuple[int, ...]:
    return tuple(int(i) for i in facts.key("{arch}.target_layers") or ())


def reference(work: Workload) -> Variant:
    return Variant("reference", work.drafter.spec, work.drafter.state(), tuple(work.drafter.spec.aux.boundary()))


def as_served(facts: gguf_read.GgufFacts, work: Workload) -> Variant:
    """The drafter named, run as llama.cpp runs the served GGUF: its taps and its flags."""
    ref = reference(work)
    state = dict(ref.state)  # a GGUF without d2t never serves a smaller draft vocabulary (module doc)
    spec = ref.spec.model_copy(update=served_flags(facts))
    return Variant("as served", spec, state, served_taps(facts) or ref.boundary)


def suspects(facts: gguf_read.GgufFacts, work: Workload, named: LlamaNamed) -> list[Suspect]:
    base, ref = as_served(facts, work), reference(work)
    convert = (
        f"eaglezoo convert {shlex.quote(named.drafter_name or str(named.drafter_dir))} OUT --to gguf "
        f"--target {shlex.quote(named.target_name or str(named.target_dir))}"
    )
    then = f"`{convert}`, then restart llama-server with -md OUT/drafter.gguf"
    out = []
    if base.boundary != ref.boundary:
        out.append(
            Suspect(
                "llamacpp-taps",
                "engine-config",
                f"the served GGUF's {facts.arch}.target_layers are {list(base.boundary)} (boundary ids, "
                f"common/speculative.cpp:600-604); the drafter was trained on boundary {list(ref.boundary)}"
                + default_said(list(base.boundary), work),
                then,
                replace(base, source="fix: llamacpp-taps", boundary=ref.boundary),
            )
        )
    ours, theirs = {f: bool(getattr(ref.spec, f)) for f in FLAGS}, served_flags(facts)
    differ = {f: v for f, v in ours.items() if theirs[f] != v}
    if differ:
        said = ", ".join(f"{f}={str(theirs[f]).lower()}" for f in differ)
        wanted = ", ".join(f"{f}={str(v).lower()}" for f, v in differ.items())
        out.append(
            Suspect(
                "llamacpp-norm-flags",
                "engine-config",
                f"llama.cpp runs the served GGUF with {said} (absent keys read false, src/models/eagle3.cpp:26, "
                f"33); the drafter was trained with {wanted}: lost at conversion",
                then,
                replace(base, source="fix: llamacpp-norm-flags", spec=base.spec.model_copy(update=differ)),
            )
        )
    return out


def default_said(taps: list[int], work: Workload) -> str:
    n = work.target_layers
    if taps == [2, n // 2, n - 3]:
        return (
            f": [2, L//2, L-3] for this {n}-layer target, what llama.cpp's own converter bakes when the drafter's "
            "config has no top-level eagle_aux_hidden_state_layer_ids (conversion/llama.py:77-81)"
        )
    return ""
