"""The published DFlash, DSpark and P-EAGLE drafters in the registry: their family in `registry list`, `show` and the
site; serve-config of their entries (vLLM's own method, SGLang's algorithm); `plan` verifies DSpark on llama.cpp;
`sync --template` records their block size and mask token."""

from __future__ import annotations

import html
import json

import pytest
from conftest import assert_clean_failure, run_inprocess
from support import families as F

DFLASH, DSPARK, PEAGLE = (
    "zlab-qwen3-8b-dflash-b16",
    "deepspec-dspark-qwen3-8b-block7",
    "redhatai-qwen3-8b-speculator.peagle",
)


@pytest.fixture(scope="module")
def listed():
    r = run_inprocess("registry", "list", "--json")
    assert r.code == 0, r.err
    return {e["id"]: e for e in r.json()}


def test_every_family_has_published_entries_that_check_clean(listed):
    families = {e["family"] for e in listed.values()}
    assert {"eagle3", "peagle", "dflash", "dspark"} <= families
    ids = [i for i, e in listed.items() if e["family"] != "eagle3"]
    r = run_inprocess("registry", "check", *ids, "--json")
    assert r.code == 0 and r.json()["failed"] == 0, r.out
    for i in ids:  # EAGLE-3 weights have a version, block drafters none
        assert (listed[i]["eagle_version"] is None) == (listed[i]["family"] in ("dflash", "dspark")), i


def test_list_shows_the_family_column():
    r = run_inprocess("registry", "list", "--target", "Qwen/Qwen3-8B")
    assert r.code == 0, r.err
    header = next(line for line in r.out.splitlines() if " id " in line)
    assert "family" in header.split("dialect")[0]
    row = next(line for line in r.out.splitlines() if DFLASH in line)
    assert " dflash " in row and " - " in row  # the family, and no EAGLE version


def test_show_names_the_family_and_its_facts_with_their_evidence():
    r = run_inprocess("registry", "show", DFLASH)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == "family: dflash"
    block = next(line for line in r.out.splitlines() if "block_size" in line and "│" in line)
    assert "16" in block and "public-quote" in block
    assert run_inprocess("registry", "show", PEAGLE).out.splitlines()[0] == "family: peagle, EAGLE 3"


def test_the_site_shows_the_family(tmp_path):
    out = tmp_path / "site"
    r = run_inprocess("registry", "site", out)
    assert r.code == 0, r.err
    index = (out / "index.html").read_text()
    assert "<th>family</th>" in index and "<td>dspark</td>" in index
    page = html.unescape((out / "entries" / f"{DFLASH}.html").read_text())  # as a browser reads it
    assert "family dflash" in page and '"method": "dflash"' in page
    assert "sglang: not served" in (out / "entries" / f"{PEAGLE}.html").read_text()


