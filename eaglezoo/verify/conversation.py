"""Multi-turn rows (the robustness suite's `multi-turn`): a row with earlier user turns is measured on its last
turn, after the target has answered each earlier one itself, as in a real conversation (and in EAGLE's MT-bench
evaluation, whose turn 2 follows the model's own turn-1 answer).

Turn by turn, the rows still waiting for an answer go through the engine that measures (its greedy, or sampled,
continuation is the target's own answer), cut at the target's first end token, decoded and put in the chat
template; then the next turn is encoded. A conversation that outgrows the context is skipped and reported."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from ..errors import UsageError
from .prompt_set import Skipped
from .prompting import encode_one, load_tokenizer
from .workload import Measurement, Workload

Answer = Callable[[Workload], Measurement]  # one engine run over a sub-workload


def converse(work: Workload, answer: Answer, engine: str) -> Workload:
    """The workload with every conversation encoded up to its measured turn, and the target's answers kept."""
    answers = {j: [] for j, p in enumerate(work.prompts) if p.history}
    if not answers:
        return work
    tokenizer = load_tokenizer(work.target_dir, work.trust_remote_code)
    ends, extra, context, dropped = end_tokens(tokenizer, work), work.max_new_tokens + work.k, work.context, {}
    encoded = list(work.encoded)  # the caller's workload stays as it was
    while pending := [
        j for j, said in answers.items() if j not in dropped and len(said) < len(work.prompts[j].history)
    ]:
        asked = answer(
            replace(
                work,
                prompts=[work.prompts[j] for j in pending],
                encoded=[encoded[j] for j in pending],
                indices=[work.indices[j] for j in pending],
                skipped=[],
                notes=[],
            )
        )
        for j, tokens in zip(pending, asked.tokens, strict=True):
            answers[j].append(reply(tokenizer, tokens[: work.max_new_tokens], ends))
            encoded[j] = encode_one(tokenizer, work.prompts[j], answers[j])
            if len(encoded[j]) + extra > context:
                dropped[j] = (
                    f"the conversation grew to {len(encoded[j])} tokens after the target's answer to "
                    f"turn {len(answers[j])}; + {extra} new and draft tokens exceed the context of {context}"
                )
    kept = [j for j in range(len(work.prompts)) if j not in dropped]
    if not kept:
        raise UsageError(
            f"no prompt can be measured here: {next(iter(dropped.values()))}",
            hint="give shorter conversations, a smaller --max-new-tokens or a larger --max-model-len",
        )
    skipped = work.skipped + [
        Skipped(index=work.indices[j], bucket=work.prompts[j].bucket, reason=why) for j, why in dropped.items()
    ]
    turns = sum(len(answers[j]) for j in answers)
    note = (
        f"multi-turn: {len(answers)} conversation(s), measured on their last turn after the target answered "
        f"{turns} earlier turn(s) itself on the {engine} engine (up to its end token or {work.max_new_tokens} "
        "tokens; each answer is in per_prompt)"
    )
    return replace(
        work,
        prompts=[work.prompts[j] for j in kept],
        encoded=[encoded[j] for j in kept],
        indices=[work.indices[j] for j in kept],
        skipped=sorted(skipped, key=lambda s: s.index),
        notes=work.notes + [note],
        answers={work.indices[j]: said for j, said in answers.items() if j not in dropped},
    )


def reply(tokenizer, tokens: list[int], ends: set[int]) -> str:
    """The target's answer: its continuation up to its first end token, as text."""
    cut = next((n for n, t in enumerate(tokens) if t in ends), len(tokens))
    return tokenizer.decode(tokens[:cut], skip_special_tokens=True).strip()


def end_tokens(tokenizer, work: Workload) -> set[int]:
    """What ends a turn: the tokenizer's end token and the target's generation_config's (a chat model often
    ends its turns with a token of its own, e.g. <|im_end|>)."""
    ends = {tokenizer.eos_token_id} - {None}
    path = work.target_dir / "generation_config.json"
    try:
        stated = json.loads(path.read_text()).get("eos_token_id") if path.is_file() else None
    except (OSError, ValueError, AttributeError):
        stated = None
    return ends | {t for t in (stated if isinstance(stated, list) else [stated]) if isinstance(t, int)}
