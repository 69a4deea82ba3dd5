"""`verify --engine llamacpp` and `--endpoint` on llama.cpp: what is refused in one line before or while measuring,
without a real llama-server (real ones: tests/engine/test_verify_llamacpp.py). The hostile servers are real local
HTTP servers that answer as llama-server b11434 does (/props, /v1/models, /slots, /metrics, a streamed /completion,
tools/server/server-context.cpp:4955-4999, server-task.cpp:1564-1625) and then break one thing."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import EXAMPLE, assert_clean_failure, run_inprocess
from support.net import serve_in_background

PAIR = [EXAMPLE / "eagle3-safeai", "--target", EXAMPLE / "target", *("--aux-layers", "1,2,3")]
PAIR += ["--aux-convention", "boundary", "-k", "3", "--max-prompts", "2", "--max-new-tokens", "8"]


class LlamaLike(BaseHTTPRequestHandler):
    """llama-server's answers, with `stop` (does the stream end with the final chunk) and `counts` (does /metrics
    move with what it streamed) set per test."""

    stop = True
    counts = True
    n_vocab = 1024
    served = {"drafts": 0, "draft_tokens": 0, "accepted": 0}

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
            meta = {"n_vocab": self.n_vocab, "n_embd": 128}
            self.send(json.dumps({"data": [{"id": "t.gguf", "owned_by": "llamacpp", "meta": meta}]}).encode())
        elif path == "/slots":
            self.send(b'[{"id": 0, "speculative": true, "is_processing": false}]')
        elif path == "/metrics":
            s = self.served
            text = "".join(
                f"llamacpp:spec_decode_{name}_total {value}\n"
                for name, value in (
                    ("num_drafts", s["drafts"]),
                    ("num_draft_tokens", s["draft_tokens"]),
                    ("num_accepted_tokens", s["accepted"]),
                )
            )
            self.send(text.encode(), "text/plain")
        else:
            self.send_error(404)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        # one token from the prompt, then two steps of a K=3 draft accepting 1 and 0 tokens
        chunks = [([5], None), ([6, 7], (3, 1)), ([8], (6, 1))]
        lines = [
            {"tokens": t, "stop": False, **({"timings": {"draft_n": d[0], "draft_n_accepted": d[1]}} if d else {})}
            for t, d in chunks
        ]
        if self.stop:
            lines.append({"tokens": [], "stop": True, "timings": {"draft_n": 6, "draft_n_accepted": 1}})
            if self.counts:
                for key, n in (("drafts", 2), ("draft_tokens", 6), ("accepted", 1)):
                    self.served[key] += n
        self.send("".join(f"data: {json.dumps(x)}\n\n" for x in lines).encode(), "text/event-stream")


@pytest.fixture
def llama_like():
    def start(**kind):
        handler = type("Handler", (LlamaLike,), {**kind, "served": dict(LlamaLike.served)})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        serve_in_background(httpd)
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_port}"

    servers: list = []
    yield start
    for httpd in servers:
        httpd.shutdown()


def test_a_llama_server_that_stops_mid_completion_is_one_line(llama_like):
    r = run_inprocess("verify", *PAIR, "--endpoint", llama_like(stop=False))
    assert_clean_failure(r, contains="ended before the completion finished")


def test_a_llama_server_whose_metrics_disagree_with_its_timings_is_refused(llama_like):
    r = run_inprocess("verify", *PAIR, "--endpoint", llama_like(counts=False))
    assert_clean_failure(r, contains="disagrees with itself: num_drafts 4 by the responses, 0 by /metrics")


def test_a_llama_server_of_another_vocabulary_is_refused(llama_like):
    r = run_inprocess("verify", *PAIR, "--endpoint", llama_like(n_vocab=32000))
    assert_clean_failure(r, contains="n_vocab 32000, and the target")


def test_a_llama_server_that_agrees_is_measured(llama_like):
    """The same server, counting what it streams: the steps read from the stream are the report's."""
    r = run_inprocess("verify", *PAIR, "--endpoint", llama_like(), "--json")
    assert r.code == 0, r.err
    report = r.json()
    assert report["engine"]["name"] == "llamacpp"
    assert [p["accepted"] for p in report["per_prompt"]] == [[1, 0], [1, 0]]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--engine", "vllm,llamacpp"], "native,llamacpp"),
        (["--target-gguf", "x.gguf"], "--target-gguf is for --engine llamacpp"),
        (["--engine", "llamacpp", "--llama-server", "/bin/true", "--target-gguf", "pyproject.toml"], "not a GGUF"),
        (["--engine", "llamacpp", "--llama-server", "/bin/true", "--target-gguf", "absent.gguf"], "not a file"),
    ],
)
def test_engine_llamacpp_settings_refused_before_anything_runs(args, says):
    assert_clean_failure(run_inprocess("verify", *PAIR, *args), contains=says)


def test_engine_llamacpp_without_llama_server_names_the_setup_command(tmp_path):
    env = {"EAGLEZOO_CACHE": str(tmp_path), "PATH": str(tmp_path / "bin"), "EAGLEZOO_LLAMA_SERVER": ""}
    env["EAGLEZOO_LLAMACPP_BUILD"] = str(tmp_path / "no-build")
    r = run_inprocess("verify", *PAIR, "--engine", "llamacpp", "--target-gguf", "x.gguf", env=env)
    assert_clean_failure(r, contains="bash scripts/setup/llama_server.sh")
