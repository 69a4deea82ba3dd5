"""The zoo on llama.cpp b11434 (issue 41, item 8): each entry says whether and how it serves there, with evidence
(llama.cpp's own docs/speculative.md list of the 15 EAGLE-3 drafters it supports, cited by line, or the reason
`eaglezoo convert --to gguf` refuses the drafter); `registry check` holds `engines: llamacpp` to that evidence;
`registry plan` gives a `verify --engine llamacpp` job where the entry serves there and verify measures the family."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml
from conftest import ROOT, run_inprocess
from support import llamacpp

from eaglezoo.names import FAMILIES_MEASURED
from eaglezoo.registry.llamacpp import LISTED

ANGELSLIM = "angelslim-qwen3-8b-eagle3"  # AngelSlim/Qwen3-8B_eagle3: docs/speculative.md:45


@pytest.fixture(scope="module")
def listed():
    r = run_inprocess("registry", "list", "--json")
    assert r.code == 0, r.err
    return {e["id"]: e for e in r.json()}


def test_the_cited_lines_are_llama_cpps_own_list():
    """LISTED against the file itself: 15 drafters, each at the line cited (skips where the source is absent)."""
    lines = (llamacpp.source_dir() / "llama.cpp" / "docs" / "speculative.md").read_text().splitlines()
    start = lines.index("Supported EAGLE-3 draft models include:")
    found = {}
    for n, line in enumerate(lines[start + 1 :], start + 2):
        m = re.match(r"- \[([^\]]+)\]\(https://huggingface\.co/\1\)$", line)
        if m:
            found[m.group(1)] = n
        elif found and not line.strip():
            break
    assert found == LISTED and len(found) == 15


def test_every_drafter_llama_cpp_lists_is_an_entry_with_its_evidence(listed):
    """Issue 43 item 5: llama.cpp's 15 supported EAGLE-3 drafters are all in the zoo, each unverified with its
    unknowns said (null_reasons) where the Hub was out of reach, and a target size with its evidence level."""
    by_repo = {e["drafter"].get("repo"): e for e in listed.values()}
    assert set(LISTED) <= set(by_repo), sorted(set(LISTED) - set(by_repo))
    for repo in LISTED:
        e = by_repo[repo]
        assert e["family"] == "eagle3" and e["eagle_version"] == "3", repo
        if e["aux_layers"]["ids"] is None:
            assert e["null_reasons"]["aux_layers"], repo
        if e["hardware"] is None:
            assert e["null_reasons"]["hardware"] and e["evidence"]["target_parameters"]["level"], repo


def test_each_entry_says_how_it_serves_on_llama_cpp_with_evidence(listed):
    for entry_id, e in listed.items():
        (llama,) = [s for s in e["serving"] if s["engine"] == "llamacpp"]
        repo = e["drafter"].get("repo")
        declared = any(x["engine"] == "llamacpp" for x in e["engines"])
        assert llama["evidence"], entry_id
        if repo in LISTED:  # llama.cpp lists it: the entry says so, citing the line
            assert declared and f"docs/speculative.md:{LISTED[repo]}" in llama["evidence"], entry_id
            assert any(f"docs/speculative.md:{LISTED[repo]}" in (x.get("notes") or "") for x in e["engines"])
        if llama["state"] == "no path":  # refused for what the drafter is: convert --to gguf's reason
            assert not declared and llama["why"] and "refuses it" in llama["evidence"], entry_id
    states = {i: next(s for s in e["serving"] if s["engine"] == "llamacpp") for i, e in listed.items()}
    assert states["yuhuili-eagle3-llama3.1-instruct-8b"]["state"] == "listed"
    assert "fc_norm (EAGLE 3.1)" in states["lightseekorg-kimi-k2.6-eagle3.1-mla"]["why"]
    assert "peagle drafter" in states["amazon-gpt-oss-20b-p-eagle"]["why"]
    dspark = states["deepspec-dspark-qwen3-4b-block7"]  # its mask token unread: convert reads it from the drafter
    assert dspark["state"] == "config unread" and "no mask_token_id stated" in dspark["why"]
    assert states[ANGELSLIM]["state"] == "aux ids unknown"  # listed, yet eaglezoo needs the taps stated


def test_plan_gives_a_llama_cpp_job_where_the_entry_serves_there(listed):
    r = run_inprocess("registry", "plan", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    jobs = [j for c in plan["classes"] for j in c["jobs"]]
    llama = {j["id"]: j for j in jobs if "--engine llamacpp" in j["command"]}
    declared = {
        i
        for i, e in listed.items()
        if e["drafter"].get("repo") and any(x["engine"] == "llamacpp" for x in e["engines"])
    }
    dspark = {i for i, e in listed.items() if e["drafter"].get("repo") and e["family"] == "dspark"}
    assert set(llama) == declared | dspark and len(declared) == len(LISTED)  # DSpark: llama.cpp is its engine
    for entry_id, j in llama.items():
        assert j["command"].startswith(f"eaglezoo verify {entry_id} --engine llamacpp --num-spec-tokens ")
        assert "--tensor-parallel-size" not in j["command"] and j["report"].endswith(".llamacpp.json")
        assert " --max-model-len " in j["command"]  # llama-server's context, as the hardware rule's KV term has it
    for j in jobs:  # no job claims what verify cannot run: its engine measures its family
        engine = j["command"].split("--engine ")[1].split()[0]
        assert listed[j["id"]]["family"] in FAMILIES_MEASURED[engine], j["command"]


def test_check_holds_engines_llamacpp_to_the_evidence(tmp_path):
    reg = tmp_path / "registry"
    shutil.copytree(ROOT / "registry", reg, ignore=shutil.ignore_patterns("reports", "tiny-*"))
    listed_one = reg / f"{ANGELSLIM}.yaml"
    data = yaml.safe_load(listed_one.read_text())
    data["engines"] = [x for x in data["engines"] if x["engine"] != "llamacpp"]
    listed_one.write_text(yaml.safe_dump(data, sort_keys=False))
    refused = reg / "lightseekorg-kimi-k2.6-eagle3.1-mla.yaml"
    data = yaml.safe_load(refused.read_text())
    data["engines"].append({"engine": "llamacpp"})
    refused.write_text(yaml.safe_dump(data, sort_keys=False))
    r = run_inprocess("registry", "check", "--registry", reg)
    assert r.code == 1, r.out + r.err
    text = " ".join((r.out + r.err).split())
    assert "llama.cpp b11434 lists this drafter (docs/speculative.md:45)" in text
    assert "engines.llamacpp: llama.cpp b11434 cannot serve this drafter: fc_norm (EAGLE 3.1)" in text
