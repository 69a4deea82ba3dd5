"""The registry, serve-config and the CI workflow files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, assert_clean_failure, run_inprocess
from support.factory import make_drafter
from support.registry_entries import GOOD

REGISTRY = ROOT / "registry"


def test_registry_holds_at_least_30_sourced_entries_that_check():
    r = run_inprocess("registry", "check", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["checked"] >= 30 and r.json()["failed"] == 0
    entries = run_inprocess("registry", "list", "--json").json()
    assert len(entries) >= 30
    for e in entries:
        assert e["sources"], e["id"]
        assert all(rep["conditions"]["source"] for rep in e["reported"]), e["id"]
        assert e["status"]["state"] in ("unverified", "verified", "failed")
        if e["aux_layers"]["ids"] is not None:
            assert e["aux_layers"]["convention"] and e["evidence"]["aux_layers"]["source"], e["id"]


def test_list_filter_and_show():
    rows = run_inprocess("registry", "list", "--target", "Llama-3.3-70B", "--json").json()
    assert rows and all("Llama-3.3-70B" in r["target"]["repo"] for r in rows)
    shown = run_inprocess("registry", "show", "nvidia-llama-3.3-70b-instruct-eagle3", "--json").json()
    assert any("50170" in s for s in shown["sources"])
    assert_clean_failure(run_inprocess("registry", "show", "no-such-entry"), None, contains="no registry entry")


def write(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "registry"
    d.mkdir(exist_ok=True)
    (d / f"{name}.yaml").write_text(text)
    return d


@pytest.mark.parametrize(
    "text,where",
    [
        (GOOD + "  bad: [indent\n", "good.yaml:7"),
        (GOOD.replace("publisher: tests", "publisher: tests\nmystery_key: 1"), "good.yaml:5: mystery_key"),
        (
            GOOD + "aux_layers:\n  ids: [1, 2, 3]\n",
            "good.yaml:7: aux_layers: Value error, aux ids without their convention",
        ),
        (GOOD + "status: {state: verified}\n", "good.yaml:7: status: Value error, status verified needs"),
        (GOOD.replace("id: good", "id: other"), "good.yaml:1: id 'other' must equal the file name"),
    ],
)
def test_yaml_errors_name_the_file_and_line(tmp_path, text, where):
    d = write(tmp_path, "good", text)
    r = run_inprocess("registry", "check", env={"EAGLEZOO_REGISTRY": str(d)})
    assert r.code == 1 and where in r.out, r.out  # reported as the file's problem; other entries still check
    assert_clean_failure(
        run_inprocess("registry", "show", "good", env={"EAGLEZOO_REGISTRY": str(d)}), None, contains=where
    )


@pytest.mark.parametrize(
    "name,text,where",
    [
        (
            "twice",
            GOOD.replace("id: good", "id: twice") + "publisher: someone else\n",
            "twice.yaml:7: invalid YAML (duplicate key 'publisher', first on line 4)",
        ),
        (
            "nested",
            GOOD.replace("id: good", "id: nested").replace(
                "drafter: {repo: org/drafter}", "drafter:\n  repo: org/drafter\n  repo: org/other"
            ),
            "nested.yaml:4: invalid YAML (duplicate key 'repo', first on line 3)",
        ),
        (
            "shell",
            GOOD.replace("id: good", "id: shell").replace("org/target", "'org/t; touch X'"),
            "shell.yaml:3: target.repo: Value error, Repo id must use alphanumeric chars",
        ),
        (
            "deep",
            GOOD.replace("id: good", "id: deep").replace("org/drafter", "org/drafter/extra"),
            "deep.yaml:2: drafter.repo: Value error, Repo id must be in the form 'repo_name' or 'namespace/repo_name'",
        ),
    ],
    ids=["duplicate-key", "nested-duplicate-key", "shell-in-repo", "three-part-repo"],
)
def test_a_duplicated_key_or_a_bad_repo_id_is_refused_by_file_and_line(tmp_path, name, text, where):
    write(tmp_path, "good", GOOD)
    env = {"EAGLEZOO_REGISTRY": str(write(tmp_path, name, text))}
    r = run_inprocess("registry", "check", "--json", env=env)
    assert r.code == 1 and "good" in r.json()["entries"], r.out
    assert any(where in p for p in r.json()["entries"][name]["problems"]), r.out
    listed = run_inprocess("registry", "list", "--json", env=env)
    shipped = {p.stem for p in (ROOT / "registry").glob("*.yaml")}  # the user's registry lies over the shipped one
    assert listed.code == 0 and [e["id"] for e in listed.json() if e["id"] not in shipped] == ["good"]
    assert where in listed.err
    assert run_inprocess("registry", "show", "good", env=env).code == 0
    for command in ("registry show", "serve-config"):
        assert_clean_failure(run_inprocess(*command.split(), name, env=env), None, contains=where)


def test_consistency_problems_exit_1(tmp_path):
    text = GOOD.replace('eagle_version: "3"', 'eagle_version: "3.1"') + "flags: {fc_norm: false, norm_output: true}\n"
    text += "evidence: {flags: {level: model-card, source: 'https://huggingface.co/org/drafter'}}\n"
    text += "engines:\n- {engine: vllm, min_version: '0.10.0'}\n"
    d = write(tmp_path, "good", text)
    r = run_inprocess("registry", "check", "--json", env={"EAGLEZOO_REGISTRY": str(d)})
    assert r.code == 1
    problems = r.json()["entries"]["good"]["problems"]
    assert any("needs fc_norm and norm_output" in p for p in problems)


def test_serve_config_from_registry_and_from_a_directory(tmp_path):
    r = run_inprocess(
        "serve-config", "redhatai-llama-4-maverick-17b-128e-instruct-speculator.eagle3", "--json", "-k", "5"
    )
    assert r.code == 0, r.err
    sc = r.json()
    assert sc["speculative_config"] == {
        "method": "eagle3",
        "model": "RedHatAI/Llama-4-Maverick-17B-128E-Instruct-speculator.eagle3",
        "num_speculative_tokens": 5,
    }
    assert sc["aux_layers_captured"] == [1, 23, 44] and "vllm serve meta-llama/" in sc["command"]
    assert sc["steps"] == [sc["command"]] and sc["convert_command"] is None  # served as published
    r = run_inprocess("serve-config", "nvidia-llama-3.3-70b-instruct-eagle3", "--json")
    assert any("50170" in w for w in r.json()["warnings"])
    src = make_drafter(tmp_path / "src", "specforge")
    out = tmp_path / "out"
    assert run_inprocess("convert", src, out).code == 0
    r = run_inprocess("serve-config", out, "--engine", "sglang", "--target", "org/t", "--json")
    sc = r.json()
    assert "--speculative-algorithm EAGLE3" in sc["command"] and sc["aux_layers_captured"] == [0, 1, 2]
    assert sc["min_version"] == "0.5.23" and not sc["warnings"]
    r = run_inprocess("serve-config", src, "--target", "org/t", "--json")
    converted = ROOT / "src-eagle31"  # in the current directory (cli's cwd is ROOT), named whole (issue 46)
    assert (
        r.json()["convert_command"] == f"eaglezoo convert {src} {converted}" and str(converted) in r.json()["command"]
    )


def test_workflows_parse_and_call_tested_commands():
    """The workflows' eaglezoo commands are the ones tests/hub/test_registry_sync.py, tests/cli/registry/ and the
    engine tests run."""
    wf = {p.name: yaml.safe_load(p.read_text()) for p in (ROOT / ".github" / "workflows").glob("*.yml")}
    assert {"registry.yml", "gpu-verify.yml"} <= wf.keys()
    reg = wf["registry.yml"]
    triggers = reg[True] if True in reg else reg["on"]  # YAML 1.1 reads the key `on` as True
    assert "pull_request" in triggers and "schedule" in triggers
    steps = " ".join(s.get("run", "") for s in reg["jobs"]["check"]["steps"])
    for command in (
        "eaglezoo registry check --online",
        "eaglezoo registry sync --json",
        "eaglezoo registry plan --json",
    ):
        assert command in steps
    assert "--write" not in steps  # the nightly fails on drift; it never edits the registry
    from eaglezoo.registry.update import DEFAULT_REPO, PATTERNS

    publish = " ".join(s.get("run", "") for s in reg["jobs"]["publish-snapshot"]["steps"])
    assert f"hf upload {DEFAULT_REPO} registry registry --repo-type dataset" in publish  # the layout update reads
    assert PATTERNS == ["registry/*.yaml", "registry/reports/*.json"] and "eaglezoo registry check" in publish
    gpu = wf["gpu-verify.yml"]["jobs"]
    assert gpu["verify"]["needs"] == "plan" and gpu["record"]["needs"] == "verify"
    assert gpu["verify"]["strategy"]["matrix"]["runner"] == "${{ fromJSON(needs.plan.outputs.runners) }}"
    assert gpu["verify"]["runs-on"] == ["self-hosted", "${{ matrix.runner }}"]
    plan_steps = " ".join(s.get("run", "") for s in gpu["plan"]["steps"])
    verify_steps = " ".join(s.get("run", "") for s in gpu["verify"]["steps"])
    record_steps = " ".join(s.get("run", "") for s in gpu["record"]["steps"])
    assert "eaglezoo registry plan --json" in plan_steps
    assert 'eaglezoo registry plan --runner "$RUNNER" --commands' in verify_steps
    assert 'pip install "vllm>=' in verify_steps and "pip install torch\n" not in verify_steps
    assert 'eaglezoo registry record "$report"' in record_steps and "gh pr create" in record_steps
    assert any(s.get("uses", "").startswith("actions/upload-artifact") for s in gpu["verify"]["steps"])
    site = wf["site.yml"]
    site_steps = " ".join(s.get("run", "") for s in site["jobs"]["build"]["steps"])
    assert (
        "eaglezoo registry site _site" in site_steps
        and "registry/**" in (site.get(True) or site["on"])["push"]["paths"]
    )
    assert any(s.get("uses", "").startswith("actions/deploy-pages") for s in site["jobs"]["deploy"]["steps"])
    # the plan's runner classes are the labels the matrix asks for
    from eaglezoo.registry.hardware import RUNNERS

    plan = json.loads(run_inprocess("registry", "plan", "--json").out)
    assert set(plan["runners"]) <= set(RUNNERS)
