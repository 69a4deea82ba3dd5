"""The serving path serve-config, the pages and the site print: convert first where the engine would not read the
drafter as given, judged on the format the path serves."""

from __future__ import annotations

from eaglezoo.checkpoint.spec import AuxLayers, DrafterSpec
from eaglezoo.serving import DIAGNOSE_LABEL, diagnose_command, production_command, serve_config, shown_path

SPEC = DrafterSpec(
    arch="llama",
    architectures=["LlamaForCausalLMEagle3"],
    num_layers=1,
    hidden_size=64,
    target_hidden_size=64,
    vocab_size=100,
    draft_vocab_size=100,
    num_aux=3,
    aux=AuxLayers(ids=(2, 3, 4), convention="boundary"),
    fc_norm=True,
    norm_output=True,
    layer_config={"num_attention_heads": 4},
)


def test_a_speculators_drafter_on_sglang_is_converted_to_eagle31_and_judged_as_such():
    sc = serve_config(
        SPEC,
        "sglang",
        "org/drafter",
        "org/target",
        3,
        None,
        "speculators",
        has_top_level_ids=True,
        has_nested_ids=False,
        dialect="speculators",
        convert_source=["some-entry"],
    )
    assert sc.convert_command == "eaglezoo convert some-entry some-entry-eagle31"  # no --to speculators
    assert "some-entry-eagle31" in sc.command and sc.min_version is not None
    assert not any("speculators format" in w for w in sc.warnings), sc.warnings


def test_a_speculators_drafter_on_vllm_is_served_as_published():
    sc = serve_config(
        SPEC,
        "vllm",
        "org/drafter",
        "org/target",
        3,
        None,
        "speculators",
        has_top_level_ids=True,
        has_nested_ids=False,
        dialect="speculators",
        convert_source=["some-entry"],
    )
    assert sc.convert_command is None and sc.steps == [sc.command] and "org/drafter" in sc.command


def test_the_printed_path_serves_for_production_and_says_what_development_mode_opens():
    sc = serve_config(SPEC, "vllm", "d", "t", 3, dialect="eagle31", convert_source=["d"])
    shown = shown_path(sc.steps).splitlines()
    assert shown[0].startswith("vllm serve t") and shown[1] == f"# {DIAGNOSE_LABEL}"
    assert shown[2] == f"VLLM_SERVER_DEV_MODE=1 {shown[0]} --per-request-spec-decode-metrics detailed"
    assert "development endpoints" not in shown_path(serve_config(SPEC, "sglang", "d", "t", 3).steps)


def test_a_dev_mode_command_an_older_report_saved_is_shown_as_both():
    served = "vllm serve t --speculative-config '{}'"
    old = f"VLLM_SERVER_DEV_MODE=1 {served} --per-request-spec-decode-metrics detailed"
    assert production_command(old) == served and diagnose_command(served) == old
    assert shown_path([old]) == shown_path([served])
