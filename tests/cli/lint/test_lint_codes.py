"""Codes that had two severities, now one code for each fact (docs/lint-codes.md), as `eaglezoo lint --json` shows
them: vLLM's speculators path ignoring DFlash's block_size (engine-ignores, info) is not its dropping a P-EAGLE
drafter's norm flags (engine-drops-flags, an error: vLLM would serve another drafter)."""

from __future__ import annotations

import json

import torch
from conftest import run_inprocess
from safetensors.torch import load_file, save_file
from support import families as F


def findings(folder) -> dict[str, dict]:
    r = run_inprocess("lint", folder, "--json")
    assert r.code in (0, 1), r.err
    return {f["code"]: f for f in r.json()["findings"]}


def speculators_copy(native, out):
    r = run_inprocess("convert", native, out, "--to", "speculators")
    assert r.code == 0, r.err
    return out


def test_a_speculators_dflash_block_size_vllm_ignores_is_info(tmp_path):
    found = findings(speculators_copy(F.zlab_dflash(tmp_path / "native"), tmp_path / "spec"))
    assert found["engine-ignores"]["severity"] == "info" and "block_size" in found["engine-ignores"]["message"]
    assert "engine-drops-flags" not in found


def test_a_speculators_peagle_with_norm_flags_is_an_error_of_its_own(tmp_path):
    native = F.peagle_native(tmp_path / "native")
    config = json.loads((native / "config.json").read_text())
    (native / "config.json").write_text(json.dumps({**config, "fc_norm": True, "norm_output": True}))
    state = load_file(str(native / "model.safetensors"))
    for j in range(3):  # trained per-slot norms, as an EAGLE 3.1 drafter ships them
        state[f"fc_norm.{j}.weight"] = torch.linspace(0.5, 1.5, config["hidden_size"]).to(state["norm.weight"].dtype)
    save_file(state, str(native / "model.safetensors"), metadata={"format": "pt"})
    assert "engine-drops-flags" not in findings(native)  # the native form: vLLM reads its flags
    found = findings(speculators_copy(native, tmp_path / "spec"))
    assert found["engine-drops-flags"]["severity"] == "error" and "engine-ignores" not in found
    assert "--to native" in found["engine-drops-flags"]["hint"]
