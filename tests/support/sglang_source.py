"""An SGLang 0.5.23 server's answers, built from SGLang 0.5.23's own source (its wheel, unpacked by
`scripts/setup/sglang_src.sh`), never from field names written here: no SGLang runs on these machines.

- ServerArgs: its fields are declared in the namespaces of `sglang/srt/arg_groups/fields/*.py` (msgspec Structs
  carrying `_NS_PATH`, collected by fields/__init__.py:19-50); importing them needs msgspec and, through the
  package's __init__, torch, so each field and its default is read with `ast` from those files. `server_info`
  lays them out as `/server_info` does (http_server.py:863-892, utils/common.py:3584-3594, server_args.py:316-333),
  and refuses to set a field the source does not declare.
- The OpenAI models (`ModelCard`, `ModelList`, `SpecTokensDetails`, `SglExt`, ...): protocol.py imports openai,
  msgspec and xgrammar, so the class definitions themselves are taken from the file with `ast` and run with
  pydantic, the library they are written for.

Where the source cannot be set up, the tests skip, naming the command."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from support.net import serve_in_background

ROOT = Path(__file__).resolve().parents[2]
SETUP = "bash scripts/setup/sglang_src.sh"
VERSION = "0.5.23"


@cache
def source_dir() -> Path:
    proc = subprocess.run(
        ["bash", "scripts/setup/sglang_src.sh", sys.executable],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"SGLang {VERSION} source unavailable ({proc.stderr.strip()[-200:]}): run {SETUP}")
    return Path(proc.stdout.strip().splitlines()[-1])


def _default(node: ast.expr | None) -> Any:
    """A field's default as its source writes it: a literal, arithmetic on literals, or a default_factory."""
    if node is None:
        return None
    if isinstance(node, ast.Call):
        factory = next((k.value for k in node.keywords if k.arg == "default_factory"), None)
        return {"list": [], "dict": {}}.get(factory.id) if isinstance(factory, ast.Name) else None
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if all(isinstance(n, ast.BinOp | ast.UnaryOp | ast.Constant | ast.operator | ast.unaryop) for n in ast.walk(node)):
        return eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # noqa: S307 - literals
    return None


@cache
def server_args_defaults() -> dict[str, Any]:
    """Every ServerArgs field with its declared default (None where the default is computed at runtime)."""
    fields: dict[str, Any] = {}
    for path in sorted((source_dir() / "sglang/srt/arg_groups/fields").glob("*.py")):
        for cls in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(cls, ast.ClassDef) or not any(
                isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "_NS_PATH" for t in n.targets)
                for n in cls.body
            ):
                continue
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    fields[node.target.id] = _default(node.value)
    assert "speculative_algorithm" in fields and "attn_dp_size" in fields, "the namespaces moved: read them again"
    return fields


def server_info(
    *,
    launch_command: str | None = None,
    accept_lengths: tuple[float, ...] = (),
    version: str = VERSION,
    **settings: Any,
) -> dict[str, Any]:
    """`/server_info` of a server launched with `settings` (ServerArgs fields, resolved): the fields
    (server_args.py:326-332, `enable_dp_attention` reported as attn_dp_size > 1), launch_command, kv_events
    (None: no publisher, runtime_context.py:2072), then startup_time, internal_states (one per DP rank;
    avg_spec_accept_length where it has drafted, internal_state.py:119-125), version and frontend
    (http_server.py:883-890)."""
    fields = dict(server_args_defaults())
    unknown = sorted(set(settings) - set(fields))
    assert not unknown, f"not a ServerArgs field in SGLang {VERSION}: {unknown}"
    fields.update(settings)
    fields["enable_dp_attention"] = (fields.get("attn_dp_size") or 1) > 1
    ranks = max(1, len(accept_lengths))
    return {
        **fields,
        "launch_command": launch_command,
        "kv_events": None,
        "startup_time": 12.5,
        "internal_states": [
            {"avg_spec_accept_length": accept_lengths[i]} if accept_lengths else {} for i in range(ranks)
        ],
        "version": version,
        "frontend": "python",
    }


