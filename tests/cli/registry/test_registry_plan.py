"""`registry plan` on the shipped registry and on registries of its own: every published entry a job, grouped by
runner class with its exact command, or waiting on the `registry sync ID --write` that computes the class; a class no
runner has is refused; each setting planned once, against the registry asked for."""

from __future__ import annotations

import shutil

import yaml
from conftest import ROOT, run_inprocess


def test_plan_groups_the_shipped_registry_by_runner_with_exact_commands():
    r = run_inprocess("registry", "plan", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    registry = {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "registry").glob("*.yaml")}
    planned = {j["id"] for c in plan["classes"] if c["runner"] in plan["runners"] for j in c["jobs"]}
    published = {k for k, v in registry.items() if v["drafter"].get("repo")}
    dspark = {k for k in published if registry[k].get("family") == "dspark"}
    assert set(plan["unverifiable"]) == dspark  # no engine verify runs measures DSpark yet (test_registry_llamacpp.py)
    assert planned | set(plan["waiting"]) | dspark == published and not planned & set(plan["waiting"])
    for c in plan["classes"]:
        for j in c["jobs"] if c["runner"] in plan["runners"] else []:  # waiting-on-sync: below
            if j["id"] in plan["estimated"] or "--engine llamacpp" in j["command"]:
                continue  # derived from stated facts (below) or not a vLLM job
            hw = registry[j["id"]]["hardware"]
            assert j["command"].startswith(f"eaglezoo verify {j['id']} --engine vllm")
            assert f"--tensor-parallel-size {hw['tensor_parallel_size']}" in j["command"]
            assert ("--enable-expert-parallel" in j["command"]) == hw["expert_parallel"]
            assert c["runner"].endswith(f"{hw['gpus_per_node']}x{hw['gpu_memory_gb']}g")
    lines = run_inprocess("registry", "plan", "--runner", plan["runners"][0], "--commands").out.splitlines()
    assert lines == [j["command"] for j in plan["classes"][0]["jobs"]]


def test_a_hand_set_class_without_a_runner_is_refused(tmp_path):
    reg = tmp_path / "registry"
    shutil.copytree(ROOT / "registry", reg, ignore=shutil.ignore_patterns("reports", "tiny-*"))
    path = reg / "nvidia-llama-3.3-70b-instruct-eagle3.yaml"
    data = yaml.safe_load(path.read_text())
    data["hardware"].update(gpus_per_node=3, tensor_parallel_size=3, source="hand: a 3-GPU box")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "plan", "--registry", reg, "--json")
    assert (
        r.code == 1 and "gpu-3x80g has no CI runner" in r.json()["unrunnable"]["nvidia-llama-3.3-70b-instruct-eagle3"]
    )
    r = run_inprocess("registry", "check", "--registry", reg, "nvidia-llama-3.3-70b-instruct-eagle3")
    assert r.code == 1 and "has no CI runner" in r.out


def test_plan_runs_each_setting_once_against_the_registry_it_was_asked_for(tmp_path):
    reg = tmp_path / "registry"
    shutil.copytree(ROOT / "registry", reg, ignore=shutil.ignore_patterns("reports", "tiny-*"))
    path = reg / "nvidia-llama-3.3-70b-instruct-eagle3.yaml"
    data = yaml.safe_load(path.read_text())
    data["acceptance_floors"] = [
        {"k": 3, "temperature": 0.0, "mean_acceptance_length": 2.0, "source": "a test"},
        {"k": 3, "temperature": 0.0, "condition": "template", "mean_acceptance_length": 2.0, "source": "a test"},
        {"k": 3, "temperature": 0.0, "condition": "system:brief", "mean_acceptance_length": 1.5, "source": "a test"},
        {"k": 5, "temperature": 0.0, "mean_acceptance_length": 2.2, "source": "a test"},
    ]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "plan", "--registry", reg, "--json")
    assert r.code == 0, r.err
    jobs = [j for c in r.json()["classes"] for j in c["jobs"] if j["id"] == "nvidia-llama-3.3-70b-instruct-eagle3"]
    assert [(j["k"], j["report"]) for j in jobs] == [
        (3, "reports/nvidia-llama-3.3-70b-instruct-eagle3.k3.t0.json"),
        (5, "reports/nvidia-llama-3.3-70b-instruct-eagle3.k5.t0.json"),
    ]
    assert all(f"--registry {reg}" in j["command"] for c in r.json()["classes"] for j in c["jobs"])
    assert "--registry" not in run_inprocess("registry", "plan", "--commands").out  # the default registry: as before


def published() -> set[str]:
    """The published entries: every one with a drafter repo, of every family."""
    entries = [yaml.safe_load(p.read_text()) for p in (ROOT / "registry").glob("*.yaml")]
    return {e["id"] for e in entries if e["drafter"].get("repo")}


