"""`verify --suite standard`: MT-bench's 80 first turns (by category) and HumanEval's 164 prompts, shipped with
their licences and their provenance, measured per bucket; the target's chat template applied when it has one."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter

import pytest
from conftest import EXAMPLE, ROOT, assert_clean_failure, run_inprocess
from support.chat import greedy_answer, templated_target

SUITES = ROOT / "eaglezoo" / "data" / "suites"
CATEGORIES = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}


def test_the_suite_ships_with_its_licences_and_provenance():
    rows = [json.loads(line) for line in (SUITES / "standard.jsonl").read_text().splitlines()]
    buckets = Counter(r["bucket"] for r in rows)
    assert buckets == {**{c: 10 for c in CATEGORIES}, "humaneval": 164}
    assert all(r["chat"] is True and r["prompt"].strip() for r in rows)
    readme = (SUITES / "README.md").read_text()
    digest = re.search(r"sha256 of the file: `([0-9a-f]{64})`", readme).group(1)
    assert hashlib.sha256((SUITES / "standard.jsonl").read_bytes()).hexdigest() == digest
    assert "Apache License" in (SUITES / "licenses" / "mt-bench-LICENSE").read_text()
    assert "MIT" in (SUITES / "licenses" / "humaneval-LICENSE").read_text()
    package_data = (ROOT / "pyproject.toml").read_text()
    assert '"data/suites/*.jsonl"' in package_data and '"data/suites/licenses/*"' in package_data


def test_verify_measures_the_suite_per_category():
    r = run_inprocess(
        "verify", "tiny-example-eagle31", "--suite", "standard", "--max-new-tokens", "16", "--min-al", "1", "--json"
    )
    assert r.code == 0, r.err
    report = r.json()
    assert report["num_prompts"] == 244
    assert set(report["drift"]["mean_acceptance_length_by_bucket"]) == CATEGORIES | {"humaneval"}
    assert "244 chat prompt(s) as raw text: the target's tokenizer has no chat template" in report["notes"]


def test_a_target_with_a_chat_template_gets_the_prompts_in_it(tmp_path):
    target = shutil.copytree(EXAMPLE / "target", tmp_path / "target")
    config = json.loads((target / "tokenizer_config.json").read_text())
    config["chat_template"] = "{% for m in messages %}<|user|>{{ m['content'] }}\n{% endfor %}<|assistant|>"
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    args = [
        "tiny-example-eagle31",
        "--suite",
        "standard",
        "--max-prompts",
        "3",
        "--max-new-tokens",
        "8",
        "--min-al",
        "1",
        "--json",
    ]
    templated = run_inprocess("verify", *args, "--target", target)
    assert templated.code == 0, templated.err
    assert "3 chat prompt(s) in the target's chat template" in templated.json()["notes"]


def test_bad_suite_requests():
    assert_clean_failure(
        run_inprocess("verify", "tiny-example-eagle31", "--suite", "nope"), None, contains="unknown suite"
    )
    r = run_inprocess("verify", "tiny-example-eagle31", "--suite", "standard", "--prompts", EXAMPLE / "prompts.jsonl")
    assert_clean_failure(r, None, contains="--prompts and --suite")


ROBUST_MEASURED = ["template", "no-template", "markers:llama3", "markers:vicuna", "context:512"]
THINKING_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
)


def test_the_robustness_suite_is_built_from_the_standard_one():
    standard = {r["source"]: r for r in map(json.loads, (SUITES / "standard.jsonl").read_text().splitlines())}
    rows = [json.loads(line) for line in (SUITES / "robustness.jsonl").read_text().splitlines()]
    assert {r["category"] for r in rows} == CATEGORIES
    assert all(r["prompt"] == standard[r["source"]]["prompt"] for r in rows if r["bucket"] == "template")
    asked = [r for r in rows if r["bucket"] != "multi-turn"]
    assert all(standard[r["source"]]["prompt"] in r["prompt"] for r in asked)
    for r in (r for r in rows if r["bucket"] == "multi-turn"):  # MT-bench's turn 2, after its turn 1
        assert (r["history"], r["prompt"]) == ([standard[r["source"]]["prompt"]], standard[r["source"]]["turn_2"])
    assert all(r["temperature"] == 1.0 for r in rows if r["bucket"] == "temperature:1")
    per_condition = Counter(r["bucket"] for r in rows)
    assert per_condition["template"] == per_condition["thinking:off"] == per_condition["multi-turn"] == 8
    assert per_condition["temperature:1"] == 8 and per_condition["context:32768"] == 4


def test_each_condition_is_measured_with_its_interval_or_skipped_with_its_reason(tmp_path):
    """The tiny target has no chat template and a context of 1024: the system-prompt and thinking conditions and
    the rungs above 512 cannot be run, and say why; nothing is truncated. (One run: the text on stdout, the report
    in its file.)"""
    shown = run_inprocess(
        "verify",
        "tiny-example-eagle31",
        "--suite",
        "robustness",
        "--max-new-tokens",
        "24",
        "--min-al",
        "1",
        "--report",
        tmp_path / "r.json",
    )
    assert shown.code == 0, shown.err
    report = json.loads((tmp_path / "r.json").read_text())
    drift = report["drift"]
    assert list(drift["mean_acceptance_length_by_bucket"]) == ROBUST_MEASURED  # the suite's order
    for condition, al in drift["mean_acceptance_length_by_bucket"].items():
        lo, hi = drift["mean_acceptance_length_interval_by_bucket"][condition]
        assert lo <= al <= hi and lo < hi, condition
    lo, hi = report["mean_acceptance_length_interval"]
    assert lo < report["mean_acceptance_length"] < hi
    reasons = {s["bucket"]: s["reason"] for s in report["skipped_prompts"]}
    assert reasons["system:brief"] == "a system message needs the target's chat template, and it has none"
    assert reasons["thinking:on"].startswith("the target's chat template has no thinking switch")
    assert "exceed the context of 1024" in reasons["context:1024"] and "context:512" not in reasons
    assert reasons["multi-turn"] == "a conversation needs the target's chat template, and it has none"
    assert reasons["temperature:1"].startswith("the native engine measures greedy acceptance only")
    assert report["num_prompts"] + len(report["skipped_prompts"]) == 108
    assert "skipped 8 prompt(s) of thinking:on: the target's chat template" in shown.out  # no emoji from ":on:"


def test_system_prompts_and_the_thinking_switch_reach_the_template(tmp_path):
    target = shutil.copytree(EXAMPLE / "target", tmp_path / "target")
    config = json.loads((target / "tokenizer_config.json").read_text())
    config["chat_template"] = THINKING_TEMPLATE
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    prompts = tmp_path / "p.jsonl"
    question = "Describe the import system."
    prompts.write_text(
        "".join(
            json.dumps(row) + "\n"
            for row in [
                {"prompt": question, "chat": True, "bucket": "plain"},
                {"prompt": question, "chat": True, "bucket": "system", "system": "Answer in French."},
                {"prompt": question, "chat": True, "bucket": "thinking:off", "thinking": False},
                {"prompt": question, "chat": True, "bucket": "context:300", "context": 300},
            ]
        )
    )
    r = run_inprocess(
        "verify",
        "tiny-example-eagle31",
        "--target",
        target,
        "--prompts",
        prompts,
        "--max-new-tokens",
        "8",
        "--min-al",
        "1",
        "--json",
    )
    assert r.code == 0, r.err
    report = r.json()
    assert not report["skipped_prompts"] and report["num_prompts"] == 4
    assert {p["bucket"] for p in report["per_prompt"]} == {"plain", "system", "thinking:off", "context:300"}
    assert report["thinking"] == "unknown"  # the template thinks unless told not to, and one row tells it not to


def test_each_condition_renders_as_the_template_makes_it():
    from transformers import AutoTokenizer

    from eaglezoo.verify.prompting import document_ids, encode
    from eaglezoo.verify.workload import Prompt

    tok = AutoTokenizer.from_pretrained(EXAMPLE / "target")
    tok.chat_template = THINKING_TEMPLATE
    q = "Describe the import system."
    prompts = [
        Prompt(prompt=q, chat=True),
        Prompt(prompt=q, chat=True, system="Answer in French."),
        Prompt(prompt=q, chat=True, thinking=False),
        Prompt(prompt=q, chat=True, context=300),
        Prompt(prompt=q),
    ]
    encoded, skipped, _ = encode(tok, prompts)
    doc = tok.decode(document_ids(tok)[:300])
    expected = [
        f"<|user|>{q}\n<|assistant|>",
        f"<|system|>Answer in French.\n<|user|>{q}\n<|assistant|>",
        f"<|user|>{q}\n<|assistant|><think></think>",
        f"<|user|>{doc}\n\n{q}\n<|assistant|>",
        q,
    ]
    assert not skipped
    assert encoded == [tok(text, add_special_tokens=False)["input_ids"] for text in expected]
    assert len(tok(doc, add_special_tokens=False)["input_ids"]) in range(295, 306)  # 300 tokens, give or take a merge


def test_a_condition_floor_from_the_registry_is_checked(tmp_path):
    (tmp_path / "registry").mkdir()
    shutil.copytree(EXAMPLE, tmp_path / "examples" / "tiny")
    entry = tmp_path / "registry" / "tiny-example-eagle31.yaml"
    text = (
        (ROOT / "registry" / entry.name)
        .read_text()
        .replace(
            "acceptance_floors:\n",
            "acceptance_floors:\n- k: 3\n  temperature: 0.0\n"
            "  condition: markers:vicuna\n  mean_acceptance_length: 3.9\n  source: a test\n"
            "- k: 3\n  temperature: 0.0\n  condition: thinking:on\n"
            "  mean_acceptance_length: 1.5\n  source: a test\n",
            1,
        )
    )
    entry.write_text(text)
    r = run_inprocess(
        "verify",
        "tiny-example-eagle31",
        "--suite",
        "robustness",
        "--max-new-tokens",
        "16",
        "--min-acceptance",
        "0",
        "--registry",
        tmp_path / "registry",
        "--json",
    )
    report = r.json()
    assert r.code == 1
    assert [f for f in report["failures"] if f.startswith("condition")] == [
        f"condition markers:vicuna: acceptance length "
        f"{report['drift']['mean_acceptance_length_by_bucket']['markers:vicuna']:.3f} < 3.9"
    ]
    assert "no prompt of condition thinking:on was measured: its floor (1.5) was not checked" in report["notes"]


def test_prompts_the_target_cannot_take_at_all_are_one_line(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "hi", "chat": True, "system": "be brief"}) + "\n")
    r = run_inprocess("verify", "tiny-example-eagle31", "--prompts", prompts)
    assert_clean_failure(
        r, None, contains="no prompt can be measured here: a system message needs the target's chat template"
    )


def test_a_conversation_is_measured_after_the_targets_own_answers(tmp_path):
    """Turn 2 (and 3) follow the target's own greedy answers, in its chat template; the answers are reported."""
    from transformers import AutoTokenizer

    target, prompts = templated_target(tmp_path), tmp_path / "p.jsonl"
    q1, q2, q3 = "Describe the import system.", "Now say it in fewer words.", "And the module cache?"
    prompts.write_text(
        "".join(
            json.dumps(row) + "\n"
            for row in [
                {"prompt": q1, "chat": True, "bucket": "turn 1"},
                {"prompt": q2, "chat": True, "bucket": "multi-turn", "history": [q1]},
                {"prompt": q3, "chat": True, "bucket": "three turns", "history": [q1, q2]},
            ]
        )
    )
    r = run_inprocess(
        "verify",
        "tiny-example-eagle31",
        "--target",
        target,
        "--prompts",
        prompts,
        "--max-new-tokens",
        "12",
        "--min-al",
        "1",
        "--json",
    )
    assert r.code == 0, r.err
    report = r.json()
    one, two, three = report["per_prompt"]
    a1 = greedy_answer(target, [{"role": "user", "content": q1}], 12)
    a2 = greedy_answer(
        target,
        [{"role": "user", "content": q1}, {"role": "assistant", "content": a1}, {"role": "user", "content": q2}],
        12,
    )
    assert one["answers"] is None and two["answers"] == [a1] and three["answers"] == [a1, a2]
    tok = AutoTokenizer.from_pretrained(target)
    conversation = tok.apply_chat_template(
        [{"role": "user", "content": q1}, {"role": "assistant", "content": a1}, {"role": "user", "content": q2}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert two["prompt_tokens"] == len(tok(conversation, add_special_tokens=False)["input_ids"])
    assert all(p["accepted"] for p in (one, two, three))
    assert any("multi-turn: 2 conversation(s)" in n and "3 earlier turn(s)" in n for n in report["notes"])


def test_a_conversation_that_outgrows_the_context_is_skipped_with_its_reason(tmp_path):
    target, prompts = templated_target(tmp_path), tmp_path / "p.jsonl"
    long = " ".join(["module"] * 900)  # turn 1 fits the 1024-token context; after a 64-token answer, turn 2 does not
    prompts.write_text(
        "".join(
            json.dumps(row) + "\n"
            for row in [
                {"prompt": "Describe the import system.", "chat": True},
                {"prompt": "Go on.", "chat": True, "bucket": "multi-turn", "history": [long]},
            ]
        )
    )
    r = run_inprocess(
        "verify",
        "tiny-example-eagle31",
        "--target",
        target,
        "--prompts",
        prompts,
        "--max-new-tokens",
        "64",
        "--min-al",
        "1",
        "--json",
    )
    assert r.code == 0, r.err
    (skipped,) = r.json()["skipped_prompts"]
    assert skipped["index"] == 1 and "the conversation grew to" in skipped["reason"]
    assert "exceed the context of 1024" in skipped["reason"] and r.json()["num_prompts"] == 1
    alone = tmp_path / "alone.jsonl"
    alone.write_text(prompts.read_text().splitlines()[1] + "\n")
    r = run_inprocess(
        "verify", "tiny-example-eagle31", "--target", target, "--prompts", alone, "--max-new-tokens", "64"
    )
    assert_clean_failure(r, None, contains="no prompt can be measured here: the conversation grew to")


@pytest.mark.parametrize(
    "row,message",
    [
        ({"prompt": "q", "history": ["earlier"]}, "a row with a 'history' is a conversation and needs \"chat\": true"),
        ({"prompt": "q", "chat": True, "history": "earlier"}, "'history' must be a list of strings"),
        ({"prompt": "q", "chat": True, "history": [""]}, "'history' must be a list of strings"),
        ({"prompt": "q", "temperature": "hot"}, "'temperature' must be a number from 0 to 100"),
        ({"prompt": "q", "temperature": 101}, "'temperature' must be a number from 0 to 100"),
        ({"prompt": "q", "system": "be terse"}, "a row with a 'system' is a chat message and needs \"chat\": true"),
        ({"prompt": "q", "thinking": False}, "a row with a 'thinking' is a chat message and needs \"chat\": true"),
        ({"prompt": "q", "chat": "true"}, "'chat' must be true or false"),
        ({"prompt": "q", "chat": 1}, "'chat' must be true or false"),
        ({"prompt": "q", "bucket": None}, "'bucket' must be a string"),
        ({"prompt": "q", "bucket": {"a": 1}}, "'bucket' must be a string"),
    ],
    ids=[
        "history-without-chat",
        "history-not-a-list",
        "empty-turn",
        "temperature-not-a-number",
        "temperature-101",
        "system-without-chat",
        "thinking-without-chat",
        "chat-a-string",
        "chat-a-number",
        "bucket-null",
        "bucket-an-object",
    ],
)
def test_bad_conversation_and_temperature_rows_are_one_line(tmp_path, row, message):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps(row) + "\n")
    assert_clean_failure(run_inprocess("verify", "tiny-example-eagle31", "--prompts", prompts), None, contains=message)
