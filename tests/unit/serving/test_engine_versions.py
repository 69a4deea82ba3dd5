"""The table of engine releases known to serve a drafter wrongly (eaglezoo/engine_versions.py): each row sourced, its
range well formed, the versions servers report parsed or said not to parse, and the conditions that used to be
scattered in code reading it."""

from __future__ import annotations

import pytest

from eaglezoo.checkpoint.spec import AuxLayers, DrafterSpec
from eaglezoo.engine_versions import ISSUES, KNOWN_ISSUES, issues_for, release
from eaglezoo.serving import engine_support


def test_every_row_names_its_source_and_a_range_or_says_it_has_none():
    for row in KNOWN_ISSUES:
        assert row.source.startswith("https://github.com/") or ".py:" in row.source, row.key
        assert row.releases() == "releases not pinned down" or row.pinned


@pytest.mark.parametrize(
    "version, parsed",
    [
        ("0.5.23", (0, 5, 23)),
        ("0.5.10.post1", (0, 5, 10)),
        ("0.32.0+cpu", (0, 32, 0)),
        ("0.11.0rc2.dev5", (0, 11, 0)),
        ("0.5", (0, 5, 0)),
        ("nightly", None),
        ("", None),
        ("\x1b[2J", None),
        ("1234567.0", None),
    ],
)
def test_versions_as_servers_report_them(version, parsed):
    assert release(version) == parsed


def test_the_issue_rows_match_their_releases_only():
    assert [r.key for r in issues_for("sglang", "0.5.10")] == ["sglang-0.5.10-al-one"]
    assert issues_for("sglang", "0.5.11") == [] and issues_for("sglang", "0.5.9") == []
    assert ISSUES["vllm-cpu-sampled-temperature"] in issues_for("vllm", "0.32.1+cpu")
    assert ISSUES["vllm-cpu-sampled-temperature"] not in issues_for("vllm", "0.33.0")
    assert issues_for("vllm", "dev") is None
    assert not any(r.key == "vllm-eagle3-regression-26191" for r in issues_for("vllm", "0.11.0"))  # not pinned down


def spec(**flags) -> DrafterSpec:
    return DrafterSpec(
        arch=flags.pop("arch", "llama"),
        architectures=["LlamaForCausalLMEagle3"],
        num_layers=1,
        hidden_size=128,
        target_hidden_size=128,
        vocab_size=1024,
        draft_vocab_size=512,
        num_aux=3,
        aux=AuxLayers(ids=(2, 3, 4), convention="boundary"),
        **flags,
    )


def test_serving_floors_are_the_tables():
    """vLLM's floor for an MLA drafter with fc_norm and for the speculators format come from the rows, sources named."""
    mla = {e.engine: e for e in engine_support(spec(arch="mla", fc_norm=True))}["vllm"]
    assert mla.min_version == ISSUES["vllm-mla-fc-norm"].before
    assert any("PR #43482" in n for n in mla.notes)
    spec_fmt = {e.engine: e for e in engine_support(spec(fc_norm=True), "speculators")}["vllm"]
    assert spec_fmt.min_version == ISSUES["vllm-speculators-fc-norm"].before
    assert any("PR #46488" in n for n in spec_fmt.notes)
