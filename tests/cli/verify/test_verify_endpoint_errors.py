"""`eaglezoo verify --endpoint` against servers that are down, answer garbage, are not HTTP, or quote a secret in
their error: one line each, before anything is measured, the secret hidden. (A real vLLM server:
tests/engine/test_verify_endpoint.py.)"""

from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer

from conftest import assert_clean_failure, run_inprocess
from support.bad_servers import SECRET, Garbage, QuotesASecret
from support.net import free_port, serve_in_background


def test_endpoint_that_is_down_or_answers_garbage():
    r = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{free_port()}")
    assert_clean_failure(r, contains="cannot be reached")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    serve_in_background(httpd)
    try:
        r = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{httpd.server_port}")
    finally:
        httpd.shutdown()
    assert_clean_failure(r, contains="did not answer with JSON")
    assert_clean_failure(run_inprocess("verify", "tiny-example-eagle31", "--endpoint", "ftp://x"), contains="http://")
    assert_clean_failure(
        run_inprocess("verify", "tiny-example-eagle31", "--endpoint", "http://127.0.0.1:abc"),
        contains="cannot be reached",
    )
    with socket.socket() as raw:  # a TCP server that is not HTTP
        raw.bind(("127.0.0.1", 0))
        raw.listen()
        threading.Thread(target=lambda: raw.accept()[0].sendall(b"SSH-2.0-OpenSSH\r\n"), daemon=True).start()
        r = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{raw.getsockname()[1]}")
    assert_clean_failure(r, contains="not an HTTP server")


def test_endpoint_error_quoting_a_held_secret_hides_it():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), QuotesASecret)
    serve_in_background(httpd)
    try:
        r = run_inprocess(
            "verify",
            "tiny-example-eagle31",
            "--endpoint",
            f"http://127.0.0.1:{httpd.server_port}",
            env={"HF_TOKEN": SECRET},
        )
    finally:
        httpd.shutdown()
    assert_clean_failure(r, contains="bad key ***, try again")
    assert SECRET[3:] not in r.err + r.out


def test_endpoint_counters_no_engine_could_have_counted_and_a_redirect_elsewhere_are_refused():
    """verify --endpoint reads the server as doctor does (verify/endpoint.py): counters past what its drafts allow
    are no measurement, and a redirect to another host is not followed (tests/cli/doctor/test_doctor_hostile_server.py
    for every case)."""
    from support.hostile_vllm import hostile, metrics_text

    args = ["--max-prompts", "4", "--max-new-tokens", "16"]
    liar = hostile(metrics=[metrics_text(0, 0, 0, [0, 0, 0]), metrics_text(10, 30, 1e30, [10, 10, 10])])
    elsewhere = hostile()
    redirecting = hostile(redirect_to=elsewhere.url)
    try:
        lied = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", liar.url, *args)
        redirected = run_inprocess("verify", "tiny-example-eagle31", "--endpoint", redirecting.url, *args)
    finally:
        for server in (liar, elsewhere, redirecting):
            server.stop()
    assert_clean_failure(redirected, contains=f"redirected to {elsewhere.url}/v1/models")
    assert_clean_failure(lied, contains="num_accepted_tokens")
