"""Registry facts with their evidence: the schema's rules (every fact has a level and a source that cites the
original, never a path outside the repository), `registry sync --template` (a trainer template's facts at the
publisher-template level: new facts written, contradictions reported, stronger evidence never overwritten) and
how `registry list` and `show` display the levels. The Hub's side (a template fact upgraded to a Hub fact) is
in tests/hub/test_registry_sync.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import assert_clean_failure, run_inprocess, tree_digest

URL = "https://github.com/org/trainer/blob/0123456789abcdef0123456789abcdef01234567/configs/drafter.json"
TEMPLATE = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "num_hidden_layers": 1,
    "vocab_size": 1000,
    "draft_vocab_size": 500,
    "max_position_embeddings": 32768,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 9], "use_aux_hidden_state": True},
}


def entry(**extra) -> dict:
    return {
        "id": "pair",
        "drafter": {"repo": "org/drafter", "revision": None},
        "target": {"repo": "org/target"},
        "publisher": "tests",
        "eagle_version": "3",
        "sources": ["https://huggingface.co/org/drafter"],
        "null_reasons": {"hardware": "a test", "acceptance_floors": "a test", "aux_layers": "no file states them yet"},
        **extra,
    }


@pytest.fixture
def registry(tmp_path) -> Path:
    reg = tmp_path / "registry"
    reg.mkdir()
    (reg / "pair.yaml").write_text(yaml.safe_dump(entry(), sort_keys=False))
    return reg


def template(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "template.json"
    path.write_text(json.dumps({**TEMPLATE, **changes}))
    return path


def sync(reg: Path, path: Path, *args):
    return run_inprocess(
        "registry", "sync", "pair", "--template", path, "--source", URL, "--registry", reg, "--json", *args
    )


def diffs(result) -> dict[str, dict]:
    return {d["field"]: d for d in result.json()["entries"][0]["differences"]}


def test_a_template_fills_the_entry_at_its_level_then_nothing_drifts(tmp_path, registry):
    before = tree_digest(registry)
    r = sync(registry, template(tmp_path))
    assert r.code == 1 and tree_digest(registry) == before  # differences reported; nothing written without --write
    d = diffs(r)
    assert "dialect" not in d  # a config alone does not settle the dialect: the tensor names do
    assert (d["aux_layers.ids"]["hub"], d["aux_layers.convention"]["hub"]) == ([1, 5, 9], "layer-output")
    assert (d["hidden_size"]["hub"], d["draft_vocab_size"]["hub"], d["max_position_embeddings"]["hub"]) == (
        256,
        500,
        32768,
    )
    assert all(x["level"] == "publisher-template" and x["source"] == URL and x["kind"] == "new" for x in d.values())
    assert sync(registry, template(tmp_path), "--write").code == 0
    written = yaml.safe_load((registry / "pair.yaml").read_text())
    assert written["evidence"]["aux_layers"] == {"level": "publisher-template", "source": URL}
    assert written["aux_layers"] == {"ids": [1, 5, 9], "convention": "layer-output"}
    assert "aux_layers" not in written["null_reasons"]  # the fact is known now: its reason for being null goes
    assert run_inprocess("registry", "check", "--registry", registry).code == 0
    again = sync(registry, template(tmp_path))
    assert again.code == 0 and diffs(again) == {}
    shown = run_inprocess("registry", "show", "pair", "--registry", registry)
    assert "publisher-template" in shown.out and URL in shown.out.replace("\n", "")
    listed = run_inprocess("registry", "list", "--registry", registry)
    assert "(template)" in listed.out and "template" in listed.out


def test_a_template_that_contradicts_the_registry_is_reported_never_written_silently(tmp_path, registry):
    sync(registry, template(tmp_path), "--write")
    before = tree_digest(registry)
    r = sync(registry, template(tmp_path, hidden_size=512))
    assert r.code == 1 and tree_digest(registry) == before
    assert (diffs(r)["hidden_size"]["kind"], diffs(r)["hidden_size"]["registry"], diffs(r)["hidden_size"]["hub"]) == (
        "differs",
        256,
        512,
    )


def test_stronger_evidence_is_never_overwritten_by_a_template(tmp_path, registry):
    hub = {"level": "hub-file", "source": "org/drafter@0123456789abcdef0123456789abcdef01234567 config.json"}
    data = entry(hidden_size=384, evidence={"hidden_size": hub})
    (registry / "pair.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    r = sync(registry, template(tmp_path), "--write")
    assert r.code == 1  # the disagreement stays a finding
    assert diffs(r)["hidden_size"]["kind"] == "disagrees"
    written = yaml.safe_load((registry / "pair.yaml").read_text())
    assert written["hidden_size"] == 384 and written["evidence"]["hidden_size"] == hub
    assert written["draft_vocab_size"] == 500  # the facts it had no evidence for were written


@pytest.mark.parametrize(
    "evidence,problem",
    [
        ({"hidden_size": {"level": "publisher-template"}}, "evidence.hidden_size.source: Field required"),
        (
            {"hidden_size": {"level": "model-card", "source": "shared/reference/peers.md §2 row 1"}},
            "names a path outside the repository",
        ),
        (
            {"hidden_size": {"level": "model-card", "source": "the card"}},
            "a model-card source must be the original https URL",
        ),
        ({"hidden_size": {"level": "rumour", "source": URL}}, "evidence.hidden_size.level"),
        ({}, "hidden_size stated without evidence"),
        (
            {
                "hidden_size": {"level": "model-card", "source": URL},
                "publisher": {"level": "model-card", "source": URL},
            },
            "evidence for publisher: only these facts carry evidence",
        ),
        (
            {"hidden_size": {"level": "repo-file", "source": "examples/nothing-here/config.json"}},
            "evidence.hidden_size.source examples/nothing-here/config.json does not exist",
        ),
    ],
    ids=["no-source", "outside-path", "not-a-url", "unknown-level", "no-evidence", "not-a-fact", "missing-repo-file"],
)
def test_evidence_without_its_source_is_refused_by_check(tmp_path, evidence, problem):
    reg = tmp_path / "registry"
    reg.mkdir()
    (reg / "pair.yaml").write_text(yaml.safe_dump(entry(hidden_size=256, evidence=evidence), sort_keys=False))
    r = run_inprocess("registry", "check", "--registry", reg, "--json")
    assert r.code == 1 and any(problem in p for p in r.json()["entries"]["pair"]["problems"]), r.out


def test_sources_must_cite_originals(tmp_path):
    reg = tmp_path / "registry"
    reg.mkdir()
    data = entry(sources=["SafeAILab/EAGLE README (shared/reference/formats.md §16)"])
    (reg / "pair.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "check", "--registry", reg, "--json")
    assert r.code == 1 and "names a path outside the repository" in json.dumps(r.json())


def test_every_shipped_entry_states_aux_ids_or_why_not():
    for e in run_inprocess("registry", "list", "--json").json():
        assert e["aux_layers"]["ids"] or e["null_reasons"].get("aux_layers"), e["id"]
        for fact, evidence in e["evidence"].items():
            assert evidence["source"], (e["id"], fact)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--template", "{t}"], "--template needs --source"),
        (["--template", "{t}", "--source", "github.com/org/x"], "--template needs --source"),
        (["--source", URL], "--source goes with --template"),
        (["--template", "{t}", "--source", URL, "--level", "hub-file"], "a template is publisher-template"),
    ],
    ids=["no-source", "not-https", "source-alone", "hub-level"],
)
def test_bad_template_arguments(tmp_path, registry, args, message):
    args = [a.replace("{t}", str(template(tmp_path))) for a in args]
    assert_clean_failure(
        run_inprocess("registry", "sync", "pair", *args, "--registry", registry), None, contains=message
    )
    r = run_inprocess(
        "registry", "sync", "pair", "other", "--template", template(tmp_path), "--source", URL, "--registry", registry
    )
    assert_clean_failure(r, None, contains="--template syncs one entry")


def test_a_template_that_is_not_a_drafter_config(tmp_path, registry):
    path = tmp_path / "target.json"
    path.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "hidden_size": 64,
                "vocab_size": 10,
                "num_attention_heads": 2,
                "num_hidden_layers": 4,
            }
        )
    )
    r = sync(registry, path)
    assert r.code == 1 and "not an EAGLE drafter config" in r.json()["entries"][0]["error"]
