"""`eaglezoo watch` against real local HTTP servers answering scripted `/metrics` texts (vLLM's and llama.cpp's
counter names): healthy, below the floors, idle, drifting below its own baseline, restarted mid-watch (counters
going back are a reset, never a negative rate), down, SGLang (its /server_info and /metrics built from SGLang
0.5.23's own source), and the inputs refused in one line. The real vLLM
server's case (healthy, collapsed) is tests/engine/test_watch_servers.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import CLI_ENV, EXAMPLE, ROOT, assert_clean_failure, run_inprocess
from support.hostile_vllm import hostile, metrics_text
from support.net import serve_in_background
from support.sglang_source import SglangServer, server_info
from support.sglang_source import metrics_text as sglang_metrics

FAST = ["--interval", "0.1"]
ENTRY = "tiny-example-eagle31"  # floors at K=3, T=0: per position 0.5, 0.3, 0.2


def lines(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def intervals(out: str) -> list[dict]:
    return [x for x in lines(out) if "status" in x]


@pytest.fixture
def server():
    started = []

    def start(*texts: bytes, **lies):
        s = hostile(metrics=list(texts), **lies)
        started.append(s)
        return s.url

    yield start
    for s in started:
        s.stop()


def healthy(drafts: int) -> bytes:
    """`drafts` drafts at K=3 accepting 0.75, 0.5, 0.25 per position (AL 2.5), counted from zero."""
    return metrics_text(drafts, 3 * drafts, drafts * 3 // 2, [drafts * 3 // 4, drafts // 2, drafts // 4])


def collapsed(start: int, drafts: int) -> bytes:
    """`start` healthy drafts, then `drafts` more that accept nothing."""
    return metrics_text(start + drafts, 3 * (start + drafts), start * 3 // 2, [start * 3 // 4, start // 2, start // 4])


def test_once_on_a_healthy_server_is_healthy(server):
    r = run_inprocess("watch", server(healthy(0), healthy(40)), ENTRY, "--once", *FAST, "--json")
    assert r.code == 0, (r.out, r.err)
    (one,) = intervals(r.out)
    assert one["status"] == "healthy" and one["drafts"] == 40
    assert one["mean_acceptance_length"] == pytest.approx(2.5)
    assert one["acceptance_per_position"] == pytest.approx([0.75, 0.5, 0.25])
    header = lines(r.out)[0]
    assert header["engine"] == "vllm" and header["k"] == 3 and header["floors"]["per_position"] == [0.5, 0.3, 0.2]
    assert lines(r.out)[-1]["summary"]["failing"] is False


def test_once_below_the_floors_exits_1_naming_the_position(server):
    r = run_inprocess("watch", server(healthy(40), collapsed(40, 80)), ENTRY, "--once", *FAST)
    assert r.code == 1, (r.out, r.err)
    assert "low" in r.out and "position 0 0.00 < floor 0.50" in r.out and "FAILING" in r.out


def test_an_interval_without_drafts_is_idle_not_a_rate(server):
    r = run_inprocess("watch", server(healthy(40), healthy(40)), ENTRY, "--once", *FAST, "--json")
    assert r.code == 0, (r.out, r.err)
    (one,) = intervals(r.out)
    assert one["status"] == "idle" and one["mean_acceptance_length"] is None
    assert one["acceptance_per_position"] is None


def test_once_judges_against_the_servers_life_so_far(server):
    """No floors (no DRAFTER): the baseline is what the server counted before the first scrape (AL 2.5); an
    interval of AL 1.6 over 400 drafts drifted below it."""
    drop = metrics_text(400 + 400, 3 * 800, 600 + 240, [300 + 160, 200 + 60, 100 + 20])
    r = run_inprocess("watch", server(healthy(400), drop), "--once", *FAST, "--json")
    assert r.code == 1, (r.out, r.err)
    (one,) = intervals(r.out)
    assert one["status"] == "drift" and one["baseline_mean_acceptance_length"] == pytest.approx(2.5)
    assert "fell from the baseline's 2.50" in one["reasons"][0]


def test_a_drift_below_the_baseline_fails_after_n_intervals(server):
    """The first 2 intervals that draft are the baseline (AL 2.5); the floors still hold at AL 1.6, the baseline
    does not: 2 drifting intervals in a row end the watch with exit 1."""
    texts = [healthy(n) for n in (0, 400, 800)]
    texts += [
        metrics_text(800 + 400 * i, 3 * (800 + 400 * i), 1200 + 240 * i, [600 + 160 * i, 400 + 60 * i, 200 + 20 * i])
        for i in (1, 2, 3)
    ]
    r = run_inprocess("watch", server(*texts), "--baseline", "2", "--fail-after", "2", *FAST, "--json")
    assert r.code == 1, (r.out, r.err)
    got = intervals(r.out)
    assert [x["status"] for x in got] == ["healthy", "healthy", "drift", "drift"]
    assert [x["baseline_building"] for x in got] == ["1 of 2", "2 of 2", None, None]
    assert lines(r.out)[-1]["summary"]["failing"] is True


def test_a_restart_during_watch_is_a_reset_not_a_negative_rate(server):
    """The counters go back to a few drafts (the server restarted): the interval says so, the baseline starts again,
    and the next intervals are judged as before; a drafter collapsed on restart then fails against the floors."""
    texts = [healthy(400), healthy(800), healthy(20), collapsed(20, 100), collapsed(20, 200)]
    r = run_inprocess("watch", server(*texts), ENTRY, "--fail-after", "2", *FAST, "--json")
    assert r.code == 1, (r.out, r.err)
    got = intervals(r.out)
    assert [x["status"] for x in got] == ["healthy", "reset", "low", "low"]
    assert "server restarted" in got[1]["reasons"][0] and got[1]["mean_acceptance_length"] is None
    assert got[2]["baseline_mean_acceptance_length"] == pytest.approx(1.0)  # the new baseline: after the restart
    assert all(r >= 0 for x in got if x["acceptance_per_position"] for r in x["acceptance_per_position"])


class GoesDown(BaseHTTPRequestHandler):
    """vLLM's /v1/models and one /metrics answer, then the server stops listening (as a crashed server does)."""

    stop: threading.Event

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b'{"data": [{"id": "m"}]}' if self.path == "/v1/models" else metrics_text(0, 0, 0, [0, 0, 0])
        self.send_response(200 if self.path in ("/v1/models", "/metrics") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.path == "/metrics":
            self.stop.set()


def test_a_restart_with_another_k_is_a_reset_even_when_the_counts_grew(server):
    """Restarted at K=3 from K=2 and busy since: every count is above the last reading, but the positions changed,
    so the interval is a reset, not a K=2 baseline pooled with K=3 counts; then the drafter collapses (exit 1)."""
    texts = [metrics_text(400, 800, 400, [240, 160]), metrics_text(800, 1600, 800, [480, 320])]
    texts += [metrics_text(900, 2700, 1350, [675, 450, 225]), collapsed(900, 100)]
    r = run_inprocess("watch", server(*texts), ENTRY, "--fail-after", "1", *FAST, "--json")
    assert r.code == 1, (r.out, r.err)
    got = intervals(r.out)
    assert [x["status"] for x in got] == ["healthy", "reset", "low"]
    assert "K 2 then 3" in got[1]["reasons"][0]


def test_a_server_that_goes_down_is_unreachable_and_fails():
    stop = threading.Event()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (GoesDown,), {"stop": stop}))
    serve_in_background(httpd)

    def down():
        stop.wait(60)
        httpd.shutdown()
        httpd.server_close()

    threading.Thread(target=down, daemon=True).start()
    r = run_inprocess(
        "watch", f"http://127.0.0.1:{httpd.server_port}", "--interval", "0.3", "--fail-after", "2", "--json"
    )
    assert r.code == 1, (r.out, r.err)
    got = intervals(r.out)
    assert [x["status"] for x in got] == ["unreachable", "unreachable"]
    assert "cannot be reached" in got[0]["reasons"][0]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_it_with_a_summary(server, sig, code):
    """A watch on a healthy server runs until stopped: SIGTERM or SIGINT prints the summary and exits 143 or 130,
    no traceback."""
    url = server(*[healthy(40 * i) for i in range(200)])
    env = {**CLI_ENV, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "eaglezoo", "watch", url, ENTRY, "--interval", "0.2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    seen = [proc.stdout.readline() for _ in range(3)]  # the header and two intervals
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == code, (seen, rest, err)
    assert all(json.loads(x)["status"] == "healthy" for x in seen[1:])
    summary = lines(rest)[-1]  # JSON lines to the end: the summary is the last
    assert summary["stopped"] is True and summary["summary"]["by_status"]["healthy"] >= 2
    assert err == ""


class LlamaMetrics(BaseHTTPRequestHandler):
    """llama-server b11434 with --metrics: /props, /v1/models, and `llamacpp:spec_decode_*` counters
    (tools/server/server-task.cpp:1564-1625) that grow by 40 healthy drafts per scrape."""

    scrapes = 0

    def log_message(self, *args):
        pass

    def send(self, body: bytes, kind: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/props":
            self.send(json.dumps({"build_info": "b11434", "model_path": "t.gguf", "endpoint_metrics": True}).encode())
        elif path == "/v1/models":
            self.send(json.dumps({"data": [{"id": "t.gguf", "owned_by": "llamacpp"}]}).encode())
        elif path == "/metrics":
            n = 40 * type(self).scrapes
            type(self).scrapes += 1
            counts = [("num_drafts", n), ("num_draft_tokens", 3 * n), ("num_accepted_tokens", n * 3 // 2)]
            text = "".join(f"llamacpp:spec_decode_{k}_total {v}\n" for k, v in counts)
            text += "".join(
                f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}\n'
                for i, v in enumerate([n * 3 // 4, n // 2, n // 4])
            )
            self.send(text.encode(), "text/plain")
        else:
            self.send_error(404)


def test_a_llama_server_is_watched_from_its_own_counters():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (LlamaMetrics,), {"scrapes": 0}))
    serve_in_background(httpd)
    try:
        r = run_inprocess("watch", f"http://127.0.0.1:{httpd.server_port}", ENTRY, "--once", *FAST, "--json")
    finally:
        httpd.shutdown()
    assert r.code == 0, (r.out, r.err)
    assert lines(r.out)[0]["engine"] == "llamacpp"
    (one,) = intervals(r.out)
    assert one["status"] == "healthy" and one["mean_acceptance_length"] == pytest.approx(2.5)


def test_a_llama_server_without_metrics_is_one_line(monkeypatch):
    class NoMetrics(LlamaMetrics):
        def do_GET(self):
            if self.path == "/props":
                return self.send(b'{"build_info": "b11434", "model_path": "t.gguf", "endpoint_metrics": false}')
            super().do_GET()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), NoMetrics)
    serve_in_background(httpd)
    try:
        r = run_inprocess("watch", f"http://127.0.0.1:{httpd.server_port}", "--once", *FAST)
    finally:
        httpd.shutdown()
    assert_clean_failure(r, contains="runs without --metrics")


SGLANG_K3 = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "model_path": "t",
    "enable_metrics": True,
}


