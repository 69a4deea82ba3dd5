"""HTTP servers that are not the vLLM server a command was pointed at: one that answers a web page, one whose error
quotes a secret the client holds."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler


class Garbage(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<html>not a model server</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class QuotesASecret(BaseHTTPRequestHandler):
    """A server whose error message quotes a secret the client holds (here: HF_TOKEN's value)."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"error": {"message": f"bad key {SECRET}, try again"}}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


SECRET = "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12"
