"""`verify --endpoint` connects to the server once per run and passes down what it said (issue 40): a real local
server (tests/support/hostile_vllm.py, every lie off) counts what it was asked."""

from __future__ import annotations

from collections import Counter

from conftest import run_inprocess
from support.hostile_vllm import hostile


def test_a_verify_run_asks_the_server_what_it_serves_once():
    server = hostile()
    try:
        r = run_inprocess("verify", "tiny-example-eagle3", "--endpoint", server.url, "--max-prompts", "2", "--json")
    finally:
        server.stop()
    assert r.code == 0, r.err
    assert r.json()["engine"]["name"] == "endpoint" and r.json()["num_prompts"] == 2
    asked = Counter(server.seen)
    # one connection: the models it serves and whether it is a llama-server, asked once each, then the measurement
    assert (asked["/v1/models"], asked["/props"]) == (1, 1), asked
    assert (asked["/server_info"], asked["/version"], asked["/metrics"], asked["/v1/completions"]) == (1, 1, 2, 2)
