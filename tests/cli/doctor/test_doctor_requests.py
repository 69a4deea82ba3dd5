"""`doctor --endpoint URL --requests FILE [--export-low FILE]` against a real local HTTP server that answers both
OpenAI routes as vLLM does with `--per-request-spec-decode-metrics detailed` (`metrics.speculative_decoding`,
vllm/entrypoints/openai/chat_completion/serving.py:1182-1186): requests with a JSON schema accept nothing, the
others accept well, one is rejected. The real vLLM server's case is tests/engine/test_watch_servers.py's neighbour."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean_failure, run_inprocess
from support.json_server import JsonHandler, serving

ENTRY = "tiny-example-eagle31"  # floors at K=3: per position 0.5, 0.3, 0.2, so requests below AL 2.0 are low


class Replaying(JsonHandler):
    """Answers /v1/models, and each completion with its acceptance: none under a response_format, 2 of 3 otherwise;
    a prompt saying "reject" gets HTTP 400 with vLLM's error body."""

    def do_GET(self):
        if self.path.startswith("/v1/models"):
            return self.send(200, {"data": [{"id": "examples/tiny/target", "max_model_len": 1024}]})
        self.send(404, {"detail": "Not Found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.seen.append((self.path, body))
        if "reject" in json.dumps(body.get("messages") or body.get("prompt")):
            return self.send(400, {"error": {"message": "This model's maximum context length is 1024 tokens"}})
        steps = [0] * 8 if "response_format" in body else [2] * 8
        choice = {"text": "an answer"} if self.path == "/v1/completions" else {"message": {"content": "an answer"}}
        spec = {"num_spec_tokens": 3, "per_step_accepted": steps}
        self.send(200, {"choices": [choice], "usage": {"prompt_tokens": 12}, "metrics": {"speculative_decoding": spec}})


@pytest.fixture
def server():
    seen: list = []
    with serving(type("H", (Replaying,), {"seen": seen})) as url:
        yield url, seen


def chat(text: str, **extra) -> dict:
    return {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}], **extra}


SCHEMA = {"response_format": {"type": "json_object"}}
REQUESTS = [
    chat("hello"),
    chat("give me JSON", **SCHEMA, temperature=0),
    {"prompt": "def f(x):", "max_tokens": 16},
    chat("again JSON", **SCHEMA, chat_template_kwargs={"enable_thinking": False}),
    chat("please reject me"),
    {"custom_id": "b1", "method": "POST", "url": "/v1/chat/completions", "body": chat("batch line")},
]


def write(path, rows) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def test_the_worst_requests_what_they_share_and_their_export(server, tmp_path):
    url, seen = server
    requests, low = tmp_path / "requests.jsonl", tmp_path / "low.jsonl"
    write(requests, REQUESTS)
    r = run_inprocess("doctor", ENTRY, "--endpoint", url, "--requests", requests, "--export-low", low, "--json")
    assert r.code == 1, (r.out, r.err)
    report = json.loads(r.out)
    assert report["low"] == [2, 4] and report["rejected"] == 1 and report["requests"] == 6
    assert report["low_threshold"] == pytest.approx(2.0)
    assert "response_format json_object: 100% of the low requests, 40% of all" in report["shared_by_low"]
    by_line = {x["line"]: x for x in report["per_request"]}
    assert by_line[1]["mean_acceptance_length"] == pytest.approx(3.0)
    assert "maximum context length" in by_line[5]["rejected"]
    sent = {path for path, _ in seen}
    assert sent == {"/v1/chat/completions", "/v1/completions"}
    assert all(b["model"] == "examples/tiny/target" and b["stream"] is False for _, b in seen)
    rows = [json.loads(x) for x in low.read_text().splitlines()]
    assert rows[0] == {
        "id": "line-2",
        "conversations": [{"role": "user", "content": "give me JSON"}, {"role": "assistant", "content": "an answer"}],
    }
    assert len(rows) == 2


def test_healthy_requests_exit_0(server, tmp_path):
    url, _ = server
    requests = tmp_path / "requests.jsonl"
    write(requests, [chat("hello"), {"prompt": "x"}])
    r = run_inprocess("doctor", ENTRY, "--endpoint", url, "--requests", requests)
    assert r.code == 0, (r.out, r.err)
    assert r.out.startswith("OK: 0 of 2 request(s) accept poorly")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "line 3 is not JSON"),
        ('["a list"]', "line 3 is not a JSON object"),
        ('{"model": "m"}', "line 3 holds neither messages nor prompt"),
        ('{"prompt": "a", "messages": []}', "line 3 holds both messages and prompt"),
        ('{"messages": "hi"}', "line 3 has messages that are not a list"),
        ('{"prompt": 7}', "line 3 has a prompt that is neither text nor"),
        ('{"prompt": "a", "max_tokens": -1}', "line 3 asks max_tokens -1"),
        ('{"prompt": "a", "temperature": "hot"}', "line 3 asks temperature hot"),
    ],
)
def test_a_malformed_line_is_named_and_nothing_is_sent(server, tmp_path, line, says):
    url, seen = server
    requests = tmp_path / "requests.jsonl"
    write(requests, [chat("one"), "", line, chat("four")])
    r = run_inprocess("doctor", ENTRY, "--endpoint", url, "--requests", requests)
    assert_clean_failure(r, contains=says)
    assert seen == []


def test_the_options_that_go_together(server, tmp_path):
    url, seen = server
    requests = tmp_path / "requests.jsonl"
    write(requests, [chat("one")])
    assert_clean_failure(run_inprocess("doctor", ENTRY, "--requests", requests), contains="add --endpoint")
    assert_clean_failure(
        run_inprocess("doctor", ENTRY, "--endpoint", url, "--export-low", tmp_path / "x.jsonl"), contains="--requests"
    )
    r = run_inprocess("doctor", ENTRY, "--endpoint", url, "--requests", requests, "--export-low", requests)
    assert_clean_failure(r, contains="a file this command reads")
    assert seen == [] and requests.read_text().count("\n") == 1


def test_a_server_that_rejects_every_request_is_one_line(server, tmp_path):
    url, seen = server
    requests = tmp_path / "requests.jsonl"
    write(requests, [chat("reject one"), {"prompt": "reject two"}])
    r = run_inprocess("doctor", ENTRY, "--endpoint", url, "--requests", requests)
    assert_clean_failure(r, contains="rejected every request (2)")
    assert len(seen) == 2


def test_the_replay_is_saved_with_report_and_refuses_html(server, tmp_path):
    url, seen = server
    requests, saved = tmp_path / "requests.jsonl", tmp_path / "replay.json"
    write(requests, [chat("hello"), {"prompt": "x"}])
    r = run_inprocess("doctor", ENTRY, "--endpoint", url, "--requests", requests, "--report", saved, "--json")
    assert r.code == 0, (r.out, r.err)
    assert json.loads(saved.read_text()) == json.loads(r.out)
    r = run_inprocess("doctor", ENTRY, "--endpoint", url, "--requests", requests, "--html", tmp_path / "p.html")
    assert_clean_failure(r, contains="--requests writes no HTML page")
    r = run_inprocess("doctor", ENTRY, "--endpoint", url, "--requests", requests, "--report", requests)
    assert_clean_failure(r, contains="a file this command reads")
    assert len(seen) == 2 and not (tmp_path / "p.html").exists()
