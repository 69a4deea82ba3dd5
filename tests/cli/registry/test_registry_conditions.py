"""A figure is its conditions (issue 43, items 1, 2 and 7): every reported and measured figure states what it was
measured under, `unknown` where its source does not say it; a figure whose conditions contradict each other is
refused; SGLang's chain spelling steps-1-steps+1 is read as chain K and no other spelling is; `registry list
--target` and `show` compare only figures taken under the same conditions, and say what differs for the others."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import ROOT, assert_clean_failure, run_inprocess
from support.registry_entries import GOOD, UNKNOWN_CONDITIONS, figure

CONDITIONS = set(UNKNOWN_CONDITIONS)
NVIDIA = "nvidia-llama-3.3-70b-instruct-eagle3"
# what the vLLM CI states for its pairs (tests/v1/spec_decode/test_acceptance_length.py): MT-Bench's 80 prompts,
# T=0, K=3, 256 new tokens
CI = {
    "k": 3,
    "drafting": "chain",
    "temperature": 0,
    "dataset": "MT-Bench",
    "dataset_size": 80,
    "max_new_tokens": 256,
    "engine": "vllm",
}


def registry_of(tmp_path: Path, **entries: str) -> Path:
    folder = tmp_path / "registry"
    folder.mkdir(parents=True)
    for name, text in entries.items():
        (folder / f"{name}.yaml").write_text(text.replace("id: good", f"id: {name}"))
    return folder


def with_figures(*figures: str, extra: str = "", target: str = "org/target") -> str:
    items = "".join(f"- {f}\n" for f in figures)
    return GOOD.replace("org/target", target) + extra + f"reported:\n{items}"


def test_every_shipped_figure_states_every_condition():
    r = run_inprocess("registry", "list", "--json")
    assert r.code == 0, r.err
    entries = r.json()
    reported = [x for e in entries for x in e["reported"]]
    measured = [m for e in entries for m in e["measured"]]
    assert len(reported) > 40 and measured
    assert all(set(x["conditions"]) == CONDITIONS and x["definition"] for x in reported)
    assert all(set(m["conditions"]) == CONDITIONS for m in measured)
    # SpecForge's table states SGLang's 3-1-4, kept as the engine's spelling beside chain K=3
    lmsys = next(e for e in entries if e["id"] == "lmsys-sglang-eagle3-llama-3.1-8b-instruct-specforge")
    assert {(x["conditions"]["k"], x["conditions"]["k_spelling"]) for x in lmsys["reported"]} == {(3, "3-1-4")}
    assert run_inprocess("registry", "check").code == 0


@pytest.mark.parametrize(
    "item,message",
    [
        # T as a string: a number or unknown, never a quoted value read as one
        (figure(2.0, temperature='"0.7"'), "reported.0.conditions.temperature"),
        # SGLang's 3-1-4 is chain K=3: a figure stating K=2 beside it contradicts itself
        (
            figure(2.0, k=2, k_spelling="3-1-4", engine="sglang"),
            "k 2 but k_spelling 3-1-4 is SGLang's chain K=3",
        ),
        # 3-4-8 is a tree (topk 4): never a chain
        (
            figure(2.0, drafting="chain", k_spelling="3-4-8", engine="sglang"),
            "drafting chain but k_spelling 3-4-8 is a tree",
        ),
        # a chain of K=3 accepts at most 4 tokens a step, bonus included
        (figure(4.5, k=3, drafting="chain", definition="with-bonus"), "acceptance length 4.5 exceeds 4"),
        (figure(3.5, k=3, drafting="chain", definition="without-bonus"), "acceptance length 3.5 exceeds 3"),
        (figure("[0.7, 0.5]", metric="speedup", definition="joint"), "definition joint is not one of speedup's"),
        (figure(2.0, engine_version='"main-nightly"'), "engine_version 'main-nightly' is not a version"),
        # a figure without its conditions
        (
            "{metric: acceptance_length, definition: unknown, value: 2.0}",
            "reported.0: Value error, a figure without its",
        ),
    ],
)
def test_a_figure_whose_conditions_are_missing_or_contradict_each_other_is_refused(tmp_path, item, message):
    registry = registry_of(tmp_path, good=with_figures(item))
    assert_clean_failure(run_inprocess("registry", "show", "good", "--registry", registry), None, contains=message)
    r = run_inprocess("registry", "check", "--registry", registry)
    assert r.code == 1 and message in r.out, r.out


def test_a_requirement_naming_an_engine_version_that_does_not_parse_is_refused(tmp_path):
    entry = GOOD + "engines:\n- {engine: vllm, min_version: latest-with-fix}\n"
    registry = registry_of(tmp_path, good=entry)
    r = run_inprocess("registry", "show", "good", "--registry", registry)
    assert_clean_failure(r, None, contains="engines.0.min_version: Value error, min_version 'latest-with-fix' is not")


def test_an_entry_requiring_thinking_off_refuses_a_figure_measured_with_thinking_on(tmp_path):
    requirements = "requirements: {thinking: 'off', source: https://example.org/card}\n"
    on, off = figure(3.41, thinking="on"), figure(3.11, thinking="off")
    registry = registry_of(tmp_path, good=with_figures(off, on, extra=requirements))
    r = run_inprocess("registry", "check", "--registry", registry, "--json")
    assert r.code == 1
    problems = [p for p in r.json()["entries"]["good"]["problems"] if "thinking" in p]
    assert len(problems) == 1 and "3.41" in problems[0] and "requires thinking off" in problems[0], problems
    # the figure measured with thinking off alone: no contradiction left
    registry_of(tmp_path / "fixed", good=with_figures(off, extra=requirements))
    fixed = run_inprocess("registry", "check", "--registry", tmp_path / "fixed" / "registry", "--json")
    assert not [p for p in fixed.json()["entries"]["good"]["problems"] if "thinking" in p]


def test_a_user_registry_overlaying_a_figure_without_its_conditions_is_refused_not_replaced(tmp_path):
    """The user's copy of a shipped entry, with a figure in the old shape: refused by name, and the shipped entry
    is not listed in its place (the user meant to replace it)."""
    data = yaml.safe_load((ROOT / "registry" / f"{NVIDIA}.yaml").read_text())
    data["reported"] = [{"metric": "acceptance_length", "value": 2.9, "k": 3, "source": "https://example.org/x"}]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / f"{NVIDIA}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "list", "--registry", mine, "--json")
    assert r.code == 0 and NVIDIA not in {e["id"] for e in r.json()}
    assert "warning: skipped" in r.err and "reported.0: Value error, a figure without its conditions" in r.err, r.err
    shown = run_inprocess("registry", "show", NVIDIA, "--registry", mine)
    assert_clean_failure(
        shown, None, contains="a figure without its conditions: state conditions: with every one of k,"
    )


def test_the_target_s_figures_are_compared_like_with_like(tmp_path):
    """Two drafters measured as vLLM's CI measures side by side; one at another temperature apart, with what differs;
    SGLang's chain spelling 3-1-4 compares with chain K=3, its tree spelling 3-4-8 does not."""
    registry = registry_of(
        tmp_path,
        a=with_figures(
            figure(2.6, definition="with-bonus", source="https://example.org/ci", **CI),
            figure("[0.7, 0.5, 0.4]", "per_position_acceptance", "joint", source="https://example.org/ci", **CI),
        ),
        b=with_figures(
            figure(2.3, definition="with-bonus", source="https://example.org/ci", **CI),
            figure("[0.6, 0.4, 0.3]", "per_position_acceptance", "joint", source="https://example.org/ci", **CI),
        ),
        c=with_figures(
            figure(2.9, definition="with-bonus", source="https://example.org/ci", **{**CI, "temperature": 1})
        ),
        e=with_figures(figure(2.5, definition="with-bonus", source="https://example.org/other", **CI)),
        d=with_figures(
            figure(
                2.4, k_spelling="3-1-4", source="https://example.org/d", **{**CI, "k": "unknown", "engine": "sglang"}
            ),
            figure(2.2, k_spelling="3-1-4", source="https://example.org/e", **{**CI, "engine": "sglang"}),
            figure(3.1, k_spelling="3-4-8", source="https://example.org/f", **{**CI, "k": 3, "drafting": "unknown"})
            .replace("engine: vllm", "engine: sglang")
            .replace("k: 3,", "k: unknown,"),
        ),
    )
    r = run_inprocess("registry", "list", "--registry", registry, "--target", "org/target", "--json")
    assert r.code == 0, r.err
    figures = {str(f["value"]): f for e in r.json() for f in e["figures"]}
    figures = {float(v) if "[" not in v else v: f for v, f in figures.items()}
    assert figures["[0.7, 0.5, 0.4]"]["comparable_with"] == ["b (reported)"]
    assert figures[2.6]["comparable_with"] == ["b (reported)"] and figures[2.3]["comparable_with"] == ["a (reported)"]
    assert figures[2.9]["comparable_with"] == [] and figures[2.9]["differs"] == ["temperature: 1 vs 0"]
    # a condition that two sources both leave unknown cannot be shown to be the same
    assert figures[2.5]["comparable_with"] == [] and "engine_version: unknown on both" in figures[2.5]["differs"]
    # the chain spelling is chain K=3: the two SGLang figures compare (their definitions: unknown, from 2 sources)
    assert figures[2.4]["differs"] == [] or "k: unknown vs 3" not in " ".join(figures[2.4]["differs"])
    assert "drafting: tree vs chain" in figures[3.1]["differs"] and "k: unknown vs 3" in figures[3.1]["differs"]
    text = run_inprocess("registry", "list", "--registry", registry, "--target", "org/target").out
    assert "comparable: acceptance_length (with-bonus), (K=3, T=0, MT-Bench x80, vllm)" in text, text
    assert "comparable: per_position_acceptance (joint), (K=3, T=0, MT-Bench x80, vllm)" in text, text
    assert "c (reported) acceptance_length 2.9" in text and "temperature: 1 vs 0" in text
    show = run_inprocess("registry", "show", "a", "--registry", registry, "--json")
    assert show.code == 0 and show.json()["figures"][0]["comparable_with"] == ["b (reported)"]
    site = tmp_path / "site"
    assert run_inprocess("registry", "site", site, "--registry", registry).code == 0
    page = (site / "entries" / "a.html").read_text()
    compared = page[page.index("Compared like with like") :]
    assert '<a href="b.html">b</a>' in compared and "c.html" not in compared
    assert "temperature: 1 vs 0" in (site / "entries" / "c.html").read_text()
    row = next(r for r in (site / "index.html").read_text().split("<tr>") if 'href="entries/a.html"' in r)
    assert "<td>b</td>" in row and row.count("<a href=") == 1  # named, not linked: the index links each entry once