def test_plan_gives_every_published_entry_a_job():
    """Each entry with a drafter repo: a job in its runner class, or one waiting on its sync, then its verify; or,
    where no engine verify runs measures its family (DSpark), listed as not verified, with why."""
    r = run_inprocess("registry", "plan", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    jobs = {c["runner"]: c["jobs"] for c in plan["classes"]}
    assert {j["id"] for js in jobs.values() for j in js} | set(plan["unverifiable"]) == published()
    waiting = jobs.get("waiting-on-sync", [])
    assert "waiting-on-sync" not in plan["runners"] and set(plan["runners"]) == set(jobs) - {"waiting-on-sync"}
    assert set(plan["waiting"]) == {j["id"] for j in waiting}
    for j in waiting:
        sync = f"eaglezoo registry sync {j['id']} --write"
        assert j["after"] == plan["waiting"][j["id"]]["sync"] == sync
        assert j["command"].startswith(f"eaglezoo verify {j['id']} --engine ") and "--report" in j["command"]
        assert j["command"] not in plan["commands"]  # no runner runs it before the sync gives its class
    runnable = [j["command"] for runner in plan["runners"] for j in jobs[runner]]
    vllm = [c for c in runnable if "--engine vllm" in c]
    assert plan["commands"] == runnable and all("--tensor-parallel-size" in c for c in vllm)
    text = run_inprocess("registry", "plan")
    assert text.code == 0 and "not planned" not in text.out
    assert all(f"eaglezoo registry sync {j['id']} --write" in text.out for j in waiting)
    assert ("waiting-on-sync" in text.out) == bool(waiting)
    assert run_inprocess("registry", "plan", "--commands").out.splitlines() == runnable


def test_a_stated_parameter_count_gives_the_class(tmp_path):
    """An entry whose target's size is stated with its evidence (not synced) is planned by the hardware rule: Kimi
    K2's 1.03T FP8 parameters need two 8x141 GB nodes; at 2 bytes no runner holds them."""
    reg = tmp_path / "registry"
    shutil.copytree(ROOT / "registry", reg, ignore=shutil.ignore_patterns("reports", "tiny-*", "smollm2-*"))
    entry_id = "aq-medai-kimi-k2-instruct-eagle3"
    path = reg / f"{entry_id}.yaml"
    data = yaml.safe_load(path.read_text())
    assert data.get("hardware") is None
    card = {"level": "model-card", "source": "https://huggingface.co/moonshotai/Kimi-K2-Instruct"}
    data.update(target_parameters=1_026_000_000_000, target_dtype="float8_e4m3fn")
    data["evidence"].update(target_parameters=card, target_dtype=card)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "plan", "--registry", reg, "--json")
    assert r.code == 0, r.err
    (job,) = [j for c in r.json()["classes"] if c["runner"] == "gpu-2x8x141g" for j in c["jobs"]]
    assert job["id"] == entry_id and "after" not in job and entry_id not in r.json()["waiting"]
    assert "--tensor-parallel-size 16" in job["command"] and "--distributed-executor-backend ray" in job["command"]
    assert "1026B parameters at 1 bytes" in r.json()["estimated"][entry_id]
    waiting = [j for c in r.json()["classes"] if c["runner"] == "waiting-on-sync" for j in c["jobs"]]
    assert waiting and all(j["after"].endswith(f"--write --registry {reg}") for j in waiting)
    lines = run_inprocess(
        "registry", "plan", "--registry", reg, "--runner", "gpu-2x8x141g", "--commands"
    ).out.splitlines()
    assert lines == [job["command"]]
    data["target_dtype"] = "bfloat16"  # 2052 GB: more than 2 x 8 x 141 GB hold
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "plan", "--registry", reg, "--json")
    assert r.code == 1 and "do not fit" in r.json()["unrunnable"][entry_id], r.out


def test_every_published_entry_is_planned_on_the_hardware_it_needs():
    """Issue 43, item 6: a class stated, or derived from the target's stated size with the arithmetic (labelled
    derived); no ~1T-parameter target on one GPU; the DSpark entries, which no engine verify runs measures yet, are
    listed as not verified, with why."""
    r = run_inprocess("registry", "plan", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    registry = {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "registry").glob("*.yaml")}
    runner = {j["id"]: c["runner"] for c in plan["classes"] for j in c["jobs"]}
    kimi = "aq-medai-kimi-k2-instruct-eagle3"  # 1T parameters in FP8, as its model card states
    assert runner[kimi] == "gpu-2x8x141g"
    derived = plan["estimated"][kimi]
    assert derived.startswith("gpu-2x8x141g: derived: ") and "1000B parameters at 1 bytes (as fp8) = 1000 GB" in derived
    assert "KV cache at most 2 x 61 layers x 7168 hidden x 2 bytes x 65536 tokens = 114.6 GB" in derived
    for entry_id, data in registry.items():
        if (data.get("target_parameters") or 0) >= 100_000_000_000 and entry_id in runner:
            assert runner[entry_id] not in ("gpu-1x80g", "waiting-on-sync"), entry_id
    # every entry that still waits on a sync states no size for the rule to derive from, and says why
    for entry_id in plan["waiting"]:
        assert not registry[entry_id].get("target_parameters") and registry[entry_id]["null_reasons"]["hardware"]
    dspark = [i for i, d in registry.items() if d.get("family") == "dspark" and d["drafter"].get("repo")]
    assert len(dspark) == 3
    for entry_id in dspark:
        assert not [j for c in plan["classes"] for j in c["jobs"] if j["id"] == entry_id]
        assert "verify --engine llamacpp measures eagle3 and dflash" in plan["unverifiable"][entry_id]