def sglang(*scrapes: tuple[int, int, int], **settings) -> SglangServer:
    """An SGLang server (its /server_info and /metrics built from SGLang 0.5.23's source) whose counters read
    (tokens, requests, verify steps) in turn."""
    info = server_info(**(SGLANG_K3 | settings))
    server = SglangServer(info, "t")
    server.metrics.extend(sglang_metrics(*s) for s in scrapes)
    return server


def test_an_sglang_server_is_watched_from_its_own_counters():
    # 4 requests, 40 verify steps, 4 first tokens + 40 bonus + 60 accepted drafts: AL 1 + 60/40 = 2.5
    s = sglang((0, 0, 0), (104, 4, 40))
    try:
        r = run_inprocess("watch", s.url, ENTRY, "--once", *FAST, "--json")
    finally:
        s.stop()
    assert r.code == 0, (r.out, r.err)
    header, (one,) = lines(r.out)[0], intervals(r.out)
    assert header["engine"] == "sglang" and header["k"] == 3
    assert header["floors"] == {"per_position": None, "mean_acceptance_length": pytest.approx(2.0)}
    assert one["status"] == "healthy" and one["drafts"] == 40
    assert one["mean_acceptance_length"] == pytest.approx(2.5) and one["acceptance_per_position"] is None


