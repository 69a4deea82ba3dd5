"""A server that answers as vLLM does for the tiny example (models, version, completions as token ids, /metrics),
until told to lie: its counters, its context, a redirect to another host, silence, or an answer trickled a byte at
a time. Each test builds one with `hostile(...)` and stops it with `.stop()` (which also ends any trickle)."""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from support.net import serve_in_background

TARGET = "examples/tiny/target"


def metrics_text(drafts: float, draft_tokens: float, accepted: float, per_pos: list[float]) -> bytes:
    """vLLM's spec-decode counters as its Prometheus endpoint writes them (vllm/v1/spec_decode/metrics.py)."""
    labels = 'engine="0",model_name="examples/tiny/target"'
    lines = []
    for name, value in (("drafts", drafts), ("draft_tokens", draft_tokens), ("accepted_tokens", accepted)):
        lines += [
            f"# TYPE vllm:spec_decode_num_{name} counter",
            f"vllm:spec_decode_num_{name}_total{{{labels}}} {value}",
        ]
    lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {v}'
        for i, v in enumerate(per_pos)
    ]
    return ("\n".join(lines) + "\n").encode()


HEALTHY = [metrics_text(0, 0, 0, [0, 0, 0]), metrics_text(40, 120, 60, [30, 20, 10])]


class Hostile:
    """The running server: its URL, what it was asked, and its stop()."""

    def __init__(self, handler: type):
        self.seen: list[str] = handler.seen  # every request's path, in order (its query left off)
        self.stopping = threading.Event()
        handler.stopping = self.stopping
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        serve_in_background(self.httpd)

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass(frozen=True)
class Lies:
    """How the server misbehaves (every field off: it answers as vLLM does).

    metrics: /metrics answers in turn (the last repeated); model: /v1/models' first entry; silent: accept and
    never answer; trickle: send the answer a byte every `trickle` seconds; redirect_to: answer every request with
    302 to that base URL (same path); slow: answer each request whole after `slow` seconds; error_body: answer
    /v1/models with HTTP 500 and this body; server_info: /server_info's answer (as in dev mode; else 404); per_request:
    each completion's metrics.speculative_decoding (as with --per-request-spec-decode-metrics detailed); version:
    what /version answers."""

    metrics: list[bytes] | None = None
    model: dict | None = None
    silent: bool = False
    trickle: float | None = None
    redirect_to: str | None = None
    slow: float | None = None
    error_body: bytes | None = None
    server_info: dict | None = None
    per_request: dict | None = None
    version: str = "0.32.0"


def hostile(**lies) -> Hostile:
    """A running server that tells `lies` (the fields of Lies, by name)."""
    told = Lies(**lies)
    answers = list(told.metrics or HEALTHY)
    return Hostile(type("HostileHandler", (Handler,), {"lies": told, "answers": answers, "seen": []}))


class Handler(BaseHTTPRequestHandler):
    """Answers as vLLM does for the tiny example, except where `lies` says otherwise (set per server)."""

    protocol_version = "HTTP/1.1"
    lies: Lies
    answers: list[bytes]  # /metrics answers still to give (the last repeated)
    seen: list[str]  # the paths asked, in order
    stopping: threading.Event

    def log_message(self, *args):
        pass

    def do_GET(self):
        with contextlib.suppress(ConnectionError):  # the client gave up: as it should, with a hostile server
            self.answer(None)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        with contextlib.suppress(ConnectionError):
            self.answer(json.loads(self.rfile.read(length) or b"{}"))

    def answer(self, body: dict | None):
        self.seen.append(self.path.split("?")[0])
        if not self.misbehaved():
            self.route(self.path.split("?")[0], body)

    def misbehaved(self) -> bool:
        """Silence, a redirect or an error answer: True when one was given; a slow server waits, then answers."""
        lies = self.lies
        if lies.silent:
            self.stopping.wait()
            return True
        if lies.redirect_to:
            self.send_response(302)
            self.send_header("Location", lies.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        if lies.slow:
            self.stopping.wait(lies.slow)
        if lies.error_body is not None and self.path.startswith("/v1/models"):
            self.send(lies.error_body, status=500)
            return True
        return False

    def route(self, path: str, body: dict | None):
        entry = self.lies.model or {"id": TARGET, "root": TARGET, "max_model_len": 1024}
        if path == "/v1/models":
            return self.send(json.dumps({"object": "list", "data": [entry]}).encode())
        if path == "/server_info" and self.lies.server_info is not None:
            return self.send(json.dumps(self.lies.server_info).encode())
        if path == "/version":
            return self.send(json.dumps({"version": self.lies.version}).encode())
        if path == "/metrics":
            answers = self.answers
            return self.send(answers.pop(0) if len(answers) > 1 else answers[0], "text/plain")
        if path == "/v1/completions" and body is not None:
            return self.send(json.dumps(self.completion(body)).encode())
        self.send(b'{"detail": "Not Found"}', status=404)

    def completion(self, body: dict) -> dict:
        tokens = list(range(5, 5 + int(body["max_tokens"])))
        answer = {"choices": [{"index": 0, "text": "", "token_ids": tokens}]}
        if self.lies.per_request is not None:
            answer["metrics"] = {"speculative_decoding": self.lies.per_request}
        return answer

    def send(self, data: bytes, kind: str = "application/json", status: int = 200):
        if self.lies.trickle:
            self.wfile.write(b"H")  # the status line, and everything after it, a byte at a time
            for byte in f"TTP/1.1 {status} OK\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data:
                if self.stopping.wait(self.lies.trickle):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            return
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
