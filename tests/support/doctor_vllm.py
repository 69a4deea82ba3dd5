"""`eaglezoo doctor` of the example's entry against a real vLLM server, and what its report is read for: shared by
the engine tier's modules that diagnose a server (tests/engine/test_doctor.py, test_watch_servers.py)."""

from __future__ import annotations

import json

import pytest
from conftest import run_inprocess

from support.engine import CPU_ENV

QUICK = ["--max-prompts", "12", "--max-new-tokens", "32"]


def doctor(*args):
    result = run_inprocess("doctor", "tiny-example-eagle31", *args, *QUICK, "--json", env=CPU_ENV)
    assert result.err.strip() == "" or "Traceback" not in result.err, result.err
    return result, json.loads(result.out)


def trial(report: dict, source: str) -> float:
    return next(a["mean_acceptance_length"] for a in report["measured"] if a["source"] == source)


def assert_named(result, report, verdict: str, cause: str) -> dict:
    assert result.code == 1, (result.code, result.out, result.err)
    assert report["verdict"] == verdict
    finding = report["findings"][0]
    assert finding["cause"] == cause, report["findings"]
    assert finding["confirmed"], finding
    # The server's figure is reproduced by the native reference running the drafter as served: the cause
    # explains it, count for count in fp32.
    assert trial(report, "server") == pytest.approx(trial(report, "as served"), abs=0.02)
    return finding
