"""`doctor --probe LIST` refuses bad input in one line, exit 2, nothing sent: an unknown probe, --probe without
--requests or --endpoint, a malformed requests file (checked before the server is asked anything). Each probe maps
to one catalogued cause code. The probes on real vLLM servers are tests/engine/test_doctor_probes.py (and, for a
server without a chat template, tests/engine/test_watch_servers.py)."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean_failure, run_inprocess
from support.json_server import JsonHandler, serving

from eaglezoo.checkpoint.codes import CODES
from eaglezoo.doctor.probes import CAUSES, PROBES


class Counting(JsonHandler):
    """Any request counted and answered 404: the input checks must send nothing at all."""

    def do_GET(self):
        self.seen.append(self.path)
        self.send(404, {"detail": "Not Found"})

    do_POST = do_GET


@pytest.fixture
def server():
    seen: list = []
    with serving(type("H", (Counting,), {"seen": seen})) as url:
        yield url, seen


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
    r = run_inprocess(
        "doctor", "--endpoint", url, "--requests", requests_file, "--probe", "all", "--export-low", requests_file
    )
    assert_clean_failure(r, contains="--probe runs the probes instead")
    r = run_inprocess(
        "doctor", "--endpoint", url, "--requests", requests_file, "--probe", "context", "--trained-length", "8"
    )
    assert_clean_failure(r, contains="--trained-length 8: not 16 to 2^24 tokens")
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


class VllmLike(JsonHandler):
    """Answers as vLLM 0.32 does with `--per-request-spec-decode-metrics detailed`: /v1/models, /version, /tokenize
    (a chat template with a thinking switch, on unless enable_thinking is false) and both OpenAI routes, each answer
    with its `metrics.speculative_decoding`. Acceptance by the request: chat with thinking on, or the template's token
    ids, 1 of 3 drafts a step; raw text and thinking off, 2 of 3. `metrics`: False answers without them."""

    metrics = True
    tokenize: object = None  # an answer to /tokenize in place of the template's

    def do_GET(self):
        if self.path.startswith("/v1/models"):
            return self.send(200, {"data": [{"id": "target", "max_model_len": 1024}]})
        if self.path == "/version":
            return self.send(200, {"version": "0.32.0"})
        self.send(404, {"detail": "Not Found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path == "/tokenize" and self.tokenize is not None:
            return self.send(200, self.tokenize)
        if self.path == "/tokenize":
            thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking", True)
            return self.send(200, {"tokens": [5, 6, 7] if "messages" in body and thinking else [5, 6]})
        self.seen.append((self.path, body))
        on = (body.get("chat_template_kwargs") or {}).get("enable_thinking", True)
        good = isinstance(body.get("prompt"), str) or ("messages" in body and not on)
        steps = [2, 2, 1, 2] if good else [1, 0, 1, 1]
        choice = {"text": "x"} if self.path == "/v1/completions" else {"message": {"content": "x"}}
        spec = {"num_spec_tokens": 3, "per_step_accepted": steps} if self.metrics else {}
        self.send(200, {"choices": [choice], "usage": {"prompt_tokens": 9}, "metrics": {"speculative_decoding": spec}})


@pytest.fixture
def vllm_like():
    seen: list = []
    handler = type("H", (VllmLike,), {"seen": seen})
    with serving(handler) as url:
        yield url, seen, handler


def chats(tmp_path, n: int = 6):
    path = tmp_path / "chats.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"question {i}"}], "max_tokens": 16, "temperature": 0}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_cause_is_confirmed_where_its_interval_separates_and_the_budget_is_what_was_sent(vllm_like, tmp_path):
    url, seen, _ = vllm_like
    saved = tmp_path / "probes.json"
    args = ["doctor", "--endpoint", url, "--requests", chats(tmp_path), "--probe", "template,thinking,temperature"]
    r = run_inprocess(*args, "--json", "--report", saved)
    assert r.code == 1, (r.out, r.err)
    report = json.loads(r.out)
    assert json.loads(saved.read_text()) == report
    assert report["verdict"] == "workload"
    assert [f["cause"] for f in report["findings"] if f["confirmed"]] == ["chat-template", "thinking-mode"]
    probes = {p["probe"]: p for p in report["probes"]}
    assert probes["temperature"]["skipped"] == "your requests are greedy (temperature 0) already"
    # the base (the requests as sent) is shared by template and thinking: sent once; the budget counts what was sent
    assert report["budget"] == {"sampled": 6, "of": 6, "requests": 24, "max_tokens_each": 64, "tokens_at_most": 24 * 16}
    assert len(seen) == 24
    raw = [b for path, b in seen if path == "/v1/completions" and isinstance(b["prompt"], str)]
    assert sorted(b["prompt"] for b in raw) == [f"question {i}" for i in range(6)]
    assert all(b["model"] == "target" and b["temperature"] == 0 for _, b in seen)
    page = tmp_path / "probes.html"
    assert_clean_failure(run_inprocess(*args, "--html", page), out=page, contains="--probe writes no HTML page")
    assert len(seen) == 24  # refused before anything was sent


def test_a_server_without_per_request_acceptance_is_one_line(vllm_like, tmp_path):
    url, _, handler = vllm_like
    handler.metrics = False
    r = run_inprocess("doctor", "--endpoint", url, "--requests", chats(tmp_path), "--probe", "thinking")
    assert_clean_failure(r, contains="no per-request acceptance")
    assert "--per-request-spec-decode-metrics detailed" in r.err


@pytest.mark.parametrize("answer", [["not", "a", "dict"], {"count": 3}, {"tokens": ["a"]}])
def test_a_tokenize_answer_without_token_ids_is_one_line(vllm_like, tmp_path, answer):
    url, seen, handler = vllm_like
    handler.tokenize = answer
    r = run_inprocess("doctor", "--endpoint", url, "--requests", chats(tmp_path), "--probe", "thinking")
    assert_clean_failure(r, contains="/tokenize answered without its tokens: is this a vLLM server?")
    assert seen == []
