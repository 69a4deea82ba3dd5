"""`doctor --probe LIST` refuses bad input in one line, exit 2, nothing sent: an unknown probe, --probe without
--requests or --endpoint, a malformed requests file (checked before the server is asked anything). Each probe maps
to one catalogued cause code. The probes on real vLLM servers are tests/engine/test_doctor_probes.py (and, for a
server without a chat template, tests/engine/test_watch_servers.py)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import assert_clean_failure, run_inprocess

from eaglezoo.checkpoint.codes import CODES
from eaglezoo.doctor.probes import CAUSES, PROBES


class Counting(BaseHTTPRequestHandler):
    """Any request counted and answered 404: the input checks must send nothing at all."""

    seen: list

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.seen.append(self.path)
        self.send_response(404)
        self.end_headers()

    do_POST = do_GET


@pytest.fixture
def server():
    seen: list = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (Counting,), {"seen": seen}))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}", seen
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def requests_file(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps({"prompt": "def f(x):", "max_tokens": 8}) + "\n")
    return path


@pytest.mark.parametrize(
    ("probe", "says"),
    [
        ("speed", "--probe speed: speed is not a probe"),
        ("template,warp", "--probe template,warp: warp is not a probe"),
        (",", "--probe ,: names no probe"),
    ],
)
def test_an_unknown_probe_is_one_line(server, requests_file, probe, says):
    url, seen = server
    r = run_inprocess("doctor", "--endpoint", url, "--requests", requests_file, "--probe", probe)
    assert_clean_failure(r, contains=says)
    assert "template,thinking,temperature,schema,context,cache" in r.err
    assert seen == []


def test_probes_need_the_requests_and_the_server(server, requests_file):
    url, seen = server
    assert_clean_failure(
        run_inprocess("doctor", "--endpoint", url, "--probe", "all"), contains="add --endpoint URL --requests FILE"
    )
    assert_clean_failure(
        run_inprocess("doctor", "--requests", requests_file, "--probe", "all"), contains="--probe varies"
    )
    assert seen == []


def test_a_malformed_requests_file_is_refused_before_anything_is_sent(server, tmp_path):
    url, seen = server
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps({"prompt": "ok"}) + "\n{not json\n")
    r = run_inprocess("doctor", "--endpoint", url, "--requests", path, "--probe", "template")
    assert_clean_failure(r, contains="line 2 is not JSON; nothing was sent")
    assert seen == []


def test_each_probe_names_one_catalogued_cause():
    assert set(CAUSES) == set(PROBES)
    assert {c.code for c in CODES.values() if c.group == "doctor-probes"} == set(CAUSES.values())
    assert len(set(CAUSES.values())) == len(CAUSES)
