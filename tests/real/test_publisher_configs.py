"""The real-config corpus as a test tier: every publisher file in tests/data/real-configs (trainer templates,
configs quoted in public issues, one re-saved target config) is detected, read at config level and linted,
and what eaglezoo reads is held against the corpus's manifest: dialect, aux ids with their convention, flags,
vocabularies, sizes, and every oddity the manifest lists as a finding with a stable code and a fix.

The corpus is committed with the tests (each file's source URL: tests/data/real-configs/SOURCES.md), so the tier
runs, and can fail, on every clone; it never skips. The rules themselves are also tested on small hand-written
configs (tests/unit/checkpoint/test_config_traps.py)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, assert_clean_failure, run_inprocess

from eaglezoo.checkpoint.formats.base import ReadOptions
from eaglezoo.checkpoint.read import read_config
from eaglezoo.lint import lint_config
from eaglezoo.registry.load import load as load_registry
from eaglezoo.registry.sync import config_facts, differences_from

CORPUS = ROOT / "tests" / "data" / "real-configs"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())

# The manifest's dialect (by content) -> what eaglezoo detects from a config alone. Where they differ, who is right:
# * TorchSpec's MLA/MoE templates carry ModelOpt's eagle_config markers and not the `_torchspec_version` that
#   TorchSpec's export adds (docs/formats.md#torchspec): by content they are ModelOpt-style, and both readers take the
#   nested ids as layer-output, so the reading is the same. eaglezoo says modelopt; a TorchSpec export is told apart.
#   TorchSpec's qwen3_8b_eagle3_mla.json has no eagle_config at all: nothing in it names a trainer, so it is
#   read without a dialect (the manifest files it under its source repository).
# * AngelSlim's templates name vLLM's class (Eagle3LlamaForCausalLM) and no trainer: only tensor names would
#   tell their dialect, so eaglezoo reads them without one and says so (dialect-undetermined), as the manifest's
#   "other" does.
DIALECTS = {
    "SpecForge": "specforge",
    "SafeAILab": "safeai",
    "speculators": "speculators",
    "TorchSpec (MLA; ModelOpt-style eagle_config)": "modelopt",
    "TorchSpec (MoE; ModelOpt-style eagle_config)": "modelopt",
    "other (AngelSlim / vLLM arch name)": None,
    "other": None,
}

# Each oddity the manifest lists (by its opening words) -> the finding code eaglezoo reports for it.
ODDITY_CODES = {
    "no aux layer ids": "aux-ids-missing",
    "num_aux_hidden_states=3 with no aux ids": "aux-ids-missing",
    "aux ids top-level only": "aux-ids-top-level-only",
    "4 aux ids": "aux-count-implicit",
    "eagle_config without use_aux_hidden_state": "use-aux-unstated",
    "draft_vocab_size == vocab_size": "draft-vocab-full",
    "draft_vocab_size absent": "draft-vocab-full",
    "target_hidden_size present but equal": "target-hidden-redundant",
    "target_hidden_size: null": "target-hidden-null-speculators",  # the corpus's two are speculators configs
    "num_attention_heads×head_dim": "head-dim-explicit",
    "short max_position_embeddings": "context-short",
    "max_position_embeddings ABSENT": "context-unstated",
    "no rope_theta": "rope-theta-unstated",
    'rope_scaling uses legacy "type"': "rope-scaling-legacy",
    "use_sliding_window=false but": "sliding-window-contradiction",
    "drafter layer is sliding-window": "drafter-sliding-window",
    "model_type=": "model-type-unusual",
    "non-standard key target_model_type": "nonstandard-keys",
    'extra "_comment_for_humans"': "nonstandard-keys",
    "torch_dtype float16": "dtype-float16",
    "dtype (transformers v5 key)": "dtype-key-v5",
    "MoE drafter layer": "moe-drafter",
    "architecture ": "architecture-unknown",
    "EAGLE 3.1 flags": "eagle31-flags",
    'speculators "3.1-like" combo': "speculators-3.1-variant",
    "verifier.name_or_path is a local path": "verifier-local-path",
}
DRAFTERS = [row for row in MANIFEST if row["category"] != "target-copy"]


def code_for(oddity: str) -> str:
    codes = [code for opening, code in ODDITY_CODES.items() if oddity.startswith(opening)]
    assert len(codes) == 1, f"no single code for the manifest's oddity {oddity!r}"
    return codes[0]


def lint_row(row: dict):
    return lint_config(CORPUS / row["path"])


def test_the_corpus_is_whole():
    assert len(MANIFEST) == 74 and len(DRAFTERS) == 73
    assert all((CORPUS / row["path"]).is_file() for row in MANIFEST)


@pytest.mark.parametrize("row", DRAFTERS, ids=lambda r: r["path"].split("/", 1)[1])
def test_every_real_config_is_read_as_its_manifest_says(row):
    report = lint_row(row)
    assert report.level == "config" and report.spec is not None, [f.message for f in report.findings]
    spec, codes = report.spec, {f.code for f in report.findings}
    config = json.loads((CORPUS / row["path"]).read_text())
    assert report.dialect == (
        DIALECTS[row["dialect_content"]]
        if "Eagle3DeepseekV2" not in str(config["architectures"]) or "eagle_config" in config
        else None
    )
    assert ("dialect-undetermined" in codes) == (report.dialect is None)
    assert spec.vocab_size == row["vocab_size"] and spec.hidden_size == row["hidden_size"]
    assert spec.draft_vocab_size == (row["draft_vocab_size"] or row["vocab_size"])
    if row["target_hidden_size"] not in ("absent", None):
        assert spec.target_hidden_size == row["target_hidden_size"]
    assert spec.max_position_embeddings == row["max_position_embeddings"]
    for flag, stated in row["flags"].items():
        if stated != "-":
            assert getattr(spec, flag) is (stated is True or stated == "True"), flag
    _assert_aux(row, report)


def _assert_aux(row: dict, report) -> None:
    ids, where, codes = row["aux_ids"], row["aux_location"], {f.code for f in report.findings}
    if ids is None:
        assert report.spec.aux is None and "aux-ids-missing" in codes
    elif where.startswith("nested"):  # SpecForge, TorchSpec and ModelOpt write output-of-layer ids there
        assert list(report.spec.aux.ids) == ids and report.spec.aux.convention == "layer-output"
    elif report.dialect == "speculators":  # its top level is boundary (docs/formats.md#speculators)
        assert list(report.spec.aux.ids) == ids and report.spec.aux.convention == "boundary"
    else:  # top-level ids in a SpecForge config: no documented convention, said with the ids
        unknown = next(f for f in report.findings if f.code == "aux-convention-unknown")
        assert str(ids) in unknown.message and report.spec.aux is None


@pytest.mark.parametrize("row", [r for r in DRAFTERS if r["oddities"]], ids=lambda r: r["path"].split("/", 1)[1])
def test_every_listed_oddity_is_a_finding_with_a_fix(row):
    findings = {f.code: f for f in lint_row(row).findings}
    for oddity in row["oddities"]:
        code = code_for(oddity)
        assert code in findings, (oddity, sorted(findings))
        assert findings[code].hint, f"{code} names no fix"


def test_the_resaved_target_config_is_not_a_drafter():
    row = next(r for r in MANIFEST if r["category"] == "target-copy")
    r = run_inprocess("lint", CORPUS / row["path"], "--json")
    assert r.code == 1
    assert [f["code"] for f in r.json()["findings"]] == ["not-a-drafter"]


def test_a_template_through_the_cli():
    template = CORPUS / "templates/sgl-project__SpecForge/configs/qwen3-235B-A22B-eagle3.json"
    before = template.read_bytes()
    r = run_inprocess("lint", template)
    assert r.code == 0, r.err
    assert "dialect specforge" in r.out and "config alone" in r.out
    assert "[1, 46, 90] (layer-output) = boundary [2, 47, 91]" in r.out
    assert template.read_bytes() == before


def test_a_corpus_file_that_is_not_json(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text((CORPUS / "templates/SafeAILab__EAGLE/eagle/traineagle3/config.json").read_text()[:200])
    r = run_inprocess("lint", bad)
    assert_clean_failure(r, code=2, contains="JSON")


def test_registry_facts_taken_from_a_template_are_what_the_template_states():
    """Every registry fact whose evidence is a corpus template holds the value eaglezoo reads from that file today
    (scripts/data/sync_templates.sh wrote them): the reading and the registry cannot drift apart unnoticed."""
    by_url = {row["url"]: row for row in MANIFEST}
    checked = 0
    for entry in load_registry(ROOT / "registry").entries.values():
        for url in {e.source for e in entry.evidence.values() if e.level == "publisher-template"} & set(by_url):
            drafter = read_config(CORPUS / by_url[url]["path"], None, ReadOptions(allow_missing_aux=True))
            facts = [
                f
                for f in config_facts(drafter.reading, drafter.config, url, "publisher-template")
                if (held := entry.evidence.get(f.field.split(".")[0])) is not None and held.source == url
            ]
            assert facts and differences_from(entry, facts) == [], entry.id
            checked += 1
    assert checked >= 9
