"""Hubs (or proxies in front of them) that misbehave, through the CLI and the real client: one that
accepts connections and never answers, one that sends headers and stalls the body, one that asks to
wait past the deadline, and ones that answer 200 with a body that is not the JSON the client expects.
Each is one error line, in time; a download that keeps moving is not cut by the deadline.
scripts/bench/hub_deadline.py measures the silent case with default settings."""

from __future__ import annotations

import hashlib
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import EXAMPLE, ROOT, assert_clean_failure, hubcli, run_cli
from support.fakehub import never_answer, serve_raw, stall_after_headers
from support.net import serve_in_background

DEADLINE = 3  # seconds, EAGLEZOO_HUB_DEADLINE in these tests
SLACK = 30  # start-up of the CLI on a loaded machine; the per-request timeout alone is 60 s
ENTRY, OTHER_ENTRY = "angelslim-qwen3-8b-eagle3", "aq-medai-kimi-k2-instruct-eagle3"  # published, in the registry
COMMANDS = {
    "pull": ["pull", "tester/drafter"],
    "lint": ["lint", "tester/drafter"],
    "registry sync": ["registry", "sync", ENTRY, "--registry", ROOT / "registry"],
    "registry check --online": ["registry", "check", "--online", ENTRY, "--registry", ROOT / "registry"],
}


@pytest.fixture(scope="module", params=[never_answer, stall_after_headers], ids=["never-answers", "stalls-the-body"])
def stalling_hub(request):
    server, released = serve_raw(request.param)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    released.set()
    server.shutdown()
    server.server_close()


def hub_env(tmp_path, endpoint: str, **extra) -> dict:
    return {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_TOKEN": "hf_not_a_real_token",
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_XET": "1",
        "EAGLEZOO_HUB_DEADLINE": str(DEADLINE),
        **extra,
    }


@pytest.mark.parametrize("command", COMMANDS)
def test_a_silent_hub_is_one_line_within_the_deadline(stalling_hub, tmp_path, command):
    start = time.monotonic()
    r = run_cli(*COMMANDS[command], env=hub_env(tmp_path, stalling_hub), timeout=120)
    elapsed = time.monotonic() - start
    assert_clean_failure(r, contains=f"the Hub did not answer within {DEADLINE} s")
    assert "EAGLEZOO_HUB_DEADLINE" in r.err
    assert elapsed < DEADLINE + SLACK, elapsed


def test_a_request_timeout_stops_a_registry_command_not_each_entry(tmp_path):
    """A request that times out (2 s) before the deadline (3 s) is a silent Hub too: the next entry would
    wait as long, so the command stops with one line instead of an error per entry."""
    server, released = serve_raw(never_answer)
    try:
        r = run_cli(
            "registry",
            "sync",
            ENTRY,
            OTHER_ENTRY,
            "--registry",
            ROOT / "registry",
            timeout=120,
            env=hub_env(tmp_path, f"http://127.0.0.1:{server.server_address[1]}", EAGLEZOO_HUB_TIMEOUT="2"),
        )
    finally:
        released.set()
        server.shutdown()
        server.server_close()
    assert_clean_failure(r, contains="AngelSlim/Qwen3-8B_eagle3@main: the Hub could not be reached (timed out)")


