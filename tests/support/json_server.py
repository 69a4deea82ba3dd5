"""A real HTTP server on 127.0.0.1 answering JSON, for the tests that script what a vLLM server says: subclass
`JsonHandler` with the routes, then `serving(handler)` starts it in a thread and stops it at the end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from support.net import serve_in_background


class JsonHandler(BaseHTTPRequestHandler):
    """Quiet, with `send(code, body)` for a JSON answer; `seen` collects what a subclass records."""

    seen: list

    def log_message(self, *args):
        pass

    def send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving(handler: type[JsonHandler]) -> Iterator[str]:
    """`handler` served on a free loopback port: its base URL, for the length of the block."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_background(httpd)
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()