def test_the_thinking_mode_of_raw_prompts_is_not_compared_and_of_chat_prompts_is(tmp_path):
    """Raw text goes through no chat template, so no thinking switch: two figures of raw prompts compare though both
    sources leave thinking unknown; two of chat prompts do not; two chat figures in the same stated mode compare,
    and one in the other mode stands apart."""
    stated = {**CI, "engine_version": "0.32.0", "top_p": 1.0}
    raw, chat = {**stated, "prompt_format": "raw"}, {**stated, "prompt_format": "chat"}
    registry = registry_of(
        tmp_path,
        a=with_figures(figure(2.6, definition="with-bonus", source="https://example.org/a", **raw)),
        b=with_figures(figure(2.3, definition="with-bonus", source="https://example.org/b", **raw)),
        c=with_figures(figure(2.7, definition="with-bonus", source="https://example.org/c", **chat)),
        d=with_figures(figure(2.8, definition="with-bonus", source="https://example.org/d", **chat)),
        e=with_figures(figure(2.1, definition="with-bonus", source="https://example.org/e", thinking="on", **chat)),
        f=with_figures(figure(2.2, definition="with-bonus", source="https://example.org/f", thinking="off", **chat)),
        g=with_figures(figure(2.0, definition="with-bonus", source="https://example.org/g", thinking="on", **chat)),
    )
    r = run_inprocess("registry", "list", "--registry", registry, "--target", "org/target", "--json")
    assert r.code == 0, r.err
    figures = {f["value"]: f for e in r.json() for f in e["figures"]}
    assert figures[2.6]["comparable_with"] == ["b (reported)"]
    assert figures[2.7]["comparable_with"] == [] and "thinking: unknown on both" in figures[2.7]["differs"]
    assert figures[2.1]["comparable_with"] == ["g (reported)"]
    assert figures[2.2]["comparable_with"] == [] and figures[2.2]["differs"][0].startswith("thinking: off vs ")


