"""Local network helpers."""

from __future__ import annotations

import socket
import threading


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# How soon a stopped test server notices: serve_forever polls every 0.5 s by default, and `shutdown()` waits for that
# poll, so each test that stops a server would wait up to half a second for nothing.
POLL_S = 0.05


def serve_in_background(server) -> threading.Thread:
    """Serve `server` (a socketserver.BaseServer) on a daemon thread; its `shutdown()` returns within POLL_S."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True)
    thread.start()
    return thread
