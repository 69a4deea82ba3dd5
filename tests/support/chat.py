"""The example's target with a chat template, and its own greedy answer as transformers generates it alone."""

from __future__ import annotations

import json
import shutil

from conftest import EXAMPLE

CHAT_TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>"


def templated_target(tmp_path):
    target = shutil.copytree(EXAMPLE / "target", tmp_path / "target")
    config = json.loads((target / "tokenizer_config.json").read_text())
    config["chat_template"] = CHAT_TEMPLATE
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    return target


def greedy_answer(target, messages: list[dict], n: int) -> str:
    """The target's own answer, by transformers' generate alone: up to its end token or n tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(target), AutoModelForCausalLM.from_pretrained(target)
    ids = tok(
        tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
        return_tensors="pt",
    )["input_ids"]
    with torch.inference_mode():
        new = model.generate(ids, max_new_tokens=n, do_sample=False, eos_token_id=None)[0, ids.shape[1] :].tolist()
    ends = {tok.eos_token_id, model.generation_config.eos_token_id}
    return tok.decode(
        new[: next((i for i, t in enumerate(new) if t in ends), len(new))], skip_special_tokens=True
    ).strip()