def test_the_readmes_example_target_sets_its_four_drafters_side_by_side():
    """README's "Which drafter for my target?": the example target's four drafters, measured on the same prompts at
    the same K, T and engine, share one group; Qwen3-8B's publishers' figures stay apart, each with what differs."""
    r = run_inprocess("registry", "list", "--target", "examples/tiny/target")
    assert r.code == 0, r.err
    group = r.out.split("comparable: acceptance_length (with-bonus), (K=3, T=0, examples/tiny/prompts.jsonl x36,")[1]
    group = group.split("comparable:")[0]
    for name in ("dflash", "eagle3", "eagle31", "peagle"):
        assert f"tiny-example-{name} " in group, group
    qwen = run_inprocess("registry", "list", "--target", "Qwen/Qwen3-8B").out
    assert "not comparable with any other figure of this target" in qwen and "dataset: unknown vs MT-Bench" in qwen


VLLM_CI = "https://github.com/vllm-project/vllm/blob/029ba37503c59160eacf163dd50b3bb1a6cfe982/tests/v1/spec_decode/"


@pytest.mark.parametrize(
    "drafter,target,length,per_position",
    [
        ("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3", "meta-llama/Llama-3.1-8B-Instruct", 2.60, 0.7296),
        ("RedHatAI/Qwen3-8B-speculator.eagle3", "Qwen/Qwen3-8B", 2.26, 0.6541),
        ("RedHatAI/gpt-oss-20b-speculator.eagle3", "openai/gpt-oss-20b", 2.56, 0.7165),
        ("nm-testing/Speculator-Qwen3-30B-MOE-VL-Eagle3", "Qwen/Qwen3-VL-30B-A3B-Instruct-FP8", 1.35, 0.29),
    ],
)
def test_the_vllm_ci_pairs_are_reference_entries_with_their_evidence(drafter, target, length, per_position):
    """vLLM's CI gates four pairs (tests/v1/spec_decode/test_acceptance_length.py): each is an entry whose figures
    state the file at its commit and every condition the file states."""
    r = run_inprocess("registry", "list", "--target", target, "--json")
    entry = next(e for e in r.json() if e["drafter"]["repo"] == drafter)
    ci = [x for x in entry["reported"] if x["conditions"]["source"].startswith(VLLM_CI)]
    assert [(x["metric"], x["definition"]) for x in ci] == [
        ("acceptance_length", "with-bonus"),
        ("per_position_acceptance", "joint"),
    ]
    assert ci[0]["value"] == length and ci[1]["value"][0] == per_position and len(ci[1]["value"]) == 3
    stated = {k: v for k, v in ci[0]["conditions"].items() if v != "unknown" and k != "source"}
    assert stated == {**CI, "temperature": 0.0, "prompt_format": "chat"}
    assert any(s.startswith(VLLM_CI) for s in entry["sources"])


def test_a_declared_requirement_naming_an_engine_version_that_does_not_parse_is_refused(tmp_path):
    """requirements.engines (the card's least release, with why): a version that is no release is refused by name."""
    entry = GOOD + (
        "requirements:\n  engines:\n  - {engine: vllm, min_version: latest-with-fix, reason: the norm_before_fc fix,"
        " source: 'https://example.org/card'}\n"
    )
    r = run_inprocess("registry", "show", "good", "--registry", registry_of(tmp_path, good=entry))
    assert_clean_failure(r, None, contains="vllm min_version 'latest-with-fix' is not a release")


def test_a_declared_requirement_without_its_source_is_refused(tmp_path):
    entry = GOOD + "requirements: {recommended_k: 5}\n"
    r = run_inprocess("registry", "show", "good", "--registry", registry_of(tmp_path, good=entry))
    assert_clean_failure(r, None, contains="requirements.recommended_k needs its source")
