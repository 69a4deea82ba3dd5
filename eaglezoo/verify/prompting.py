"""The target's tokenizer, and how each prompt becomes the target's token ids, as a server would build them: a user
message in the target's chat template (with a system message and the thinking switch where asked), raw text
otherwise, and a long document of an exact length in target tokens before the question (the robustness suite's
context ladder). A conversation (a row with earlier user turns) is encoded up to the turn the target answers next
(`conversation.py` has it answer them). A condition the target cannot take (a system message without a chat
template; a thinking switch the template does not have) is skipped and reported, never measured as something else."""

from __future__ import annotations

import functools
import weakref
from pathlib import Path
from pydoc_data.topics import topics

from jinja2 import TemplateError

from ..errors import UsageError, first_line
from ..names import Thinking
from .prompt_set import Skipped
from .workload import Prompt

DOCUMENT = "CPython's pydoc_data topics (PSF licence), shipped with every Python"


def encode(tokenizer, prompts: list[Prompt]) -> tuple[list[list[int] | None], list[Skipped], list[str]]:
    """Token ids per prompt (None where skipped; a conversation up to its first turn), the skipped prompts with
    their reasons, and notes."""
    template = getattr(tokenizer, "chat_template", None) or ""
    chats = sum(p.chat for p in prompts)
    encoded: list[list[int] | None] = []
    skipped: list[Skipped] = []
    for n, p in enumerate(prompts):
        reason = unfit(p, template)
        if reason is None and p.context is not None and len(document_ids(tokenizer)) < p.context:
            reason = f"the document has only {len(document_ids(tokenizer))} tokens, fewer than the {p.context} asked"
        if reason is not None:
            skipped.append(Skipped(index=n, bucket=p.bucket, reason=reason))
        encoded.append(None if reason else encode_one(tokenizer, p, []))
    notes = []
    if chats:
        notes.append(
            f"{chats} chat prompt(s) "
            + (
                "in the target's chat template"
                if template
                else "as raw text: the target's tokenizer has no chat template"
            )
        )
    if any(p.context for p in prompts):
        notes.append(f"context ladder: the question follows that many tokens of {DOCUMENT}")
    return encoded, skipped, notes


def encode_one(tokenizer, p: Prompt, answers: list[str]) -> list[int]:
    """The prompt's token ids after the target's `answers` to its first earlier turns."""
    template = bool(getattr(tokenizer, "chat_template", None))
    return tokenizer(text(tokenizer, p, template, answers), add_special_tokens=False)["input_ids"]


def thinking_mode(tokenizer, prompts: list[Prompt]) -> Thinking | None:
    """The thinking mode the chat prompts were rendered in: the switch each one sent, else the template's default,
    found by rendering the template with the switch on and off. `unknown` where the template has no switch (or the
    switch does not change the prompt), or where the prompts differ. None where no prompt went through a chat
    template: raw text sets no thinking switch."""
    template = getattr(tokenizer, "chat_template", None) or ""
    chats = [p for p in prompts if p.chat]
    if not (chats and template):
        return None
    plain = [p for p in chats if p.thinking is None]
    default = _template_default(tokenizer, plain[0], template) if plain else "unknown"
    modes = {default if p.thinking is None else ("on" if p.thinking else "off") for p in chats}
    return modes.pop() if len(modes) == 1 else "unknown"


def _template_default(tokenizer, p: Prompt, template: str) -> Thinking:
    if "enable_thinking" not in template:
        return "unknown"
    plain = text(tokenizer, p, True, [])
    try:
        on, off = (text(tokenizer, p.model_copy(update={"thinking": v}), True, []) for v in (True, False))
    except (TemplateError, ValueError):  # a template that refuses a switch it names: its default cannot be shown
        return "unknown"
    if on == off:
        return "unknown"
    return "on" if plain == on else "off" if plain == off else "unknown"


def unfit(p: Prompt, template: str) -> str | None:
    if p.history and not template:
        return "a conversation needs the target's chat template, and it has none"
    if p.system is not None and not template:
        return "a system message needs the target's chat template, and it has none"
    if p.thinking is not None and "enable_thinking" not in template:
        return "the target's chat template has no thinking switch (enable_thinking)"
    return None


def text(tokenizer, p: Prompt, template: bool, answers: list[str]) -> str:
    user = p.prompt if p.context is None else tokenizer.decode(document_ids(tokenizer)[: p.context]) + "\n\n" + p.prompt
    if not (p.chat and template):
        return user
    earlier = p.history or []
    messages = [{"role": "system", "content": p.system}] if p.system is not None else []
    for question, answer in zip(earlier, answers, strict=False):
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    messages.append({"role": "user", "content": earlier[len(answers)] if len(answers) < len(earlier) else user})
    switch = {} if p.thinking is None else {"enable_thinking": p.thinking}
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **switch)


@functools.cache
def _document() -> str:
    return "\n\n".join(topics[name] for name in sorted(topics))


_DOCUMENT_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per tokenizer: tokenised once


def document_ids(tokenizer) -> list[int]:
    if tokenizer not in _DOCUMENT_IDS:
        _DOCUMENT_IDS[tokenizer] = tokenizer(_document(), add_special_tokens=False)["input_ids"]
    return _DOCUMENT_IDS[tokenizer]


def load_tokenizer(path: Path, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    if not (path / "config.json").is_file():
        raise UsageError(
            f"target {path}: no config.json found",
            hint="name the target model's folder (with its config.json), or a Hub repo id",
        )
    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        raise load_error(f"target {path}: its tokenizer could not be loaded", exc) from None


def load_error(what: str, exc: Exception) -> UsageError:
    if "trust_remote_code" in str(exc):
        hint = "pass --trust-remote-code if you trust the code it ships"
    elif isinstance(exc, ImportError):
        hint = "install the package it names in eaglezoo's environment"
    else:
        hint = (
            "give a folder that transformers loads (config.json, tokenizer and weights) or its Hub repo id; "
            "a model type it does not know needs a newer transformers"
        )
    return UsageError(f"{what}: {first_line(exc)}", hint=hint)
