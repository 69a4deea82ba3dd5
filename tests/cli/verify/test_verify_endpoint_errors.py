"""`eaglezoo verify --endpoint` against servers that are down, answer garbage, are not HTTP, or quote a secret in
their error: one line each, before anything is measured, the secret hidden. (A real vLLM server:
tests/engine/test_verify_endpoint.py.)"""

from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer

from conftest import assert_clean_failure, run_inprocess
from support.bad_servers import SECRET, Garbage, QuotesASecret
from support.net import free_port


def test_endpoint_that_is_down_or_answers_garbage():
    r = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{free_port()}")
    assert_clean_failure(r, contains="cannot be reached")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        r = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{httpd.server_port}")
    finally:
        httpd.shutdown()
    assert_clean_failure(r, contains="did not answer with JSON")
    assert_clean_failure(run_inprocess("verify", "tiny-example-eagle31", "--endpoint", "ftp://x"), contains="http://")
    assert_clean_failure(run_inprocess("verify", "tiny-example-eagle31", "--endpoint", "http://127.0.0.1:abc"),
                         contains="cannot be reached")
    with socket.socket() as raw:  # a TCP server that is not HTTP
        raw.bind(("127.0.0.1", 0))
        raw.listen()
        threading.Thread(target=lambda: raw.accept()[0].sendall(b"SSH-2.0-OpenSSH\r\n"), daemon=True).start()
        r = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{raw.getsockname()[1]}")
    assert_clean_failure(r, contains="not an HTTP server")


def test_endpoint_error_quoting_a_held_secret_hides_it():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), QuotesASecret)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        r = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{httpd.server_port}",
                          env={"HF_TOKEN": SECRET})
    finally:
        httpd.shutdown()
    assert_clean_failure(r, contains="bad key ***, try again")
    assert SECRET[3:] not in r.err + r.out
