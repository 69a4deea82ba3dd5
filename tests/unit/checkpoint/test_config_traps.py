"""The config traps (eaglezoo/checkpoint/traps.py) on small hand-written configs: a clean SpecForge-style
config sets none of them, and each one-key change sets exactly the trap it should, with a fix named."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean_failure, run_inprocess

from eaglezoo.checkpoint.traps import RULES
from eaglezoo.lint import lint_config

CLEAN = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 512,
    "num_hidden_layers": 1,
    "rms_norm_eps": 1e-5,
    "vocab_size": 1000,
    "draft_vocab_size": 500,
    "max_position_embeddings": 32768,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "norm_before_residual": False,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 9], "use_aux_hidden_state": True},
}


def _without(key: str) -> dict:
    return {k: v for k, v in CLEAN.items() if k != key}


TRAPS = {  # code -> a config that sets it
    "aux-ids-top-level-only": {**_without("eagle_config"), "eagle_aux_hidden_state_layer_ids": [2, 6, 10]},
    "aux-count-implicit": {
        **CLEAN,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 9, 11], "use_aux_hidden_state": True},
    },
    "use-aux-unstated": {**CLEAN, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 9]}},
    "draft-vocab-full": _without("draft_vocab_size"),
    "target-hidden-redundant": {**CLEAN, "target_hidden_size": 256},
    "target-hidden-null": {**CLEAN, "target_hidden_size": None},
    "head-dim-explicit": {**CLEAN, "head_dim": 128},
    "context-short": {**CLEAN, "max_position_embeddings": 2048},
    "context-unstated": _without("max_position_embeddings"),
    "rope-theta-unstated": _without("rope_theta"),
    "rope-scaling-legacy": {**CLEAN, "rope_scaling": {"type": "yarn", "factor": 4.0}},
    "sliding-window-contradiction": {**CLEAN, "use_sliding_window": False, "sliding_window": 4096},
    "drafter-sliding-window": {**CLEAN, "use_sliding_window": True, "sliding_window": 4096},
    "model-type-unusual": {**CLEAN, "model_type": "phi3"},
    "nonstandard-keys": {**CLEAN, "_comment_for_humans": "trained on 8 GPUs"},
    "dtype-key-v5": {**_without("torch_dtype"), "dtype": "bfloat16"},
    "dtype-float16": {**CLEAN, "torch_dtype": "float16"},
    "moe-drafter": {**CLEAN, "n_routed_experts": 8},
    "architecture-unknown": {**CLEAN, "architectures": ["CosyVoice3Eagle3LlamaForCausalLM"]},
    "eagle31-flags": {**CLEAN, "fc_norm": True},
    "speculators-3.1-variant": None,  # a speculators config: built below
    "verifier-local-path": None,
}


def speculators(**top) -> dict:
    layer = {
        k: CLEAN[k]
        for k in (
            "model_type",
            "hidden_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "intermediate_size",
            "num_hidden_layers",
            "rms_norm_eps",
            "vocab_size",
            "max_position_embeddings",
            "rope_theta",
        )
    }
    verifier = {"name_or_path": top.pop("verifier", "org/target"), "architectures": ["LlamaForCausalLM"]}
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "draft_vocab_size": 500,
        "eagle_aux_hidden_state_layer_ids": [2, 6, 10],
        "norm_before_residual": False,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "transformer_layer_config": layer,
        "speculators_config": {"algorithm": "eagle3", "verifier": verifier},
        **top,
    }


TRAPS["speculators-3.1-variant"] = speculators(norm_before_fc=True, norm_output=True, fc_norm=False)
TRAPS["verifier-local-path"] = speculators(verifier="/models/target")


def lint_dict(tmp_path, config: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return lint_config(path)


def trap_codes(report) -> set[str]:
    return {f.code for f in report.findings} & set(TRAPS)


def test_every_rule_has_a_fixture():
    def fires(rule, cfg):
        layer = cfg.get("transformer_layer_config", cfg)
        return rule(cfg, layer, None) is not None

    assert all(any(fires(rule, cfg) for cfg in TRAPS.values()) for rule in RULES)


@pytest.mark.parametrize("config", [CLEAN, speculators()], ids=["specforge", "speculators"])
def test_a_clean_config_sets_no_trap(tmp_path, config):
    report = lint_dict(tmp_path, config)
    assert report.spec is not None and not report.errors, report.findings
    assert trap_codes(report) == set(), report.findings


@pytest.mark.parametrize("code", sorted(TRAPS))
def test_each_trap_is_found_with_its_fix(tmp_path, code):
    report = lint_dict(tmp_path, TRAPS[code])
    assert trap_codes(report) == {code}, report.findings
    finding = next(f for f in report.findings if f.code == code)
    assert finding.hint and finding.message


def test_lint_reads_a_template_through_the_cli(tmp_path):
    path = tmp_path / "template.json"
    path.write_text(json.dumps(TRAPS["rope-theta-unstated"]))
    r = run_inprocess("lint", path, "--json")
    assert r.code == 0, r.err
    report = r.json()
    assert report["level"] == "config" and report["dialect"] == "specforge"
    assert "rope-theta-unstated" in {f["code"] for f in report["findings"]}
    assert report["spec"]["aux"] == {"ids": [1, 5, 9], "convention": "layer-output"}


def test_a_template_against_its_target(tmp_path):
    """The config level still checks the drafter against the target: ids past the target's depth are an error."""
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 256,
                "num_hidden_layers": 8,
                "vocab_size": 1000,
                "num_attention_heads": 4,
            }
        )
    )
    path = tmp_path / "template.json"
    path.write_text(json.dumps(CLEAN))
    r = run_inprocess("lint", path, "--target", target)
    assert r.code == 1 and "aux" in r.out, r.out


def test_a_config_file_that_is_not_a_drafter(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "hidden_size": 64,
                "vocab_size": 10,
                "num_attention_heads": 2,
                "num_hidden_layers": 4,
            }
        )
    )
    r = run_inprocess("lint", path)
    assert r.code == 1 and "not-a-drafter" in r.out and "--target" in r.out


def test_a_config_file_that_is_not_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"architectures": ["LlamaForCausalLMEagle3"], ')
    assert_clean_failure(run_inprocess("lint", path), code=2, contains="JSON")


def _target(tmp_path, **keys):
    target = tmp_path / "target"
    target.mkdir(exist_ok=True)
    (target / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 256,
                "num_hidden_layers": 16,
                "vocab_size": 1000,
                "num_attention_heads": 4,
                **keys,
            }
        )
    )
    return target


@pytest.mark.parametrize(
    "target_keys, config, code, expected",
    [
        ({"rope_theta": 10000.0}, _without("rope_theta"), "rope-theta-unstated", False),
        ({"rope_theta": 500000.0}, _without("rope_theta"), "rope-theta-unstated", True),
        ({"max_position_embeddings": 2048}, {**CLEAN, "max_position_embeddings": 2048}, "context-short", False),
        ({"max_position_embeddings": 131072}, CLEAN, "context-short", True),
    ],
)
def test_traps_against_the_target(tmp_path, target_keys, config, code, expected):
    """With the target known, a drafter matching it sets no trap; one falling short of it does, naming its value."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    findings = {f.code: f for f in lint_config(path, _target(tmp_path, **target_keys)).findings}
    assert (code in findings) is expected, findings
    if expected:
        assert "the target's is" in findings[code].message
