"""`doctor --endpoint URL --requests FILE --probe ...`: A/B probes of the workload, one variable each. Every probe
sends a small sample of the user's own requests as they send them (the base) and again with one thing changed (its
variants), reads each request's acceptance from the server (requests.py), and maps to one cause code with one fix
(eaglezoo/checkpoint/codes.py, group doctor-probes; docs/doctor.md).

- template: the user's route against the other forms of the same text: a chat request against its last user turn
  sent raw to /v1/completions, and against the chat template's own token ids (the server's /tokenize) sent as a
  completion; a completion against its text sent as one chat user turn.
- thinking: a chat request with the template's thinking switch flipped (`chat_template_kwargs.enable_thinking`),
  where the template has one (its prompt's tokens differ between on and off, /tokenize).
- temperature: the user's temperature against 0, where they sample.
- schema: with against without the user's `response_format` (or vLLM's `structured_outputs`).
- context: the user's prompts against the same prompts led by filler text up to the drafter's trained length and
  past it (`--trained-length`), within the server's context.
- cache: the same prompts cold (a fresh `cache_salt`: vLLM keys the prefix cache on it) against warm (sent again
  with that salt, so their prefix is cached)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import EngineError
from ..verify.endpoint import Refused, ServerFailed, request
from .requests import UserRequest

CAUSES = {  # each probe's one cause code (eaglezoo/checkpoint/codes.py, group doctor-probes)
    "template": "chat-template",
    "thinking": "thinking-mode",
    "temperature": "sampling-temperature",
    "schema": "structured-output",
    "context": "context-beyond-training",
    "cache": "prefix-cache",
}
PROBES = tuple(CAUSES)
Better = Literal["higher", "lower"]  # how a variant must separate from the base for the cause to be confirmed


@dataclass(frozen=True)
class Arm:
    name: str
    requests: list[UserRequest]


@dataclass(frozen=True)
class Plan:
    """A probe ready to send, or skipped (`skipped` says why). `confirms`: a variant confirms the cause when its
    interval lies wholly above (`higher`) or below (`lower`) the base's."""

    probe: str
    base: Arm | None = None
    variants: tuple[Arm, ...] = ()
    confirms: Better = "higher"
    skipped: str | None = None
    fresh: bool = False  # every arm sent anew (the cache probe sends the same requests twice on purpose)
    ladder: tuple[Arm, ...] = ()  # measured and shown, not judged

    @property
    def cause(self) -> str:
        return CAUSES[self.probe]


@dataclass(frozen=True)
class Server:
    """What the probes need of the server: its base URL and model name, its context, its speculative settings."""

    base: str
    model: str
    max_model_len: int | None
    draft_sample_method: str | None
    version: str | None


def with_body(r: UserRequest, body: dict[str, Any], kind: str | None = None) -> UserRequest:
    return UserRequest(r.line, kind or r.kind, body)  # type: ignore[arg-type]


def last_user_text(r: UserRequest) -> str | None:
    for m in reversed(r.body.get("messages") or []):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return str(m["content"])
    return None


def completion_of(r: UserRequest, prompt: str | list[int]) -> UserRequest:
    body = {k: v for k, v in r.body.items() if k not in ("messages", "chat_template_kwargs")}
    return with_body(r, body | {"prompt": prompt}, "completion")


def template_plan(sample: list[UserRequest], server: Server) -> Plan:
    """The chat requests of the sample where there are any, else its text completions."""
    chats = [r for r in sample if r.kind == "chat"]
    return chat_forms(chats, server) if chats else completion_forms(sample, server)


def no_template(exc: Refused | ServerFailed) -> Plan:
    return Plan("template", skipped=f"the server applies no chat template: {exc.message} ({exc.hint})")


def chat_forms(chats: list[UserRequest], server: Server) -> Plan:
    texts = [last_user_text(r) for r in chats]
    if any(t is None for t in texts):
        return Plan("template", skipped="a chat request has no text user turn to send raw")
    try:
        ids = [templated_ids(server, r) for r in chats]
    except (Refused, ServerFailed) as exc:
        return no_template(exc)
    raw = Arm("raw completion", [completion_of(r, str(t)) for r, t in zip(chats, texts, strict=True)])
    tokens = Arm("token ids", [completion_of(r, i) for r, i in zip(chats, ids, strict=True)])
    return Plan("template", Arm("chat template", chats), (raw, tokens))


