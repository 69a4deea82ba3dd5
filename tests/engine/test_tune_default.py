"""issue 44's promise on tune's own defaults: the default run of its command (every sampling setting left as it
ships: `--repeats`, `--max-repeats`, `--min-tokens`, `--min-seconds`, `--budget`), run twice on the same machine,
gives the same K at every load, or both runs say too close to call; where the engines fit in memory together, each
run makes one engine start per K and one for the confirmation, as one pass per cell does. (tune's other promises,
on a grid sampled small to keep CI short: tests/engine/test_tune.py.)

"The same machine" is the same load on it: the two runs go side by side, as processes of their own, so that what else
the machine runs (the suite's other workers) weighs on both alike. One after the other, a run made while other tests
started engines and a run made on a quieter machine measured different things: at concurrency 4, K=1 at 1.39x
against a K=0 that later ran at 2583 tokens/s, and each decided apart."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import run_cli
from support.engine import CPU_ENV, ENGINE

pytestmark = pytest.mark.vllm

DEFAULT_RUN = [
    "tune",
    "tiny-example-eagle31",
    "--k-max",
    "2",
    "--concurrency",
    "1,4",
    "--max-prompts",
    "8",
    "--max-new-tokens",
    "32",
    *ENGINE,
    "--json",
]


def test_two_default_runs_decide_alike_or_both_call_it_too_close(vllm_ready):
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: run_cli(*DEFAULT_RUN, env=CPU_ENV, timeout=900), range(2)))
    for r in runs:
        assert r.code in (0, 1), r.err + r.out  # 1: a confirmation that lost, said in the report
    first, second = (r.json() for r in runs)
    for a, b in zip(first["decision"], second["decision"], strict=True):
        assert a["k"] == b["k"] or (a["too_close"] and b["too_close"]), (a, b)
    for report in (first, second):
        held = any("kept warm across the rounds" in n for n in report["notes"])  # else one at a time, said
        assert held == (report["cost"]["engine_starts"] == report["cost"]["one_pass_starts"] == 4), report["cost"]
