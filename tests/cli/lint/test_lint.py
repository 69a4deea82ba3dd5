"""eaglezoo lint through the CLI: each check has a stable code; errors exit 1."""

from __future__ import annotations

import json

import torch
from conftest import assert_clean_failure, run_inprocess
from safetensors.torch import load_file, save_file
from support.factory import canonical_state, make_drafter, make_spec, make_target

IDS = ["--aux-layers", "1,2,3", "--aux-convention", "boundary"]


def codes(result):
    return {f["code"]: f for f in result.json()["findings"]}


def lint_json(*args):
    r = run_inprocess("lint", *args, "--json")
    assert r.code in (0, 1), r.err
    return r, codes(r)


def converted(tmp_path, spec=None, state=None, dialect="safeai", name="out"):
    src = make_drafter(tmp_path / f"src-{name}", dialect, spec=spec, state=state)
    r = run_inprocess("convert", src, tmp_path / name, *IDS)
    assert r.code == 0, r.err
    return tmp_path / name


def edit_weights(path, fn):
    state = load_file(str(path / "model.safetensors"))
    fn(state)
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})


def test_clean_drafter_passes_with_engine_floors(tmp_path):
    out = converted(tmp_path, spec=make_spec(fc_norm=True, norm_output=True))
    r, found = lint_json(out, "--target", make_target(tmp_path / "t"))
    assert r.code == 0
    assert not [f for f in found.values() if f["severity"] == "error"]
    engines = {e["engine"]: e for e in r.json()["engines"]}
    assert engines["vllm"]["min_version"] == "0.22.0" and engines["sglang"]["faithful"]
    text = run_inprocess("lint", out, "--target", tmp_path / "t")
    assert text.code == 0 and "0 error(s)" in text.out


