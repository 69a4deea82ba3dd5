"""`eaglezoo tune --engine llamacpp` on a real llama-server (b11434, `-t 1`): the example EAGLE-3 drafter and
target converted to GGUF by eaglezoo, every K (K = 0: the target alone) at every load on a server with as many
slots, measured with tune's own repeats and intervals until settled; the decision (or too close to call, whichever
the data says) written as the llama-server command per load, with its p-min; the report read back and rendered as
a page. Small: 4 prompts x 16 tokens, K up to 2, loads 1 and 2 (2 busy CPU cores)."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLE, run_cli, run_inprocess
from support.llama_servers import binary

from eaglezoo.tune.model import TuneReport

ARGS = [
    EXAMPLE / "eagle3-safeai",
    "--target",
    EXAMPLE / "target",
    "--aux-layers",
    "1,2,3",  # all three taps in llama.cpp's reach (docs/notes/llamacpp-fidelity.md)
    "--aux-convention",
    "boundary",
    "--engine",
    "llamacpp",
    "--k-max",
    "2",
    "--concurrency",
    "1,2",
    "--max-prompts",
    "4",
    "--max-new-tokens",
    "16",
    *("--repeats", "3", "--max-repeats", "4", "--min-tokens", "64", "--min-seconds", "0.1"),
]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    binary()  # skips, naming the setup command, where llama-server is not built
    home = tmp_path_factory.mktemp("tune-llamacpp")
    path, page = home / "tune.json", home / "tune.html"
    r = run_cli("tune", *ARGS, "--report", path, "--html", page, timeout=900)
    assert r.code in (0, 1), r.err + r.out
    return json.loads(path.read_text()), r.out, page


def test_tune_gives_a_llama_server_command_per_load(tuned):
    report, out, _ = tuned
    assert report["engine"]["name"] == "llamacpp"
    levels = report["llamacpp"]["levels"]
    assert [x["concurrency"] for x in levels] == [1, 2]
    for level, choice in zip(levels, report["decision"], strict=True):
        k = level["k"]
        command = level["command"]
        assert command.startswith("llama-server -m ") and f"-np {level['concurrency']}" in command
        if k:
            assert f"--spec-draft-n-max {k}" in command and f"--spec-draft-p-min {level['p_min']:g}" in command
            assert "--spec-type draft-eagle3" in command and "-md " in command
        else:
            assert "-md" not in command  # K = 0: the target served alone
        if report["recommended"] == "table":  # the confirmation stood: each load serves its own decision
            assert k == choice["k"]
        assert f"llama.cpp at concurrency {level['concurrency']}: {command}" in out.replace("\n", "")
    # every cell measured the way vLLM's are: repeats, their median's interval, and too close to call where they
    # overlap (the decision says which the data gave; a too-close load names its contenders)
    for cell in report["grid"]:
        assert len(cell["repeats"]) >= 3 and cell["interval"][0] <= cell["output_tokens_per_s"] <= cell["interval"][1]
        if cell["k"]:
            assert cell["acceptance_length"] is not None and cell["acceptance_length"] >= 1
    for choice in report["decision"]:
        assert choice["too_close"] == (len(choice["contenders"]) > 1)
        assert ("too close to call" in out) or not choice["too_close"]
    # p-min: 0.75 tried at every load (at the decided K, else the best drafting K), chosen only where it wins
    tried = {x["concurrency"]: x for x in report["llamacpp"]["p_min"]}
    assert set(tried) == {1, 2}
    for level in levels:
        x = tried[level["concurrency"]]
        assert x["k"] >= 1 and (x["k"] == level["k"] or level["k"] == 0)
        assert len(x["repeats"]) == 3 and x["acceptance_length"] is not None
        assert f"p-min 0.75 at concurrency {level['concurrency']}, K={x['k']}" in out
        wins = x["against_p_min_0"] == "wins" and x["k"] == level["k"]
        assert level["p_min"] == (0.75 if wins else 0.0)
    assert [s.split()[:2] for s in report["llamacpp"]["steps"]] == [["eaglezoo", "convert"]] * 2


def test_the_report_reads_back_and_renders_a_page(tuned, tmp_path):
    report, _, page = tuned
    TuneReport.model_validate(report)
    assert "llama-server" in page.read_text()
    path = tmp_path / "tune.json"
    path.write_text(json.dumps(report))
    shown = run_inprocess("report", path)
    assert shown.code == 0, shown.err
    assert "llama.cpp at concurrency 1:" in shown.out
