"""convert writes a drafter's declared requirements (issue 43, item 4): the `requirements` block of conversion.json
(null where no source states one) and speculators' proposal count, which vLLM reads as the default K, set to the
recommended K; the K a source config proposes is itself a requirement."""

from __future__ import annotations

import json

from conftest import assert_clean_failure, run_inprocess
from support import families as F
from support.requirements import CARD, REQUIREMENTS, declared


def mine(tmp_path, entry: str = "tiny-example-eagle3", requirements: dict = REQUIREMENTS):
    return declared(tmp_path, entry, requirements)


def test_convert_writes_the_requirements_block_and_the_recommended_k(tmp_path):
    registry = mine(tmp_path)
    r = run_inprocess("convert", "tiny-example-eagle3", tmp_path / "out", "--to", "speculators", "--registry", registry)
    assert r.code == 0, r.err
    block = json.loads((tmp_path / "out" / "conversion.json").read_text())["requirements"]
    assert block["chat_endpoint"] is True and block["route"] == "/v1/chat/completions"
    assert block["thinking"] == "off" and block["recommended_k"] == 2 and block["context_length"] == 1024
    assert block["temperature"] is None  # no source states it: null, never guessed
    assert block["engines"] == REQUIREMENTS["engines"] and block["sources"]["recommended_k"] == CARD
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert [m["speculative_tokens"] for m in config["speculators_config"]["proposal_methods"]] == [2]


def test_without_requirements_the_block_is_null(tmp_path):
    assert run_inprocess("convert", "tiny-example-eagle3", tmp_path / "out").code == 0
    block = json.loads((tmp_path / "out" / "conversion.json").read_text())["requirements"]
    assert block["recommended_k"] is None and block["chat_endpoint"] is None and block["engines"] == []


def test_the_k_a_source_config_proposes_is_carried_as_a_requirement(tmp_path):
    run_inprocess("convert", F.deepspec_dspark(tmp_path / "n", block_size=5), tmp_path / "s", "--to", "speculators")
    r = run_inprocess("convert", tmp_path / "s", tmp_path / "again", "--to", "speculators")
    assert r.code == 0, r.err
    block = json.loads((tmp_path / "again" / "conversion.json").read_text())["requirements"]
    assert block["recommended_k"] == 5 and "speculative_tokens" in block["sources"]["recommended_k"]


def test_a_recommended_k_beyond_the_block_is_refused(tmp_path):
    """A DSpark drafter of block_size 7 drafts at most 7 tokens a step: a K of 9 is the K-beyond-block trap."""
    registry = mine(tmp_path, "deepspec-dspark-qwen3-4b-block7", {"recommended_k": 9, "source": CARD})
    r = run_inprocess("serve-config", "deepspec-dspark-qwen3-4b-block7", "--registry", registry)
    assert_clean_failure(r, None, contains="K=9")


def test_serve_config_serves_the_recommended_k_on_the_chat_route(tmp_path):
    registry = mine(tmp_path)
    r = run_inprocess("serve-config", "tiny-example-eagle3", "--registry", registry, "--json")
    assert r.code == 0, r.err
    sc = r.json()
    assert sc["num_speculative_tokens"] == 2 and sc["speculative_config"]["num_speculative_tokens"] == 2
    assert sc["route"] == "/v1/chat/completions"
    assert any("the target's thinking mode off" in n and CARD in n for n in sc["notes"]), sc["notes"]
    asked = run_inprocess("serve-config", "tiny-example-eagle3", "--registry", registry, "-k", "4", "--json").json()
    assert asked["num_speculative_tokens"] == 4
    assert any("-k 4 is not the drafter's recommended K=2" in n for n in asked["notes"]), asked["notes"]
    text = run_inprocess("serve-config", "tiny-example-eagle3", "--registry", registry)
    assert "# send requests to /v1/chat/completions" in text.out, text.out


def test_push_writes_the_requirements_into_the_card(tmp_path):
    registry = mine(tmp_path)
    assert run_inprocess("convert", "tiny-example-eagle3", tmp_path / "out", "--registry", registry).code == 0
    r = run_inprocess("push", tmp_path / "out", "tester/x", "--target", "org/target", "--dry-run", "--json")
    assert r.code == 0, r.err
    card = r.json()["card"]
    section = card.split("## Requirements")[1].split("## Serving")[0]
    assert f"the target's thinking mode off ({CARD})" in section
    assert "prompts in the chat template (/v1/chat/completions)" in section
    assert f"vllm 0.22.0 or later: the fc_norm fix ({CARD})" in section and "K=2 recommended" in section
    assert '"num_speculative_tokens": 2' in card  # the serving commands at the recommended K