def test_an_sglang_server_below_the_floors_its_positions_imply_fails():
    # 40 verify steps accepting 20 drafts: AL 1.5 < 1 + 0.5 + 0.3 + 0.2, so some position is below its floor
    s = sglang((104, 4, 40), (168, 8, 80))
    try:
        r = run_inprocess("watch", s.url, ENTRY, "--once", *FAST)
    finally:
        s.stop()
    assert r.code == 1, (r.out, r.err)
    assert "AL 1.50 < floor 2.00 (1 + the per-position floors" in r.out and "FAILING" in r.out


def test_an_sglang_tree_has_no_chain_floor():
    s = sglang((0, 0, 0), (44, 4, 40), speculative_eagle_topk=4, speculative_num_draft_tokens=8)
    try:
        r = run_inprocess("watch", s.url, ENTRY, "--once", *FAST, "--json")
    finally:
        s.stop()
    assert r.code == 0, (r.out, r.err)
    header, (one,) = lines(r.out)[0], intervals(r.out)
    assert header["k"] is None and header["floors"]["mean_acceptance_length"] is None
    assert one["status"] == "healthy" and one["mean_acceptance_length"] == pytest.approx(1.0)


def test_an_sglang_server_without_metrics_is_one_line():
    s = sglang()
    try:
        r = run_inprocess("watch", s.url, "--once", *FAST)
    finally:
        s.stop()
    assert_clean_failure(r, contains="runs without --enable-metrics")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["ftp://x"], "give an http:// or https:// URL"),
        (["http://127.0.0.1:9", str(EXAMPLE / "target")], "not a registry id"),
        (["http://127.0.0.1:9", "no-such-entry"], "no-such-entry"),
        (["http://127.0.0.1:9", "--interval", "0"], "--interval"),
        (["http://127.0.0.1:9"], "cannot be reached"),
    ],
)
def test_bad_input_is_one_line(args, says):
    r = run_inprocess("watch", *args, "--once")
    assert_clean_failure(r, contains=says)


def test_a_server_without_a_drafter_is_one_line(server):
    r = run_inprocess("watch", server(b"# nothing here\n"), "--once", *FAST)
    assert_clean_failure(r, contains="serves without a drafter")
