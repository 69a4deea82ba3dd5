"""Whether and how a registry entry serves on llama.cpp b11434, with the evidence: llama.cpp's own list of the
EAGLE-3 drafters it supports, and eaglezoo's GGUF path (`eaglezoo convert --to gguf`, whose refusal reasons say why
llama.cpp cannot serve a drafter: serving.llamacpp_refusal). `registry check` holds the entries' `engines:` to it,
the listing and the site show it, and `registry plan` gives a llama.cpp verify job where it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..checkpoint.formats.gguf_dflash import NO_BLOCK, NO_MARKOV, NO_MASK
from ..names import FAMILIES_MEASURED
from ..serving import LLAMACPP_BUILD, LlamacppPath, llamacpp_refusal
from .schema import Entry

DOCS = "docs/speculative.md"
# llama.cpp b11434's docs/speculative.md:35-51: "Supported EAGLE-3 draft models include:", one drafter a line, 15 in
# all (tests/unit/registry/test_llamacpp_list.py reads them from the source where it is unpacked).
LISTED: dict[str, int] = {
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B": 37,
    "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B": 38,
    "RedHatAI/gemma-4-31B-it-speculator.eagle3": 39,
    "RedHatAI/gemma-4-26B-A4B-it-speculator.eagle3": 40,
    "Tengyunw/qwen3_8b_eagle3": 41,
    "Tengyunw/qwen3_30b_moe_eagle3": 42,
    "AngelSlim/Qwen3-1.7B_eagle3": 43,
    "AngelSlim/Qwen3-4B_eagle3": 44,
    "AngelSlim/Qwen3-8B_eagle3": 45,
    "AngelSlim/Qwen3-14B_eagle3": 46,
    "AngelSlim/Qwen3-32B_eagle3": 47,
    "AngelSlim/Qwen3-a3B_eagle3": 48,
    "RedHatAI/gpt-oss-20b-speculator.eagle3": 49,
    "lmsys/EAGLE3-gpt-oss-120b-bf16": 50,
    "nvidia/gpt-oss-120b-Eagle3-long-context": 51,
}

LlamacppState = Literal["listed", "converts", "aux ids unknown", "config unread", "no path"]
# what a block drafter's entry leaves unread (its config's block and mask token, its tensors): convert --to gguf reads
# them from the drafter's own files, as `verify --engine llamacpp` runs it, and refuses there if llama.cpp cannot
# serve it
UNREAD = (NO_BLOCK, NO_MASK, NO_MARKOV)


@dataclass(frozen=True)
class LlamacppServing:
    """An entry on llama.cpp: `listed` (llama.cpp names the drafter among those it supports; eaglezoo's path
    converts it), `converts` (not listed; eaglezoo's GGUF path writes it), `aux ids unknown` (the entry does not
    know the taps, and llama.cpp's converter would bake its default in their place), `config unread` (a DFlash or
    DSpark entry that has not read what convert reads from the drafter's files: `why`) or `no path` (`why`)."""

    state: LlamacppState
    evidence: str
    why: str | None = None

    @property
    def serves(self) -> bool:
        return self.state in ("listed", "converts")


def listed_at(entry: Entry) -> int | None:
    """The line of llama.cpp's docs/speculative.md that names this entry's drafter, if one does."""
    return LISTED.get(entry.drafter.repo or "")


def llamacpp_serving(entry: Entry) -> LlamacppServing:
    why = llamacpp_refusal(LlamacppPath(entry.spec(), entry.dialect, {}, None))
    line = listed_at(entry)
    listed = f"llama.cpp {LLAMACPP_BUILD} {DOCS}:{line} lists {entry.drafter.repo} among its EAGLE-3 drafters"
    if why is None:
        if line is not None:
            return LlamacppServing("listed", listed)
        return LlamacppServing("converts", "eaglezoo convert --to gguf writes it (not in llama.cpp's list)")
    refused = f"eaglezoo convert --to gguf refuses it: {why}"
    if why in UNREAD:
        return LlamacppServing("config unread", f"convert --to gguf reads it from the drafter's files: {why}", why)
    if entry.spec().aux is None and entry.family == "eagle3" and "aux ids are unknown" in why:
        return LlamacppServing("aux ids unknown", listed if line is not None else refused, why)
    return LlamacppServing("no path", refused, why)


def llamacpp_problems(entry: Entry) -> list[str]:
    """The entry's `engines: llamacpp` against the evidence: stated where llama.cpp lists the drafter, never where
    eaglezoo's GGUF path refuses it for what the drafter is."""
    declared = any(e.engine == "llamacpp" for e in entry.engines)
    s = llamacpp_serving(entry)
    line = listed_at(entry)
    if line is not None and not declared:
        return [
            f"engines: llama.cpp {LLAMACPP_BUILD} lists this drafter ({DOCS}:{line}); add `- engine: llamacpp` "
            "with that evidence in its notes"
        ]
    if declared and s.state == "no path":
        return [f"engines.llamacpp: llama.cpp {LLAMACPP_BUILD} cannot serve this drafter: {s.why}"]
    return []


def has_llamacpp_job(entry: Entry) -> bool:
    """Whether `registry plan` gives the entry a `verify --engine llamacpp` job: it states llama.cpp among its
    engines, and verify measures its family there (names.FAMILIES_MEASURED)."""
    return any(e.engine == "llamacpp" for e in entry.engines) and entry.family in FAMILIES_MEASURED["llamacpp"]