def completion_forms(sample: list[UserRequest], server: Server) -> Plan:
    plain = [r for r in sample if isinstance(r.body.get("prompt"), str)]
    if not plain:
        return Plan("template", skipped="your requests are token ids: no text to template")
    try:
        templated_ids(server, UserRequest(0, "chat", {"messages": [{"role": "user", "content": "?"}]}))
    except (Refused, ServerFailed) as exc:
        return no_template(exc)
    chat = [
        with_body(
            r,
            {k: v for k, v in r.body.items() if k != "prompt"}
            | {"messages": [{"role": "user", "content": r.body["prompt"]}]},
            "chat",
        )
        for r in plain
    ]
    return Plan("template", Arm("raw completion", plain), (Arm("chat template", chat),))


def templated_ids(server: Server, r: UserRequest, kwargs: dict[str, Any] | None = None) -> list[int]:
    """The chat template's prompt for this request as the server tokenizes it (vLLM's /tokenize)."""
    body = {
        "model": server.model,
        "messages": r.body["messages"],
        "add_generation_prompt": True,
        "chat_template_kwargs": kwargs if kwargs is not None else r.body.get("chat_template_kwargs") or {},
    } | ({"tools": r.body["tools"]} if "tools" in r.body else {})  # the template renders the tools too
    return tokenized(server, body)


