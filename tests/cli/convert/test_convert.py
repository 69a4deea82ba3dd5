"""eaglezoo convert, through the CLI, on real files in every dialect."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import run_inprocess, tree_digest
from safetensors.torch import load_file
from support.factory import canonical_state, make_drafter, make_mla_drafter, make_spec, make_target

DIALECTS = ["safeai", "specforge", "modelopt", "nemo", "torchspec", "speculators"]
IDS = ["--aux-layers", "1,2,3", "--aux-convention", "boundary"]


def converted_state(out):
    return load_file(str(out / "model.safetensors"))


def expected_state(spec, dialect, seed=0):
    state = canonical_state(spec, seed)
    state.pop("embed_tokens.weight")
    if dialect == "modelopt":
        state.pop("t2d")
    return state


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_to_eagle31_is_lossless(tmp_path, dialect):
    spec = make_spec(fc_norm=True, norm_output=True)
    src = make_drafter(tmp_path / "src", dialect, spec=spec)
    before = tree_digest(src)
    args = ["convert", src, tmp_path / "out", "--json"]
    if dialect in ("safeai", "nemo"):
        args += IDS  # no documented ids in these dialects
    if dialect == "specforge":
        args += ["--flag", "norm_output=true"]
    r = run_inprocess(*args)
    assert r.code == 0, r.err
    result = r.json()
    assert result["plan"]["dialect"] == dialect
    out = tmp_path / "out"
    got, want = converted_state(out), expected_state(spec, dialect)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype and torch.equal(got[name], want[name]), name
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
    assert cfg["num_aux_hidden_states"] == 3
    assert {cfg[f] for f in ("fc_norm", "norm_output")} == {True}
    assert cfg["norm_before_fc"] is False and cfg["norm_before_residual"] is False
    assert cfg["tie_word_embeddings"] is False and "target_hidden_size" not in cfg
    record = json.loads((out / "conversion.json").read_text())
    assert record["source"]["dialect"] == dialect and record["output"]["model.safetensors"]
    assert tree_digest(src) == before


def test_plain_eagle3_gets_explicit_false_flags_and_records_decisions(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    r = run_inprocess("convert", src, tmp_path / "out", *IDS)
    assert r.code == 0, r.err
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (cfg["fc_norm"], cfg["norm_output"], cfg["norm_before_fc"], cfg["norm_before_residual"]) == (False,) * 4
    record = json.loads((tmp_path / "out" / "conversion.json").read_text())
    assert any("as stated by the user" in d for d in record["decisions"])
    assert record["renames"]["midlayer.self_attn.q_proj.weight"] == "layers.0.self_attn.q_proj.weight"


def test_nested_layer_output_ids_become_boundary_at_top_level(tmp_path):
    spec = make_spec(ids=(3, 6, 9))  # boundary; SpecForge stores layer-output [2, 5, 8]
    src = make_drafter(tmp_path / "src", "specforge", spec=spec)
    assert json.loads((src / "config.json").read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [
        2,
        5,
        8,
    ]
    r = run_inprocess("convert", src, tmp_path / "out", "--target", make_target(tmp_path / "t", layers=12))
    assert r.code == 0, r.err
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [3, 6, 9]
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 5, 8]


def test_missing_ids_need_a_statement_or_a_target(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    r = run_inprocess("convert", src, tmp_path / "out")
    assert r.code == 2 and "no aux-layer ids" in r.err and not (tmp_path / "out").exists()
    r = run_inprocess("convert", src, tmp_path / "out", "--target", make_target(tmp_path / "t", layers=8), "--json")
    assert r.code == 0, r.err
    plan = r.json()["plan"]
    assert any("documented default" in d and "[2, 4, 5]" in d for d in plan["decisions"])
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]


def test_specforge_norm_output_is_never_resolved_silently(tmp_path):
    src = make_drafter(tmp_path / "src", "specforge", spec=make_spec(fc_norm=True, norm_output=True))
    r = run_inprocess("convert", src, tmp_path / "out")
    assert r.code == 2 and "ambiguous" in r.err and "--flag norm_output" in r.err
    r = run_inprocess("convert", src, tmp_path / "out", "--flag", "norm_output=false")
    assert r.code == 0, r.err
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["norm_output"] is False and cfg["fc_norm"] is True
    record = json.loads((tmp_path / "out" / "conversion.json").read_text())
    assert "norm_output=False as stated by the user (config: True)" in record["decisions"]


def test_legacy_aux_norm_names_and_flag(tmp_path):
    spec = make_spec(fc_norm=True)
    src = make_drafter(tmp_path / "src", "safeai", spec=spec, legacy_aux_norm=True)
    r = run_inprocess("convert", src, tmp_path / "out", *IDS)
    assert r.code == 0, r.err
    got = converted_state(tmp_path / "out")
    assert torch.equal(got["fc_norm.2.weight"], canonical_state(spec)["fc_norm.2.weight"])
    assert json.loads((tmp_path / "out" / "config.json").read_text())["fc_norm"] is True


def test_norm_before_fc_variant_and_sharded_input(tmp_path):
    spec = make_spec(norm_before_fc=True, norm_output=True, norm_before_residual=True)
    src = make_drafter(tmp_path / "src", "speculators", spec=spec, file="sharded")
    r = run_inprocess("convert", src, tmp_path / "out")
    assert r.code == 0, r.err
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["norm_before_fc"] is True and cfg["eagle_config"]["norm_before_fc"] is True
    assert cfg["norm_before_residual"] is True
    assert torch.equal(
        converted_state(tmp_path / "out")["input_norm.weight"], canonical_state(spec)["input_norm.weight"]
    )


def test_trivial_vocab_map_is_dropped_with_a_reason(tmp_path):
    spec = make_spec(draft_vocab=256)  # V_d == V; SpecForge still saves d2t/t2d
    src = make_drafter(tmp_path / "src", "specforge", spec=spec)
    r = run_inprocess("convert", src, tmp_path / "out", "--json")
    assert r.code == 0, r.err
    drops = {d["name"]: d["reason"] for d in r.json()["plan"]["drops"]}
    assert set(drops) == {"d2t", "t2d"} and "identity" in drops["d2t"]
    assert "d2t" not in converted_state(tmp_path / "out")


def test_dtype_cast_never_touches_int_and_bool_buffers(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    r = run_inprocess("convert", src, tmp_path / "out", *IDS, "--dtype", "bfloat16")
    assert r.code == 0, r.err
    got = converted_state(tmp_path / "out")
    assert got["fc.weight"].dtype == torch.bfloat16
    assert got["d2t"].dtype == torch.int64 and got["t2d"].dtype == torch.bool
    assert json.loads((tmp_path / "out" / "config.json").read_text())["torch_dtype"] == "bfloat16"


def test_dry_run_writes_nothing_and_shows_the_plan(tmp_path):
    src = make_drafter(tmp_path / "src", "nemo")
    r = run_inprocess("convert", src, tmp_path / "out", *IDS, "--dry-run", "--json")
    assert r.code == 0, r.err
    plan = r.json()["plan"]
    assert plan["dialect"] == "nemo" and any(x["source"] == "model.fc.weight" for x in plan["renames"])
    assert any(c["key"] == "fc_norm" for c in plan["config_diff"])
    assert not (tmp_path / "out").exists()
    text = run_inprocess("convert", src, tmp_path / "out", *IDS, "--dry-run")
    assert (
        text.code == 0 and "dry run: nothing written" in text.out and "rename model.fc.weight -> fc.weight" in text.out
    )


def test_round_trip_eagle31_speculators_eagle31(tmp_path):
    spec = make_spec(fc_norm=True, norm_output=True, target_hidden=64)
    src = make_drafter(tmp_path / "src", "torchspec", spec=spec)
    assert run_inprocess("convert", src, tmp_path / "a").code == 0
    r = run_inprocess("convert", tmp_path / "a", tmp_path / "spec", "--to", "speculators", "--verifier", "org/target")
    assert r.code == 0, r.err
    scfg = json.loads((tmp_path / "spec" / "config.json").read_text())
    assert scfg["speculators_model_type"] == "eagle3" and scfg["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert scfg["fc_norm"] is True and scfg["speculators_config"]["verifier"]["name_or_path"] == "org/target"
    r = run_inprocess("convert", tmp_path / "spec", tmp_path / "b")
    assert r.code == 0, r.err
    a, b = converted_state(tmp_path / "a"), converted_state(tmp_path / "b")
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    ca = json.loads((tmp_path / "a" / "config.json").read_text())
    cb = json.loads((tmp_path / "b" / "config.json").read_text())
    assert ca == cb
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()


def test_forward_pass_is_bit_identical_after_conversion(tmp_path):
    from eaglezoo.checkpoint.formats.base import ReadOptions
    from eaglezoo.checkpoint.read import read_drafter
    from eaglezoo.checkpoint.spec import AuxLayers
    from eaglezoo.verify.drafter import build_drafter

    spec = make_spec(fc_norm=True, norm_output=True)
    src = make_drafter(tmp_path / "src", "safeai", spec=spec, file="bin")
    assert run_inprocess("convert", src, tmp_path / "out", *IDS).code == 0
    embed = torch.randn(spec.vocab_size, spec.hidden_size, generator=torch.Generator().manual_seed(1))
    outputs = []
    for d in (src, tmp_path / "out"):
        opts = ReadOptions(aux_layers=(1, 2, 3) if d == src else None, aux_convention="boundary" if d == src else None)
        read = read_drafter(d, None, opts)
        state = {name: read.load(name) for name in read.refs}
        model = build_drafter(read.spec, state, embed=embed)
        g = torch.Generator().manual_seed(2)
        aux = [torch.randn(20, spec.target_hidden_size, generator=g) for _ in range(3)]
        tokens = torch.randint(0, spec.vocab_size, (20,), generator=g)
        with torch.inference_mode():
            outputs.append(model.draft_chains(aux, tokens, 3, keep_logits=True))
        assert read.spec.aux == AuxLayers(ids=(1, 2, 3), convention="boundary")
    for la, lb in zip(outputs[0].logits, outputs[1].logits, strict=True):
        assert torch.equal(la, lb)
    assert torch.equal(outputs[0].draft_ids, outputs[1].draft_ids)


def test_target_checks_and_context_warning(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    t = make_target(tmp_path / "t", layers=4, max_position_embeddings=4096)
    r = run_inprocess("convert", src, tmp_path / "out", *IDS, "--target", t, "--json")
    assert r.code == 0, r.err
    assert any("max_position_embeddings 512 < target's 4096" in w for w in r.json()["plan"]["warnings"])
    r = run_inprocess(
        "convert", src, tmp_path / "o2", "--aux-layers", "3,4,5", "--aux-convention", "boundary", "--target", t
    )
    assert r.code == 2 and "outside the target" in r.err
    r = run_inprocess("convert", src, tmp_path / "o3", *IDS, "--target", make_target(tmp_path / "t2", hidden=96))
    assert r.code == 2 and "hidden_size" in r.err
    r = run_inprocess("convert", src, tmp_path / "o4", *IDS, "--target", make_target(tmp_path / "t3", vocab=300))
    assert r.code == 2 and "vocab_size" in r.err


def test_force_replaces_out_atomically(tmp_path):
    src = make_drafter(tmp_path / "src", "safeai")
    out = tmp_path / "out"
    assert run_inprocess("convert", src, out, *IDS).code == 0
    r = run_inprocess("convert", src, out, *IDS, "--to", "speculators", "--force")
    assert r.code == 0, r.err
    assert "speculators_config" in json.loads((out / "config.json").read_text())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_mla_drafter_is_carried_through_losslessly(tmp_path):
    """A TorchSpec Kimi-style MLA drafter (docs/formats.md#mla-drafters): MLA attention tensors, nested ids,
    V_d == V."""
    src, state = make_mla_drafter(tmp_path / "mla")
    r_ = run_inprocess("convert", src, tmp_path / "out", "--json")
    assert r_.code == 0, r_.err
    out_cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert out_cfg["architectures"] == ["Eagle3DeepseekV2ForCausalLM"] and out_cfg["kv_lora_rank"] == 16
    assert out_cfg["eagle_aux_hidden_state_layer_ids"] == [2, 30, 58]
    assert out_cfg["eagle_config"]["use_last_layernorm"] is True
    got = converted_state(tmp_path / "out")
    for name, t in state.items():
        assert torch.equal(got[name.replace("midlayer.", "layers.0.")], t), name
    lint = run_inprocess("lint", tmp_path / "out", "--json").json()
    vllm = next(e for e in lint["engines"] if e["engine"] == "vllm")
    assert vllm["min_version"] == "0.23.0"  # fc_norm applied by the MLA drafter only from 0.23.0
    r_ = run_inprocess("convert", src, tmp_path / "spec", "--to", "speculators")
    assert r_.code == 2 and "llama and qwen3 drafters only" in r_.err and not (tmp_path / "spec").exists()
