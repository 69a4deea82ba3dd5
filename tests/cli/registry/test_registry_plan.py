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
    assert not plan["unverifiable"]  # DSpark too: on llama.cpp (test_dspark_entries_are_verified_on_llama_cpp)
    assert planned | set(plan["waiting"]) == published and not planned & set(plan["waiting"])
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
    where no engine verify runs measures its family, listed as not verified, with why."""
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
    unsized = reg / "inferact-minimax-m3-eagle3.yaml"  # an entry that states no size waits on its sync
    other = yaml.safe_load(unsized.read_text())
    del other["target_parameters"], other["evidence"]["target_parameters"]
    unsized.write_text(yaml.safe_dump(other, sort_keys=False))
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
    """Issue 43, item 6: every published entry has a runner class, stated or derived from the target's stated size
    with the arithmetic (labelled derived), and a verify job there: none waits on a sync, none is unverifiable; no
    ~1T-parameter target on one GPU."""
    r = run_inprocess("registry", "plan", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    registry = {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "registry").glob("*.yaml")}
    runner = {j["id"]: c["runner"] for c in plan["classes"] if c["runner"] in plan["runners"] for j in c["jobs"]}
    published = {i for i, d in registry.items() if d["drafter"].get("repo")}
    assert set(runner) == published, sorted(published - set(runner))
    assert not plan["waiting"] and not plan["unverifiable"] and not plan.get("unrunnable")
    for entry_id in published:
        if registry[entry_id].get("hardware") is None:
            assert plan["estimated"][entry_id].startswith(f"{runner[entry_id]}: derived: "), entry_id
    kimi = "aq-medai-kimi-k2-instruct-eagle3"  # 1T parameters in FP8, as its model card states
    assert runner[kimi] == "gpu-2x8x141g"
    derived = plan["estimated"][kimi]
    assert derived.startswith("gpu-2x8x141g: derived: ") and "1000B parameters at 1 bytes (as fp8) = 1000 GB" in derived
    assert "KV cache at most 2 x 61 layers x 7168 hidden x 2 bytes x 65536 tokens = 114.6 GB" in derived
    for entry_id, data in registry.items():
        if (data.get("target_parameters") or 0) >= 100_000_000_000 and entry_id in runner:
            assert runner[entry_id] != "gpu-1x80g", entry_id


INT4 = (
    "lightseekorg-kimi-k2.5-eagle3",
    "lightseekorg-kimi-k2.6-eagle3.1-mla",
    "lightseekorg-kimi-k2.7-coder-eagle3.1-mla",
)


def test_a_native_int4_target_is_sized_at_its_packed_width():
    """Kimi K2.5, K2.6 and K2.7-Code: 1T parameters (their model cards) in native INT4 (0.5 byte a weight + a 2-byte
    scale per 32 = 0.5625 bytes) = 562.5 GB, + the KV bound 114.6 GB = 677.1 GB: over 8 GPUs 84.6 + 4.29 GiB of
    overhead = 88.9 GB a GPU, more than 0.9 x 80 = 72 and within 0.9 x 141 = 126.9, so 8x141 GB, tensor parallel 8.
    At the 2 bytes assumed before, 2114.6 GB: no runner class holds it."""
    r = run_inprocess("registry", "plan", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    jobs = {j["id"]: (c["runner"], j["command"]) for c in plan["classes"] for j in c["jobs"]}
    for entry_id in INT4:
        runner, command = jobs[entry_id]
        assert runner == "gpu-8x141g" and "--tensor-parallel-size 8 " in command, (entry_id, runner)
        derived = plan["estimated"][entry_id]
        assert "1000B parameters at 0.5625 bytes (as int4: 0.5 byte a weight + a 2-byte scale per 32 weights" in derived
        assert "target_dtype model-card: https://huggingface.co/moonshotai/" in derived or "ROCm/ATOM" in derived
        assert ") = 562 GB of weights" in derived
        assert "KV cache at most 2 x 61 layers x 7168 hidden x 2 bytes x 65536 tokens = 114.6 GB" in derived
    (weights, kv) = (1e12 * (0.5 + 2 / 32), 2 * 61 * 7168 * 2 * 65536)
    per_gpu = (weights + kv) / 8 + 4 * 1024**3
    assert 0.9 * 80e9 < per_gpu <= 0.9 * 141e9  # the rule's arithmetic, as the test states it
    m3 = plan["estimated"]["inferact-minimax-m3-eagle3"]  # its card: ~428B parameters, bfloat16
    assert m3.startswith("gpu-8x141g: derived: ") and "428B parameters at 2 bytes (as bfloat16) = 856 GB" in m3


def test_the_int4_width_is_the_rule_not_the_default(tmp_path):
    """The same entry with its dtype taken away is sized at 2 bytes (bf16 assumed): 2000 GB + the KV bound 114.6 GB,
    which no runner class holds."""
    reg = tmp_path / "registry"
    shutil.copytree(ROOT / "registry", reg, ignore=shutil.ignore_patterns("reports", "tiny-*", "smollm2-*"))
    path = reg / f"{INT4[0]}.yaml"
    data = yaml.safe_load(path.read_text())
    assert data["target_dtype"] == "int4"
    del data["target_dtype"], data["evidence"]["target_dtype"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "plan", "--registry", reg, "--json")
    assert r.code == 1 and "2115 GB of weights do not fit" in r.json()["unrunnable"][INT4[0]], r.out


def test_dspark_entries_are_verified_on_llama_cpp(tmp_path):
    """The engine that runs DSpark in eaglezoo is llama.cpp (verify --engine llamacpp, --spec-type draft-dspark):
    each DSpark entry gets its verify job there, in its runner class, with llama.cpp's command (no vLLM options), at a
    K within its block; and `registry check` accepts `engine: llamacpp` on a DSpark entry whose config is unread."""
    r = run_inprocess("registry", "plan", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    registry = {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "registry").glob("*.yaml")}
    dspark = sorted(i for i, d in registry.items() if d.get("family") == "dspark" and d["drafter"].get("repo"))
    assert len(dspark) == 3
    for entry_id in dspark:
        (job,) = [
            j for c in plan["classes"] if c["runner"] in plan["runners"] for j in c["jobs"] if j["id"] == entry_id
        ]
        k, ctx = 3, min(8192, registry[entry_id].get("max_position_embeddings") or 8192)
        assert job["command"] == (  # the context capped as the hardware rule's KV term assumes (not the target's own)
            f"eaglezoo verify {entry_id} --engine llamacpp --num-spec-tokens {k} --temperature 0 "
            f"--max-model-len {ctx} --report reports/{entry_id}.k{k}.t0.llamacpp.json"
        )
        assert k <= (registry[entry_id].get("block_size") or k)  # anchor sampled: K <= block (verify refuses past it)
        assert job["command"] in plan["commands"] and entry_id not in plan["unverifiable"]
    reg = tmp_path / "registry"
    shutil.copytree(ROOT / "registry", reg, ignore=shutil.ignore_patterns("reports", "tiny-*", "smollm2-*"))
    path = reg / f"{dspark[0]}.yaml"
    data = yaml.safe_load(path.read_text())
    data["engines"].append({"engine": "llamacpp", "notes": "llama.cpp b11434 --spec-type draft-dspark"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "check", "--registry", reg, dspark[0])
    assert r.code == 0 and "0 with problems" in r.out, r.out
    shown = run_inprocess("registry", "list", "--registry", reg, "--json")
    (entry,) = [e for e in shown.json() if e["id"] == dspark[0]]
    (llama,) = [s for s in entry["serving"] if s["engine"] == "llamacpp"]
    assert llama["state"] == "config unread" and "mask_token_id" in llama["why"]
    jobs = [
        j for c in run_inprocess("registry", "plan", "--registry", reg, "--json").json()["classes"] for j in c["jobs"]
    ]
    assert [j["command"].split(" --registry")[0] for j in jobs if j["id"] == dspark[0]] == [
        f"eaglezoo verify {dspark[0]} --engine llamacpp --num-spec-tokens 3 --temperature 0 --max-model-len 8192"
    ]
