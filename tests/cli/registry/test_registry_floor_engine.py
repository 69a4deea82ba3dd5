"""A floor measured on llama.cpp can be written: a floor's `engine` is any engine a verify report says it measured
on (names.VerifyEngine), llamacpp included (it was native, vllm or endpoint alone, so `registry check` refused an
entry whose floor a `verify --engine llamacpp` run set)."""

from __future__ import annotations

import yaml
from conftest import ROOT, run_inprocess


def test_a_floor_measured_on_llamacpp_checks(tmp_path):
    entry = yaml.safe_load((ROOT / "registry" / "angelslim-qwen3-8b-eagle3.yaml").read_text())
    entry["null_reasons"].pop("acceptance_floors")
    floor = {"k": 3, "temperature": 0.0, "mean_acceptance_length": 1.5, "source": "a llama-server run"}
    entry["acceptance_floors"] = [{**floor, "engine": "llamacpp"}]
    (tmp_path / "registry").mkdir()
    (tmp_path / "registry" / "angelslim-qwen3-8b-eagle3.yaml").write_text(yaml.safe_dump(entry, sort_keys=False))
    r = run_inprocess("registry", "check", "--json", env={"EAGLEZOO_REGISTRY": str(tmp_path / "registry")})
    assert r.code == 0 and r.json()["failed"] == 0, r.out
    shown = run_inprocess(
        "registry", "show", "angelslim-qwen3-8b-eagle3", "--json", env={"EAGLEZOO_REGISTRY": str(tmp_path / "registry")}
    )
    assert shown.json()["acceptance_floors"][0]["engine"] == "llamacpp", shown.out
