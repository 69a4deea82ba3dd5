"""The thinking mode verify records (issue 43): the switch each chat prompt sent, else the chat template's default,
found by rendering the template with the switch on and off; unknown where the template has no switch or the prompts
differ; none where no prompt went through a chat template."""

from __future__ import annotations

import pytest
from conftest import EXAMPLE

from eaglezoo.verify.prompting import thinking_mode
from eaglezoo.verify.workload import Prompt

TURN = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>"
ON_UNLESS_OFF = TURN + "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
OFF_UNLESS_ON = TURN + "{% if enable_thinking is defined and enable_thinking %}<think>{% endif %}"
IGNORED = TURN + "{# enable_thinking is named, and changes nothing #}"
REFUSES = TURN + "{% if enable_thinking is defined %}{{ raise_exception('no switch here') }}{% endif %}"
Q = "Describe the import system."


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(EXAMPLE / "target")


@pytest.mark.parametrize(
    "template,prompts,mode",
    [
        (ON_UNLESS_OFF, [Prompt(prompt=Q, chat=True)], "on"),
        (OFF_UNLESS_ON, [Prompt(prompt=Q, chat=True)], "off"),
        (ON_UNLESS_OFF, [Prompt(prompt=Q, chat=True, thinking=False)], "off"),
        (OFF_UNLESS_ON, [Prompt(prompt=Q, chat=True, thinking=True), Prompt(prompt=Q, chat=True, thinking=True)], "on"),
        (ON_UNLESS_OFF, [Prompt(prompt=Q, chat=True), Prompt(prompt=Q, chat=True, thinking=False)], "unknown"),
        (TURN, [Prompt(prompt=Q, chat=True)], "unknown"),
        (IGNORED, [Prompt(prompt=Q, chat=True)], "unknown"),
        (REFUSES, [Prompt(prompt=Q, chat=True)], "unknown"),
        (ON_UNLESS_OFF, [Prompt(prompt=Q), Prompt(prompt=Q, chat=True, thinking=False)], "off"),
        (ON_UNLESS_OFF, [Prompt(prompt=Q)], None),
        (None, [Prompt(prompt=Q, chat=True)], None),
    ],
    ids=[
        "template-default-on",
        "template-default-off",
        "switch-sent-off",
        "switch-sent-on",
        "prompts-differ",
        "template-without-switch",
        "switch-changes-nothing",
        "template-refuses-the-switch",
        "raw-rows-do-not-count",
        "raw-only",
        "no-template",
    ],
)
def test_the_thinking_mode_is_the_one_the_template_rendered(tokenizer, template, prompts, mode):
    tokenizer.chat_template = template
    assert thinking_mode(tokenizer, prompts) == mode