def serve_answers(answer):
    """An HTTP server whose every answer is `answer(request_headers) -> (status, body, content type, headers)`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def respond(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, body, ctype, headers = answer(self.headers)
            self.send_response(status)
            for name, value in {"Content-Type": ctype, "Content-Length": str(len(body)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_POST = do_PUT = respond

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    serve_in_background(server)
    return server


@pytest.fixture
def http_server():
    """start(answer) -> the URL of a server answering with `answer`; every server stopped after the test."""
    servers = []

    def start(answer) -> str:
        servers.append(serve_answers(answer))
        return f"http://127.0.0.1:{servers[-1].server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def answering_hub(http_server):
    """A Hub (or a proxy in front of one) that answers every request alike."""

    def start(status: int, body: bytes, ctype: str = "application/json", headers: dict | None = None) -> str:
        return http_server(lambda _: (status, body, ctype, headers or {}))

    return start


def test_a_hub_asking_to_wait_past_the_deadline_is_not_waited_for(answering_hub, tmp_path):
    endpoint = answering_hub(503, b'{"error": "busy"}', headers={"Retry-After": "3600"})
    start = time.monotonic()
    r = run_cli("pull", "tester/drafter", env=hub_env(tmp_path, endpoint), timeout=120)
    assert_clean_failure(r, contains="asked to wait 3600 s before a retry, past the 3 s deadline")
    assert time.monotonic() - start < DEADLINE + SLACK


LOGIN_PAGE = b"<html><body>Sign in to the proxy to continue</body></html>"
PUSH = ["push", EXAMPLE / "eagle31-safeai", "tester/drafter"]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["pull", "tester/drafter"], "expected the repo's file list"),
        (["lint", "tester/drafter"], "expected the repo's file list"),
        (PUSH, "expected the new repo's URL"),
    ],
    ids=["pull", "lint", "push"],
)
@pytest.mark.parametrize(
    "body, ctype, sent",
    [
        (LOGIN_PAGE, "text/html", "answered 200 with text that is not JSON ('<html><body>Sign in"),
        (b'{"ok": true}', "application/json", """answered 200 with JSON of another shape ('{"ok": true}')"""),
    ],
    ids=["not-json", "wrong-shape"],
)
def test_a_200_answer_that_is_not_the_expected_json_is_named(  # noqa: PLR0913 - pytest: fixtures and parameters
    answering_hub, tmp_path, args, expected, body, ctype, sent
):
    endpoint = answering_hub(200, body, ctype)
    r = run_cli(*args, env=hub_env(tmp_path, endpoint), timeout=120)
    assert_clean_failure(r, contains=sent)
    assert f"the Hub at {endpoint}/api/" in r.err and expected in r.err and "HF_ENDPOINT" in r.err
    assert "internal error" not in r.err


def test_a_download_that_keeps_moving_outlives_the_deadline_and_resumes(hub, tmp_path):
    """The first half trickles in for longer than the deadline, then the connection drops: the client
    resumes it (a Range request), as the download was moving. A deadline counted from the call's
    start would have stopped there."""
    data = bytes(range(256)) * 4096  # 1 MiB, 16 pieces of 64 KiB
    hub[0].commit("tester/slow", {"model.safetensors": data})
    hub[0].trickle_s, hub[0].cut_once_at = 0.3, len(data) // 2  # about 2.4 s, then the drop
    try:
        r = hubcli(hub, "pull", "tester/slow", "--json", EAGLEZOO_HUB_DEADLINE="2", HF_HOME=str(tmp_path / "hf-home"))
    finally:
        hub[0].trickle_s, hub[0].cut_once_at = 0.0, None
    assert r.code == 0, r.err
    assert (Path(r.json()["path"]) / "model.safetensors").read_bytes() == data
    blob = f"/blob/{hashlib.sha256(data).hexdigest()}"
    assert [m for m, path in hub[0].requests if path == blob] == ["GET", "GET"]  # cut, then resumed


@pytest.mark.parametrize("value", ["abc", "-1", "0", "inf", "nan"])
def test_a_bad_hub_deadline_setting_is_one_line(cli, value):
    r = cli("pull", "tester/anything", env={"EAGLEZOO_HUB_DEADLINE": value})
    assert_clean_failure(r, contains=f"EAGLEZOO_HUB_DEADLINE={value!r}")


TOKEN = "hf_EchoedBackEchoedBackEchoedBack1234"  # the shape of a real token, so no pattern alone could miss it


@pytest.fixture
def echoing_hub(http_server):
    """A server that answers every request with the request's own headers, Authorization first, after `pad`
    bytes: as some proxies' error pages do."""

    def start(status: int, pad: int) -> str:
        def answer(headers) -> tuple:
            first = sorted(headers.items(), key=lambda header: header[0].lower() != "authorization")
            echoed = "A" * pad + "; ".join(f"{name}: {value}" for name, value in first)
            if status >= 400:
                return status, json.dumps({"error": echoed}).encode(), "application/json", {}
            return status, echoed.encode(), "text/plain", {}

        return http_server(answer)

    return start


PULL, LINT = ["pull", "tester/drafter"], ["lint", "tester/drafter"]


@pytest.mark.parametrize(
    "args, status, pad, where, as_json",
    [
        (PULL, 200, 0, "env", False),
        (LINT, 200, 0, "env", False),
        (PUSH, 200, 0, "env", False),
        (PULL, 200, 20, "env", False),  # the quote is cut inside the token
        (PUSH, 400, 0, "env", False),
        (LINT, 200, 0, "token-file", False),
        (PULL, 200, 0, "env", True),
    ],
    ids=["pull", "lint", "push", "pull-cut-mid-token", "push-400", "lint-token-file", "pull-json"],
)
def test_a_token_echoed_by_the_server_is_never_printed(  # noqa: PLR0913 - pytest: fixtures and parameters
    echoing_hub, tmp_path, args, status, pad, where, as_json
):
    """The answer quotes the request's Authorization header: the error line quotes the answer, never the token,
    whether the token came from HF_TOKEN or the client's token file, and wherever the quote is cut."""
    env = hub_env(tmp_path, echoing_hub(status, pad))
    if where == "env":
        env["HF_TOKEN"] = TOKEN
    else:
        del env["HF_TOKEN"]
        (tmp_path / "hf-home").mkdir()
        (tmp_path / "hf-home" / "token").write_text(TOKEN)
    r = run_cli(*args, *(["--json"] if as_json else []), env={**env, "HF_TOKEN": env.get("HF_TOKEN", "")}, timeout=120)
    assert r.code == 2, (r.out, r.err)
    shown = r.out + r.err
    assert status != 200 or "Bearer ***" in shown  # the answer is quoted, up to where the token was
    assert not [TOKEN[i : i + 8] for i in range(len(TOKEN) - 7) if TOKEN[i : i + 8] in shown], shown
    assert "internal error" not in shown