@cache
def protocol_models() -> dict[str, Any]:
    """SGLang's own pydantic classes from openai/protocol.py, defined from their source text."""
    import time
    from typing import Dict, List, Literal, Optional, Tuple, Union  # noqa: UP035 - the source's own names

    from pydantic import BaseModel, Field, model_serializer

    path = source_dir() / "sglang/srt/entrypoints/openai/protocol.py"
    wanted = (
        "ModelCard",
        "ModelList",
        "LogProbs",
        "CachedTokensDetails",
        "PromptTokensDetails",
        "CompletionTokensDetails",
        "UsageInfo",
        "SpecTokensDetails",
        "SglExt",
        "CompletionResponseChoice",
        "CompletionResponse",
    )
    tree = ast.parse(path.read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {
        "BaseModel": BaseModel,
        "Field": Field,
        "model_serializer": model_serializer,
        "Optional": Optional,
        "List": List,
        "Dict": Dict,
        "Tuple": Tuple,
        "Union": Union,
        "Literal": Literal,
        "Any": Any,
        "time": time,
    }
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in wanted:
            exec(compile(ast.Module([node], []), str(path), "exec"), namespace)  # noqa: S102 - SGLang's own classes
    for name in wanted:
        namespace[name].model_rebuild(_types_namespace=namespace)
    # utils.py imports torch: its one function that turns meta_info into SpecTokensDetails (utils.py:310-340), defined
    # from its source beside the models it returns
    utils = ast.parse((path.parent / "utils.py").read_text(encoding="utf-8"))
    (function,) = [
        n for n in utils.body if isinstance(n, ast.FunctionDef) and n.name == "spec_tokens_details_from_meta_info"
    ]
    exec(compile(ast.Module([function], []), str(path.parent / "utils.py"), "exec"), namespace)  # noqa: S102
    return {name: namespace[name] for name in (*wanted, "spec_tokens_details_from_meta_info")}


def completion_body(body: dict[str, Any], accepted: int | None, num_draft_tokens: int) -> dict[str, Any]:
    """/v1/completions' answer to `body` from a server whose every verify step accepts `accepted` drafts (None: a
    release that does not report them): meta_info's spec fields as tokenizer_manager.py:3148-3200 computes them for
    `max_tokens` tokens, through utils.spec_tokens_details_from_meta_info into SglExt at the response's level
    (serving_completions.py:554-571, 638-647)."""
    m = protocol_models()
    tokens = body["max_tokens"]
    sglext = None
    if accepted is not None and body.get("return_spec_tokens_details"):
        verify_ct = -(-tokens // (accepted + 1))
        proposed = verify_ct * (num_draft_tokens - 1)
        meta_info = {
            "spec_accept_rate": accepted * verify_ct / proposed,
            "spec_accept_length": tokens / verify_ct,
            "spec_num_correct_drafts": accepted * verify_ct,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": verify_ct,
            "spec_correct_drafts_histogram": [0] * accepted + [verify_ct],
        }
        sglext = m["SglExt"](spec_tokens_details=m["spec_tokens_details_from_meta_info"](meta_info))
    return m["CompletionResponse"](
        id="cmpl-0",
        model=body["model"],
        choices=[m["CompletionResponseChoice"](index=0, text="", finish_reason="length")],
        usage=m["UsageInfo"](
            prompt_tokens=len(body["prompt"]), completion_tokens=tokens, total_tokens=len(body["prompt"]) + tokens
        ),
        sglext=sglext,
    ).model_dump(mode="json")


def models_body(name: str, context_len: int | None) -> dict[str, Any]:
    """/v1/models as http_server.py:1993-2022 answers it (the served name as id and root)."""
    m = protocol_models()
    return m["ModelList"](data=[m["ModelCard"](id=name, root=name, max_model_len=context_len)]).model_dump(mode="json")


@cache
def tokenizer_counters() -> dict[str, list[str]]:
    """The Prometheus counters SGLang's TokenizerMetricsCollector declares (observability/metrics_collector.py), each
    name with the label names it adds to the collector's own (`labelnames=list(labels.keys()) + [...]`)."""
    tree = ast.parse((source_dir() / "sglang/srt/observability/metrics_collector.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TokenizerMetricsCollector")
    found: dict[str, list[str]] = {}
    for call in (n for n in ast.walk(cls) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Counter"):
        kw = {k.arg: k.value for k in call.keywords}
        extra = kw["labelnames"].right if isinstance(kw.get("labelnames"), ast.BinOp) else None
        found[ast.literal_eval(kw["name"])] = ast.literal_eval(extra) if extra is not None else []
    return found


def metrics_text(tokens: int, requests: int, verifies: int) -> bytes:
    """An SGLang /metrics text whose counters total these (split over a streaming and a non-streaming label set, as
    SGLang keeps them), written by prometheus_client, the library SGLang writes its own with."""
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    declared = tokenizer_counters()
    registry = CollectorRegistry()
    labels = {"model_name": "tiny"}  # the collector's labels (tokenizer_manager.py: model_name and its extras)
    for name, total in [
        ("sglang:generation_tokens_total", tokens),
        ("sglang:num_requests_total", requests),
        ("sglang:spec_verify_calls_total", verifies),
    ]:
        extra = declared[name]  # KeyError: SGLang no longer declares it
        counter = Counter(name, "from SGLang's source", [*labels, *extra], registry=registry)
        if extra == ["is_streaming"]:
            counter.labels(**labels, is_streaming="false").inc(total - total // 3)
            counter.labels(**labels, is_streaming="true").inc(total // 3)
        else:
            assert not extra, extra
            counter.labels(**labels).inc(total)
    return generate_latest(registry)


class SglangServer:
    """A real HTTP server on 127.0.0.1 answering as SGLang does: /v1/models, /server_info (or only
    /get_server_info, as releases before 0.5.23), /metrics (the texts put in `.metrics`, in turn, the last
    repeated; 404 when none: a server started without --enable-metrics), 404 for /version and the rest. Stop it
    with .stop()."""

    def __init__(
        self,
        info: dict[str, Any],
        model: str,
        context_len: int | None = 1024,
        legacy: bool = False,
        accepted: int | None = None,
        lie: dict[str, Any] | None = None,
    ):
        scrapes: list[bytes] = []
        self.metrics = scrapes  # /metrics texts to answer in turn (filled after the start)
        answers = {
            "/v1/models": models_body(model, context_len),
            "/get_server_info": info,
            **({} if legacy else {"/server_info": info}),
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path == "/metrics" and scrapes:
                    text = scrapes.pop(0) if len(scrapes) > 1 else scrapes[0]
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    self.wfile.write(text)
                    return
                body = answers.get(self.path.split("?")[0])
                data = json.dumps(body if body is not None else {"detail": "Not Found"}).encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/completions":
                    self.send_error(404)
                    return
                steps = info.get("speculative_num_draft_tokens") or 1
                answer = completion_body(request, accepted, steps)
                if lie:  # a field SGLang would never write so, laid over what it wrote
                    answer["sglext"]["spec_tokens_details"].update(lie)
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.posted.append(request)

            def log_message(self, *args: Any) -> None:
                pass

        self.posted: list[dict[str, Any]] = []
        Handler.posted = self.posted
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        serve_in_background(self.httpd)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