def tokenized(server: Server, body: dict[str, Any]) -> list[int]:
    """The server's /tokenize answer's token ids, or one line saying it gave none."""
    tokens = answer_field(server, "/tokenize", body, "tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        raise bad_answer(server, "/tokenize", "tokens")
    return tokens


def answer_field(server: Server, path: str, body: dict[str, Any], name: str) -> Any:
    answer = request(server.base, path, body)
    if not isinstance(answer, dict) or name not in answer:
        raise bad_answer(server, path, name)
    return answer[name]


def bad_answer(server: Server, path: str, name: str) -> EngineError:
    return EngineError(
        f"{server.base}{path} answered without its {name}: is this a vLLM server?",
        hint="point --endpoint at the vLLM server itself",
    )


def thinking_of(r: UserRequest) -> bool | None:
    kwargs = r.body.get("chat_template_kwargs") or {}
    value = kwargs.get("enable_thinking", kwargs.get("thinking")) if isinstance(kwargs, dict) else None
    return None if value is None else bool(value)


def thinking_plan(sample: list[UserRequest], server: Server) -> Plan:
    chats = [r for r in sample if r.kind == "chat"]
    if not chats:
        return Plan("thinking", skipped="your requests are completions: no chat template to switch")
    try:
        on, off = (templated_ids(server, chats[0], {"enable_thinking": v}) for v in (True, False))
        default = templated_ids(server, chats[0], {})
    except (Refused, ServerFailed) as exc:
        return Plan("thinking", skipped=f"the server applies no chat template: {exc.message}")
    if on == off:
        return Plan(
            "thinking",
            skipped="the chat template has no thinking switch (enable_thinking changes nothing in its prompt)",
        )

    def mode(r: UserRequest) -> bool:  # thinking as the template runs it for this request: its own, else the default
        sent = thinking_of(r)
        return sent if sent is not None else default == on

    user = mode(chats[0])
    chats = [r for r in chats if mode(r) == user]  # one mode in the base: the first request's

    def switched(r: UserRequest) -> UserRequest:
        kwargs = dict(r.body.get("chat_template_kwargs") or {})
        kwargs.pop("thinking", None)
        return with_body(r, r.body | {"chat_template_kwargs": kwargs | {"enable_thinking": not user}})

    name = f"thinking {'on' if user else 'off'}"
    other = f"thinking {'off' if user else 'on'}"
    return Plan("thinking", Arm(name, chats), (Arm(other, [switched(r) for r in chats]),))


def temperature_of(r: UserRequest) -> float | None:
    t = r.body.get("temperature")
    return None if t is None else float(t)


def temperature_plan(sample: list[UserRequest], server: Server) -> Plan:
    sampled = [r for r in sample if temperature_of(r) != 0.0]
    if not sampled:
        return Plan("temperature", skipped="your requests are greedy (temperature 0) already")
    greedy = [with_body(r, r.body | {"temperature": 0.0}) for r in sampled]
    return Plan("temperature", Arm("your temperature", sampled), (Arm("temperature 0", greedy),))


SCHEMA_KEYS = ("response_format", "structured_outputs", "guided_json", "guided_regex", "guided_choice")


def constrained(r: UserRequest) -> bool:
    fmt = r.body.get("response_format")
    return (isinstance(fmt, dict) and fmt.get("type") not in (None, "text")) or any(
        k in r.body for k in SCHEMA_KEYS[1:]
    )


def schema_plan(sample: list[UserRequest], server: Server) -> Plan:
    with_schema = [r for r in sample if constrained(r)]
    if not with_schema:
        return Plan("schema", skipped="your requests ask no response_format or structured output")
    free = [with_body(r, {k: v for k, v in r.body.items() if k not in SCHEMA_KEYS}) for r in with_schema]
    return Plan("schema", Arm("with your schema", with_schema), (Arm("without it", free),))


FILLER = 4  # characters a token, about: the filler is cut to its token count by the server's /tokenize


def context_plan(sample: list[UserRequest], server: Server, trained: int | None) -> Plan:
    """The base: the prompts led to the trained length; the variant: to twice it; below it, half of it (shown, not
    judged: the cause is the length past training)."""
    if trained is None:
        return Plan(
            "context",
            skipped="give --trained-length TOKENS (the drafter's training length, as its publisher states it) for "
            "the context ladder",
        )
    room = (server.max_model_len or 0) - max(int(r.body.get("max_tokens") or 0) for r in sample) - 8
    if 2 * trained > room:
        return Plan(
            "context",
            skipped=f"the server's context ({server.max_model_len or 'not said'} tokens) cannot hold a prompt of "
            f"twice the trained length ({trained}) and its answer",
        )
    texts = [r for r in sample if prompt_text(r)]
    if not texts:
        return Plan("context", skipped="your requests are token ids: no text to lengthen")
    filler = "\n\n".join(prompt_text(r) for r in texts)

    def rung(n: int) -> Arm:
        return Arm(f"{n} tokens", [lengthened(server, r, filler, n) for r in texts])

    return Plan("context", rung(trained), (rung(2 * trained),), confirms="lower", ladder=(rung(trained // 2),))


def prompt_text(r: UserRequest) -> str:
    p = r.body.get("prompt")
    return p if isinstance(p, str) else last_user_text(r) or ""


def lengthened(server: Server, r: UserRequest, filler: str, tokens: int) -> UserRequest:
    """The request led by filler text (the sample's own prompts, repeated) to about `tokens` prompt tokens."""
    text = prompt_text(r)
    have = len(tokenized(server, {"model": server.model, "prompt": text}))
    need = max(0, tokens - have)
    lead = (filler * (1 + need * FILLER // max(1, len(filler))))[: need * FILLER]
    lead_ids = tokenized(server, {"model": server.model, "prompt": lead, "add_special_tokens": False})[:need]
    lead_text = answer_field(server, "/detokenize", {"model": server.model, "tokens": lead_ids}, "prompt")
    if not isinstance(lead_text, str):
        raise bad_answer(server, "/detokenize", "prompt")
    longer = lead_text + "\n\n" + text
    if r.kind == "completion":
        return with_body(r, r.body | {"prompt": longer})
    messages = list(r.body["messages"])
    i = max(j for j, m in enumerate(messages) if m.get("role") == "user")
    messages[i] = messages[i] | {"content": longer}
    return with_body(r, r.body | {"messages": messages})


def cache_plan(sample: list[UserRequest], server: Server) -> Plan:
    salt = f"eaglezoo-probe-{random.SystemRandom().randrange(1 << 62):x}"
    cold = [with_body(r, r.body | {"cache_salt": salt}) for r in sample]
    return Plan(
        "cache",
        Arm("cold (prefix not cached)", cold),
        (Arm("warm (prefix cached)", cold),),
        confirms="lower",
        fresh=True,
    )


PLANNERS: dict[str, Callable[[list[UserRequest], Server, int | None], Plan]] = {
    "template": lambda s, v, _: template_plan(s, v),
    "thinking": lambda s, v, _: thinking_plan(s, v),
    "temperature": lambda s, v, _: temperature_plan(s, v),
    "schema": lambda s, v, _: schema_plan(s, v),
    "context": context_plan,
    "cache": lambda s, v, _: cache_plan(s, v),
}