def test_serve_config_of_a_dflash_entry_is_vllm_method_dflash():
    r = run_inprocess("serve-config", DFLASH, "--engine", "vllm", "-k", "15", "--json")
    assert r.code == 0, r.err
    cfg = json.loads(r.out)["speculative_config"]
    assert cfg == {"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 15}


def test_serve_config_of_block_entries_on_sglang():
    r = run_inprocess("serve-config", DFLASH, "--engine", "sglang", "-k", "3", "--json")
    assert r.code == 0, r.err
    command = json.loads(r.out)["command"]
    assert "--speculative-algorithm DFLASH" in command and "--speculative-dflash-block-size 4" in command
    command = json.loads(run_inprocess("serve-config", DSPARK, "--engine", "sglang", "-k", "3", "--json").out)[
        "command"
    ]
    assert "--speculative-algorithm DSPARK" in command and "--speculative-dspark-block-size 3" in command


def test_serve_config_refusals_of_family_entries_are_one_line():
    assert_clean_failure(run_inprocess("serve-config", DFLASH, "-k", "16"), contains="beyond")
    assert_clean_failure(run_inprocess("serve-config", PEAGLE, "--engine", "sglang"), contains="P-EAGLE")
    r = run_inprocess("serve-config", PEAGLE, "--json")
    assert json.loads(r.out)["speculative_config"]["parallel_drafting"] is True


def test_plan_verifies_dspark_on_llama_cpp(listed):
    """vLLM's verify does not run DSpark drafters; verify --engine llamacpp does (names.FAMILIES_MEASURED), so
    each DSpark entry's job is on llama.cpp and no entry is left unverifiable."""
    r = run_inprocess("registry", "plan", "--json")
    assert r.code == 0, r.err
    plan = r.json()
    family = {i for i, e in listed.items() if e["family"] == "dspark" and e["drafter"].get("repo")}
    assert not plan["unverifiable"]
    jobs = {j["id"]: j["command"] for c in plan["classes"] for j in c["jobs"]}
    assert family <= set(jobs) and all(f"verify {i} --engine llamacpp " in jobs[i] for i in family)
    assert "not verified" not in run_inprocess("registry", "plan").out


def test_sync_from_a_template_records_block_size_and_mask_token(tmp_path):
    reg = tmp_path / "registry"
    reg.mkdir()
    (reg / "fam.yaml").write_text(
        "id: fam\ndrafter: {repo: org/drafter}\ntarget: {repo: org/target}\n"
        "publisher: tests\nfamily: dflash\nsources: [tests]\n"
        "null_reasons: {hardware: t, acceptance_floors: t, aux_layers: t}\n"
    )
    config = F.zlab_dflash(tmp_path / "d", block_size=8, mask_token_id=30) / "config.json"
    args = (
        "registry",
        "sync",
        "fam",
        "--template",
        config,
        "--source",
        "https://example.org/config.json",
        "--registry",
        reg,
    )
    r = run_inprocess(*args, "--write", "--json")
    assert r.code == 0, r.out + r.err
    fields = {d["field"]: d["hub"] for d in r.json()["entries"][0]["differences"]}
    assert (fields["block_size"], fields["mask_token_id"]) == (8, 30)
    shown = run_inprocess("registry", "show", "fam", "--registry", reg, "--json").json()
    assert (shown["block_size"], shown["evidence"]["mask_token_id"]["level"]) == (8, "publisher-template")
    assert run_inprocess(*args).code == 0  # recorded: nothing drifts


def test_sync_from_the_hub_then_check_online_a_dflash_entry(hub, tmp_path):
    """The local Hub server (tests/support/fakehub.py) holds a z-lab DFlash drafter and its target: sync reads the
    dialect, block and mask token from the published config, and `check --online` compares the family's keys."""
    import torch
    from conftest import hubcli
    from safetensors.torch import save as save_safetensors

    drafter = F.zlab_dflash(tmp_path / "d", block_size=8, mask_token_id=30)
    target = F.target(tmp_path / "t")
    weights = save_safetensors({"model.embed_tokens.weight": torch.zeros(F.VOCAB, F.H)})
    hub[0].commit(
        "tester/fam-target", {"config.json": (target / "config.json").read_bytes(), "model.safetensors": weights}
    )
    hub[0].commit("tester/fam-dflash", {p.name: p.read_bytes() for p in drafter.iterdir()})
    reg = tmp_path / "registry"
    reg.mkdir()
    (reg / "fam.yaml").write_text(
        "id: fam\ndrafter:\n  repo: tester/fam-dflash\n  revision: null\ntarget:\n"
        "  repo: tester/fam-target\n  revision: null\npublisher: tests\nfamily: dflash\n"
        "sources: [tests]\nnull_reasons:\n  hardware: t\n  acceptance_floors: t\n"
        "  aux_layers: t\n"
    )
    r = hubcli(hub, "registry", "sync", "fam", "--write", "--registry", reg, "--json")
    assert r.code == 0, r.out + r.err
    shown = run_inprocess("registry", "show", "fam", "--registry", reg, "--json").json()
    assert (shown["dialect"], shown["block_size"], shown["mask_token_id"]) == ("dflash", 8, 30)
    assert shown["evidence"]["block_size"]["level"] == "hub-file"
    assert hubcli(hub, "registry", "check", "--online", "--registry", reg, "fam").code == 0
    (reg / "fam.yaml").write_text((reg / "fam.yaml").read_text().replace("block_size: 8", "block_size: 6"))
    r = hubcli(hub, "registry", "check", "--online", "--registry", reg, "fam")
    assert r.code == 1 and "registry says block_size=6, the published config says 8" in r.out, r.out
