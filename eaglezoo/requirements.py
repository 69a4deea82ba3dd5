"""What a drafter needs of its server and its workload, as its publisher's card or config states it (issue 43,
item 4): the chat route, the target's thinking mode, the context and temperature it was trained at, the least
engine release per engine (with why), and the K it recommends. Each is null where no source says it (never
guessed), and each stated one names its source. The registry keeps them on an entry (`requirements:`), `convert`
writes them into `conversion.json` (REQUIREMENTS_KEY) and `push` into the card; `serve-config` serves the
recommended K on the chat route, and `doctor` names each one the server or the workload breaks (`broken`)."""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .engine_versions import release
from .names import ThinkingMode

REQUIREMENTS_KEY = "requirements"  # conversion.json's block (docs/commands/convert-lint.md)
CHAT_ROUTE, COMPLETIONS_ROUTE = "/v1/chat/completions", "/v1/completions"
STATED = ("chat_endpoint", "thinking", "context_length", "temperature", "recommended_k")
RequirementEngine = Literal["vllm", "sglang", "tensorrt-llm", "llamacpp"]


def on_off(value: object) -> object:
    """YAML 1.1 reads an unquoted on/off (and yes/no, true/false) as a boolean: thinking on/off either way."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class EngineRequirement(BaseModel):
    """The least release of one engine the drafter needs, why (the fix it needs), and where that is said."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: RequirementEngine
    min_version: str
    reason: str = Field(min_length=1)
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def parses(self) -> Self:
        if engine_release(self.engine, self.min_version) is None:
            like = "b11434, a build number" if self.engine == "llamacpp" else "0.10.1"
            raise ValueError(f"{self.engine} min_version {self.min_version!r} is not a release (like {like})")
        return self


def engine_release(engine: str, version: str) -> tuple[int, ...] | None:
    """A release as numbers: llama.cpp's a build number (`b11434`, `11434`), the others' N.N[.N] (engine_versions)."""
    if engine == "llamacpp":
        match = re.fullmatch(r"b?(\d{1,7})", version.strip())
        return (int(match[1]),) if match else None
    return release(version)


class Requirements(BaseModel):
    """`source` names where the publisher states every field that has no source of its own in `sources`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat_endpoint: bool | None = None  # true: trained on chat-templated prompts (CHAT_ROUTE); false: raw text
    thinking: ThinkingMode | None = None  # the target's thinking mode the drafter was trained for
    context_length: int | None = Field(None, ge=1)  # the context the drafter was trained at
    temperature: float | None = Field(None, ge=0)  # the sampling temperature its training data was generated at
    recommended_k: int | None = Field(None, ge=1)  # the K its publisher recommends (or its config proposes)
    engines: list[EngineRequirement] = Field(default_factory=list)
    source: str | None = Field(None, min_length=1)
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("thinking", mode="before")
    @classmethod
    def yaml_on_off(cls, value: object) -> object:
        return on_off(value)

    @model_validator(mode="after")
    def stated_with_source(self) -> Self:
        stray = sorted(set(self.sources) - set(STATED))
        if stray:
            raise ValueError(f"requirements.sources names {', '.join(stray)}: only {', '.join(STATED)} have sources")
        bare = [f for f in STATED if getattr(self, f) is not None and self.source_of(f) is None]
        if bare:
            raise ValueError(
                f"requirements.{bare[0]} needs its source (the card or config that states it): add "
                f"requirements.sources.{bare[0]}, or requirements.source"
            )
        engines = [e.engine for e in self.engines]
        if len(set(engines)) != len(engines):
            raise ValueError("requirements.engines names an engine twice: one least release per engine")
        return self

    def source_of(self, name: str) -> str | None:
        return self.sources.get(name, self.source)

    def stated(self) -> dict[str, object]:
        return {f: getattr(self, f) for f in STATED if getattr(self, f) is not None}

    @property
    def empty(self) -> bool:
        return not self.stated() and not self.engines

    @property
    def route(self) -> str | None:
        if self.chat_endpoint is None:
            return None
        return CHAT_ROUTE if self.chat_endpoint else COMPLETIONS_ROUTE

    def floor(self, engine: str) -> EngineRequirement | None:
        return next((e for e in self.engines if e.engine == engine), None)

    def block(self) -> dict[str, object]:
        """conversion.json's `requirements` block: every field, null where no source states it, and the sources."""
        return {
            **{f: getattr(self, f) for f in STATED},
            "route": self.route,
            "engines": [e.model_dump() for e in self.engines],
            "sources": {f: self.source_of(f) for f in self.stated()},
        }

    def lines(self) -> list[str]:
        """Each stated requirement in words, with its source: the card's list and serve-config's notes."""
        words = {
            "chat_endpoint": lambda v: (
                f"prompts in the chat template ({self.route})" if v else f"raw prompts ({self.route})"
            ),
            "thinking": lambda v: f"the target's thinking mode {v}",
            "context_length": lambda v: f"trained at a context of {v} tokens",
            "temperature": lambda v: f"trained on text sampled at temperature {v:g}",
            "recommended_k": lambda v: f"K={v} recommended",
        }
        out = [f"{words[f](v)} ({self.source_of(f)})" for f, v in self.stated().items()]
        return out + [f"{e.engine} {e.min_version} or later: {e.reason} ({e.source})" for e in self.engines]


def broken(
    req: Requirements,
    *,
    engine: str,
    version: str | None = None,
    k: int | None = None,
    context: int | None = None,
) -> list[str]:
    """Each requirement the server breaks (its engine's /version, served K and context), in words, with the
    requirement's source. The trained temperature is not held to a workload: doctor and verify measure greedy."""
    out: list[str] = []
    floor = req.floor(engine)
    served = engine_release(engine, version) if version else None
    if floor is not None and served is not None and served < (engine_release(engine, floor.min_version) or ()):
        out.append(
            f"the server's {engine} {version} is below the drafter's least release {floor.min_version}: "
            f"{floor.reason} ({floor.source})"
        )
    if req.recommended_k is not None and k is not None and k != req.recommended_k:
        out.append(
            f"the server drafts K={k}; the drafter's recommended K is {req.recommended_k} "
            f"({req.source_of('recommended_k')})"
        )
    if req.context_length is not None and context is not None and context > req.context_length:
        out.append(
            f"the server's context ({context} tokens) is beyond the {req.context_length} the drafter was trained "
            f"at: acceptance falls past it ({req.source_of('context_length')})"
        )
    return out
