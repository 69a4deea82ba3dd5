"""`doctor --endpoint URL --requests FILE --probe LIST`: the options' checks and the rendering of the workload's A/B
probes (eaglezoo/doctor/probes.py, probe_run.py). Called by cli/doctor.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..doctor.probe_run import ProbeResult, run_probes
from ..doctor.probes import PROBES, Server
from ..doctor.requests import read_requests
from ..errors import EXIT_FINDINGS, EngineError, UsageError
from ..fsutil import atomic_write_text, file_destination
from ..limits import MAX_MODEL_LEN
from ..verify.endpoint import check_server, server_facts
from .common import emit, out, shown
from .outputs import _not_an_input
from .verify import verify_progress

MIN_TRAINED = 16


def parse_probes(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if names == ["all"]:
        return list(PROBES)
    unknown = [p for p in names if p not in PROBES]
    if not names or unknown:
        what = f"{', '.join(shown(u)[:40] for u in unknown)} is not a probe" if unknown else "names no probe"
        raise UsageError(f"--probe {shown(text)[:80]}: {what}", hint=f"give all, or some of {','.join(PROBES)}")
    return list(dict.fromkeys(names))


def probe_requests(
    endpoint: str | None,
    requests: Path | None,
    probe: str,
    sample: int,
    trained: int | None,
    outputs: tuple[Path | None, Path | None],
    as_json: bool,
) -> None:
    """outputs: --report and --html as given (the probes write a JSON report, no page)."""
    probes, endpoint, requests = checked(endpoint, requests, probe, trained, outputs)
    asked = read_requests(requests)  # every line checked before anything is sent
    base = check_server(endpoint)
    facts = server_facts(base)
    server = Server(base, facts.model, facts.max_model_len, facts.draft_sample_method, facts.version)
    with verify_progress() as advance:
        results, budget = run_probes(server, asked, probes, sample, trained, advance)
    refuse_unmeasured(base, results)
    data = probe_data(server, facts.k, budget, results)
    if outputs[0] is not None:
        atomic_write_text(outputs[0], json.dumps(data, indent=2) + "\n")
    emit(data, as_json, lambda: render(data))
    if data["verdict"] == "workload":
        raise typer.Exit(EXIT_FINDINGS)


def checked(
    endpoint: str | None, requests: Path | None, probe: str, trained: int | None, outputs: tuple[Path | None, ...]
) -> tuple[list[str], str, Path]:
    """The probes named, the server and the requests file; every option refused before anything is read or sent."""
    probes = parse_probes(probe)
    if trained is not None and not MIN_TRAINED <= trained <= MAX_MODEL_LEN:
        raise UsageError(f"--trained-length {trained}: not 16 to 2^24 tokens", hint="the drafter's training length")
    if endpoint is None or requests is None:
        raise UsageError(
            "--probe varies your own requests on a running server",
            hint="add --endpoint URL --requests FILE (your requests, OpenAI JSONL)",
        )
    report, html = outputs
    if html is not None:
        raise UsageError("--probe writes no HTML page", hint="drop --html; --report FILE writes the probes' JSON")
    if report is not None:
        file_destination(report, "--report")
        _not_an_input(report, "--report", (requests,))
    return probes, endpoint, requests


def refuse_unmeasured(base: str, results: list[ProbeResult]) -> None:
    answered = [a for r in results for a in r.arms if a.requests > len(a.rejected)]
    if answered and not any(a.measured for a in answered):
        raise EngineError(
            "the server returned no per-request acceptance for any probe request",
            hint="start vllm serve with --per-request-spec-decode-metrics detailed",
        )
    if all(r.skipped for r in results):
        reasons = "; ".join(f"{r.probe}: {r.skipped}" for r in results)
        raise EngineError(
            f"no probe could run on {base}: {shown(reasons)[:600]}",
            hint="probe what your requests and the server allow (the reason of each is above)",
        )


def probe_data(server: Server, k: int | None, budget: dict[str, Any], results: list[ProbeResult]) -> dict[str, Any]:
    findings = [r.finding for r in results if r.finding is not None]
    findings.sort(key=lambda f: (not f.confirmed, -(f.restores or 0)))
    confirmed = [f for f in findings if f.confirmed]
    return {
        "verdict": "workload" if confirmed else "healthy",
        "summary": (
            f"{len(confirmed)} probe(s) confirm a workload cause: " + ", ".join(f.cause for f in confirmed)
            if confirmed
            else "no probe separates from your requests as sent"
        ),
        "server": {
            "url": server.base,
            "version": server.version,
            "k": k,
            "draft_sample_method": server.draft_sample_method,
        },
        "budget": budget,
        "probes": [r.as_dict() for r in results],
        "findings": [f.model_dump(mode="json") for f in findings],
    }


def render(data: dict[str, Any]) -> None:
    b = data["budget"]
    out.print(f"{data['verdict'].upper()}: {data['summary']}", markup=False)
    out.print(
        f"budget: {b['sampled']} of your {b['of']} request(s) sampled; {b['requests']} probe requests sent, "
        f"at most {b['max_tokens_each']} tokens each ({b['tokens_at_most']} tokens at most)",
        markup=False,
    )
    for p in data["probes"]:
        if p["skipped"]:
            out.print(f"  {p['probe']}: skipped: {shown(p['skipped'])}", markup=False)
            continue
        arms = "; ".join(
            f"{a['arm']} {a['mean_acceptance_length']:.3f} [{a['interval'][0]:.3f}, {a['interval'][1]:.3f}]"
            if a["interval"]
            else f"{a['arm']} not measured ({a['rejected']} rejected)"
            for a in p["arms"]
        )
        out.print(f"  {p['probe']}: {'confirmed' if p['confirmed'] else 'not separated'}: {shown(arms)}", markup=False)
    for f in data["findings"]:
        if f["confirmed"]:
            out.print(f"\n{f['cause']} (workload, confirmed): {shown(f['what'])}", markup=False)
            out.print(f"  fix: {shown(f['fix'])}", markup=False)