def test_missing_aux_ids_is_an_error_and_the_rest_still_runs(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai", spec=make_spec(fc_norm=True))
    r, found = lint_json(src)
    assert r.code == 1 and found["aux-ids-missing"]["severity"] == "error"
    assert "50170" in found["aux-ids-missing"]["hint"]
    assert "norm-before-residual-implicit" in found  # later checks ran


def test_flag_tensor_mismatches(tmp_path):
    out = converted(tmp_path, spec=make_spec(fc_norm=True, norm_output=True))
    edit_weights(out, lambda s: [s.pop(f"fc_norm.{i}.weight") for i in range(3)])
    r, found = lint_json(out)
    assert r.code == 1 and found["flag-without-tensors"]["severity"] == "error"
    out2 = converted(tmp_path, spec=make_spec(fc_norm=True), name="o2")
    cfg = json.loads((out2 / "config.json").read_text())
    cfg["fc_norm"] = False
    (out2 / "config.json").write_text(json.dumps(cfg))
    r, found = lint_json(out2)
    assert r.code == 1 and "tensors-without-flag" in found and "flags-changed" in found


def test_vocab_map_invariants_and_trivial_map(tmp_path):
    out = converted(tmp_path)
    edit_weights(out, lambda s: s.__setitem__("d2t", s["d2t"].flip(0)))
    r, found = lint_json(out)
    assert r.code == 1 and found["vocab-map-invalid"]["severity"] == "error"
    out2 = converted(tmp_path, name="o2")

    def trivial(s):
        s["d2t"] = torch.zeros_like(s["d2t"])
        t2d = torch.zeros_like(s["t2d"])
        t2d[: s["d2t"].numel()] = True
        s["t2d"] = t2d

    edit_weights(out2, trivial)
    r, found = lint_json(out2)
    assert found["vocab-map-trivial"]["severity"] == "warning" and "vocab-map-invalid" not in found


def test_value_checks(tmp_path):
    spec = make_spec(fc_norm=True)
    state = canonical_state(spec)
    state["fc_norm.1.weight"] = torch.ones_like(state["fc_norm.1.weight"])
    state["norm.weight"] = torch.zeros_like(state["norm.weight"])
    state["layers.0.mlp.up_proj.weight"][0, 0] = float("nan")
    fc = state["fc.weight"]
    fc[:, 128:192] = fc[:, 64:128]  # aux slots 1 and 2 read the same weights
    out = converted(tmp_path, spec=spec, state=state)
    r, found = lint_json(out)
    assert r.code == 1
    assert found["norm-untrained"]["severity"] == "warning" and "fc_norm.1" in found["norm-untrained"]["message"]
    assert found["norm-zero"]["severity"] == "error"
    assert "layers.0.mlp.up_proj.weight" in found["nan-inf"]["message"]
    assert "slots 1 and 2" in found["duplicate-aux-slots"]["message"]


def test_complex_weights_are_an_error_and_convert_refuses_them(tmp_path):
    """Engines' loaders keep a complex tensor's real part only: the drafter would run other weights."""
    state = canonical_state(make_spec())
    state["fc.weight"] = state["fc.weight"].to(torch.complex64)
    src = make_drafter(tmp_path / "src", "safeai", file="safetensors", state=state)
    r, found = lint_json(src, *IDS)
    assert r.code == 1 and found["dtype-complex"]["severity"] == "error"
    assert found["dtype-complex"]["message"].startswith("fc.weight is complex (C64)")
    engines = json.loads(r.out)["engines"]
    assert engines and not any(e["faithful"] for e in engines)
    assert_clean_failure(
        run_inprocess("convert", src, tmp_path / "out", *IDS), tmp_path / "out", contains="fc.weight is complex (C64)"
    )


def test_target_mismatches(tmp_path):
    out = converted(tmp_path)
    r, found = lint_json(out, "--target", make_target(tmp_path / "t", hidden=96, vocab=300, layers=2))
    assert r.code == 1
    assert {"target-hidden-mismatch", "vocab-mismatch", "aux-ids-range"} <= found.keys()
    r, found = lint_json(
        out, "--target", make_target(tmp_path / "t2", max_position_embeddings=8192, rope_theta=500000.0)
    )
    assert r.code == 0 and "context-rope" in found


def test_engine_faithfulness_and_config_traps(tmp_path):
    out = converted(tmp_path, spec=make_spec(norm_before_residual=True))
    r, found = lint_json(out)
    unfaithful = [f["message"] for f in r.json()["findings"] if f["code"] == "engine-unfaithful"]
    assert any(m.startswith("sglang") for m in unfaithful) and any(m.startswith("tensorrt-llm") for m in unfaithful)
    cfg = json.loads((out / "config.json").read_text())
    cfg["tie_word_embeddings"] = True
    (out / "config.json").write_text(json.dumps(cfg))
    r, found = lint_json(out)
    assert r.code == 1 and "tie-word-embeddings" in found


def test_ids_shifted_after_conversion(tmp_path):
    out = converted(tmp_path)
    cfg = json.loads((out / "config.json").read_text())
    cfg["eagle_aux_hidden_state_layer_ids"] = cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]  # vLLM #43671
    (out / "config.json").write_text(json.dumps(cfg))
    r, found = lint_json(out)
    assert r.code == 1 and "aux-ids-disagree" in found and "43671" in found["aux-ids-disagree"]["hint"]
    del cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    (out / "config.json").write_text(json.dumps(cfg))
    r, found = lint_json(out)
    assert r.code == 1 and "aux-ids-changed" in found


def test_embed_tokens_compared_with_the_targets(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    target = tmp_path / "target"
    LlamaForCausalLM(
        LlamaConfig(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    ).save_pretrained(target)
    src = make_drafter(tmp_path / "src", "speculators", embed=True, spec=make_spec(norm_before_residual=False))
    r, found = lint_json(src, "--target", target, "--flag", "norm_before_residual=false")
    assert "embed-differs" in found


def test_unreadable_files_are_bad_input(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai", file="safetensors")
    (src / "model.safetensors").write_bytes(b"\x00" * 4)
    assert_clean_failure(run_inprocess("lint", src), None, contains="truncated")
    assert_clean_failure(run_inprocess("lint", tmp_path / "nope"), None, contains="no such directory")


def test_identical_fc_norms_are_a_warning_of_their_own_and_identical_fc_columns_an_error(tmp_path):
    """One code, one severity (docs/lint-codes.md): two trained fc_norm weights alike only suggest a layer captured
    twice (duplicate-aux-norms, a warning); two slots' fc columns alike prove it (duplicate-aux-slots, an error)."""
    spec = make_spec(fc_norm=True)
    state = canonical_state(spec)
    state["fc_norm.2.weight"] = state["fc_norm.1.weight"].clone()
    r, found = lint_json(converted(tmp_path, spec=spec, state=state))
    assert found["duplicate-aux-norms"]["severity"] == "warning" and "duplicate-aux-slots" not in found, found
    assert "fc_norm.1 and fc_norm.2" in found["duplicate-aux-norms"]["message"]
