"""`registry sync` and `check --online` through the CLI, against the local Hub server
(tests/support/fakehub.py) holding realistic repos: SpecForge, speculators and ModelOpt drafters and a target
with safetensors weights. Repos change under the registry: main moves, a file is deleted, a config
contradicts the YAML, a repo goes private or away."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import EXAMPLE, ROOT, assert_clean_failure, hubcli, run_cli, tree_digest
from safetensors.torch import save as save_safetensors
from support.factory import make_drafter, make_spec

# the same capture (boundary 1, 2, 3) as each dialect's config states it (docs/formats.md#aux-layer-conventions)
DIALECT_IDS = {
    "specforge": ("layer-output", [0, 1, 2]),
    "speculators": ("boundary", [1, 2, 3]),
    "modelopt": ("layer-output", [0, 1, 2]),
}
CARD = b"---\nlicense: apache-2.0\n---\n# a drafter\n"


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def target_files(layers: int = 4) -> dict[str, bytes]:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": layers,
        "hidden_size": 64,
        "vocab_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "torch_dtype": "bfloat16",
    }
    weights = {
        "model.embed_tokens.weight": torch.zeros(256, 64, dtype=torch.bfloat16),
        "model.norm.weight": torch.ones(64, dtype=torch.float32),
    }
    return {"config.json": json.dumps(cfg).encode(), "model.safetensors": save_safetensors(weights)}


def entry(entry_id: str, drafter: str, **extra) -> dict:
    return {
        "id": entry_id,
        "drafter": {"repo": drafter, "revision": None},
        "target": {"repo": "tester/sync-target", "revision": None},
        "publisher": "tests",
        "eagle_version": "3",
        "sources": ["tests"],
        "null_reasons": {"hardware": "not synced yet", "acceptance_floors": "a test"},
        **extra,
    }


@pytest.fixture(scope="module")
def published(hub, tmp_path_factory):
    """Three drafters in three dialects and one target, seeded on the local Hub."""
    work = tmp_path_factory.mktemp("published")
    hub[0].commit("tester/sync-target", target_files())
    repos = {}
    for dialect in ("specforge", "speculators", "modelopt"):
        spec = make_spec(ids=(1, 2, 3))
        folder = make_drafter(work / dialect, dialect, spec=spec, file="safetensors")
        repo = f"tester/sync-{dialect}"
        hub[0].commit(repo, {**folder_bytes(folder), "README.md": CARD})
        repos[dialect] = repo
    return repos


@pytest.fixture
def registry(tmp_path, published) -> Path:
    reg = tmp_path / "registry"
    reg.mkdir()
    for dialect, repo in published.items():
        (reg / f"sync-{dialect}.yaml").write_text(yaml.safe_dump(entry(f"sync-{dialect}", repo), sort_keys=False))
    return reg


def sync(hub, reg: Path, *args):
    return hubcli(hub, "registry", "sync", *args, "--registry", reg, "--json")


def diffs(result, entry_id: str) -> dict[str, dict]:
    found = next(e for e in result.json()["entries"] if e["id"] == entry_id)
    return {d["field"]: d for d in found["differences"]}


def test_sync_reads_every_fact_the_files_state_and_changes_nothing(hub, registry, published):
    before = tree_digest(registry)
    r = sync(hub, registry)
    assert r.code == 1, r.err  # every entry lacks facts the Hub states
    assert tree_digest(registry) == before
    for dialect, repo in published.items():
        d = diffs(r, f"sync-{dialect}")
        head = hub[0].repos[repo].branches["main"]
        assert d["drafter.revision"]["hub"] == head and d["drafter.revision"]["kind"] == "new"
        assert d["dialect"]["hub"] == dialect
        # the ids as the dialect's own config states them, with that dialect's convention
        assert (d["aux_layers.convention"]["hub"], d["aux_layers.ids"]["hub"]) == DIALECT_IDS[dialect]
        assert (d["hidden_size"]["hub"], d["target_vocab_size"]["hub"], d["draft_vocab_size"]["hub"]) == (64, 256, 128)
        assert d["licence"]["hub"] == "apache-2.0"
        weights = hub[0].repos[repo].files(head)["model.safetensors"]
        assert d["files"]["hub"]["model.safetensors"] == weights["lfs"]
        assert (
            d["files"]["hub"]["config.json"]
            == hashlib.sha256(hub[0].blobs[hub[0].repos[repo].files(head)["config.json"]["oid"]]).hexdigest()
        )
        assert "README.md" not in d["files"]["hub"]
        assert d["target_parameters"]["hub"] == 256 * 64 + 64
        assert d["target_weight_bytes"]["hub"] == 256 * 64 * 2 + 64 * 4
        assert d["target_dtype"]["hub"] == "bfloat16" and d["target_num_layers"]["hub"] == 4
        assert d["hardware"]["hub"]["gpus_per_node"] == 1 and d["hardware"]["hub"]["gpu_memory_gb"] == 80
        assert repo in d["hidden_size"]["source"] and "config.json" in d["hidden_size"]["source"]


def test_write_records_sources_minimally_and_then_nothing_drifts(hub, registry):
    path = registry / "sync-specforge.yaml"
    path.write_text(path.read_text() + "# a comment sync must keep\n")
    old_lines = path.read_text().splitlines()
    r = sync(hub, registry, "--write", "sync-specforge")
    assert r.code == 0, r.out + r.err
    text = path.read_text()
    kept = [line for line in old_lines if line in text.splitlines()]
    changed = {"  revision: null", "null_reasons:", "  hardware: not synced yet"}
    assert set(old_lines) - set(kept) <= changed and "# a comment sync must keep" in text
    written = yaml.safe_load(text)
    assert written["evidence"]["hidden_size"]["source"].startswith("tester/sync-specforge@")
    assert written["evidence"]["aux_layers"] == {
        "level": "hub-file",
        "source": written["evidence"]["hidden_size"]["source"],
    }
    assert written["hardware"]["source"].startswith("registry sync:")
    assert "hardware" not in written["null_reasons"]
    assert run_cli("registry", "check", "--registry", registry, "sync-specforge").code == 0
    again = sync(hub, registry, "sync-specforge")
    assert again.code == 0 and diffs(again, "sync-specforge") == {}


def test_a_contradicting_config_is_a_finding_never_a_silent_overwrite(hub, registry):
    path = registry / "sync-speculators.yaml"
    data = yaml.safe_load(path.read_text())
    card = {"level": "model-card", "source": "https://huggingface.co/tester/sync-speculators"}
    data.update(
        hidden_size=4096,
        aux_layers={"ids": [0, 1, 2], "convention": "boundary"},
        evidence={"hidden_size": card, "aux_layers": dict(card)},
    )
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    before = path.read_text()
    r = sync(hub, registry, "sync-speculators")
    d = diffs(r, "sync-speculators")
    assert r.code == 1 and path.read_text() == before
    assert d["hidden_size"]["kind"] == "differs" and (d["hidden_size"]["registry"], d["hidden_size"]["hub"]) == (
        4096,
        64,
    )
    assert d["aux_layers.ids"]["registry"] == [0, 1, 2] and d["aux_layers.ids"]["hub"] == [1, 2, 3]
    assert "differs" in hubcli(hub, "registry", "sync", "sync-speculators", "--registry", registry).out
    assert sync(hub, registry, "--write", "sync-speculators").code == 0
    written = yaml.safe_load(path.read_text())
    assert written["hidden_size"] == 64 and "config.json" in written["evidence"]["hidden_size"]["source"]
    assert written["evidence"]["hidden_size"]["level"] == "hub-file"


def test_moved_main_deleted_file_and_vanished_revision(hub, registry, published):
    repo = published["modelopt"]
    assert sync(hub, registry, "--write", "sync-modelopt").code == 0
    pinned = yaml.safe_load((registry / "sync-modelopt.yaml").read_text())
    sha = pinned["drafter"]["revision"]
    assert len(sha) == 40 and pinned["files"]
    assert hubcli(hub, "registry", "check", "--online", "--registry", registry, "sync-modelopt").code == 0
    # main moves on: a new config; the pin still exists, so the pinned check holds, and sync reports the move
    cfg = json.loads(hub[0].blobs[hub[0].repos[repo].files(sha)["config.json"]["oid"]])
    cfg["draft_vocab_size"] = cfg.get("draft_vocab_size", 128)
    hub[0].commit(repo, {"config.json": json.dumps(cfg, indent=1).encode()}, title="reformat")
    r = sync(hub, registry, "sync-modelopt")
    d = diffs(r, "sync-modelopt")
    assert r.code == 1 and d["drafter.revision"]["kind"] == "moved" and d["drafter.revision"]["registry"] == sha
    assert d["files"]["kind"] == "differs"
    assert hubcli(hub, "registry", "check", "--online", "--registry", registry, "sync-modelopt").code == 0
    # the pinned commit vanishes (a force-push): check --online fails, sync says "gone"
    del hub[0].repos[repo].commits[sha]
    r = hubcli(hub, "registry", "check", "--online", "--registry", registry, "sync-modelopt", "--json")
    assert r.code == 1 and any("revision not found" in p for p in r.json()["entries"]["sync-modelopt"]["problems"])
    assert diffs(sync(hub, registry, "sync-modelopt"), "sync-modelopt")["drafter.revision"]["kind"] == "gone"
    # an entry that follows main: a deleted file and a changed file fail check --online
    data = yaml.safe_load((registry / "sync-modelopt.yaml").read_text())
    data["drafter"]["revision"] = None
    (registry / "sync-modelopt.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    weights = next(n for n in data["files"] if n.endswith(".safetensors"))
    hub[0].commit(repo, {}, delete=(weights,), title="delete weights")
    r = hubcli(hub, "registry", "check", "--online", "--registry", registry, "sync-modelopt", "--json")
    problems = r.json()["entries"]["sync-modelopt"]["problems"]
    assert r.code == 1 and any(f"files.{weights}: not in {repo}@" in p for p in problems)
    assert any("files.config.json: sha256 on the Hub is" in p for p in problems)


def test_gone_or_private_repos_are_one_line_errors(hub, registry, published):
    (registry / "sync-gone.yaml").write_text(yaml.safe_dump(entry("sync-gone", "tester/never-published")))
    hub[0].unauthorized.add(published["speculators"])
    try:
        r = sync(hub, registry)
    finally:
        hub[0].unauthorized.discard(published["speculators"])
    errors = {e["id"]: e["error"] for e in r.json()["entries"]}
    assert r.code == 1
    assert "repository not found" in errors["sync-gone"]
    assert "repository not found (or private" in errors["sync-speculators"]
    assert errors["sync-specforge"] is None and "Traceback" not in r.err


def test_bad_sync_and_plan_arguments(hub, registry):
    assert_clean_failure(
        hubcli(hub, "registry", "sync", "no-such-entry", "--registry", registry), contains="no registry entry"
    )
    assert_clean_failure(run_cli("registry", "plan", "--runner", "gpu-3x80g"), contains="no runner class")


def test_a_target_without_safetensors_and_a_drafter_with_broken_json(hub, registry, published):
    """Weights in another format leave sizes and hardware unknown; a config that is not JSON is the
    entry's one-line error, never an internal one."""
    hub[0].commit("tester/bin-target", {"config.json": target_files()["config.json"], "pytorch_model.bin": b"\0" * 64})
    hub[0].commit(
        "tester/broken-json", {"config.json": b"{not json", "model.safetensors": target_files()["model.safetensors"]}
    )
    bin_entry = entry("sync-bin-target", published["specforge"])
    bin_entry["target"]["repo"] = "tester/bin-target"
    (registry / "sync-bin-target.yaml").write_text(yaml.safe_dump(bin_entry))
    (registry / "sync-broken-json.yaml").write_text(yaml.safe_dump(entry("sync-broken-json", "tester/broken-json")))
    r = sync(hub, registry, "sync-bin-target", "sync-broken-json")
    errors = {e["id"]: e["error"] for e in r.json()["entries"]}
    d = diffs(r, "sync-bin-target")
    assert errors["sync-bin-target"] is None and d["target_num_layers"]["hub"] == 4
    assert "target_weight_bytes" not in d and "hardware" not in d
    assert errors["sync-broken-json"] == "tester/broken-json/config.json: not valid JSON"


# --------------------------------------------------------------------------------------------
# an entry that states the aux ids (and their convention) its drafter's config does not


def example_drafter_files(**config) -> dict[str, bytes]:
    """examples/tiny/eagle3-safeai (a SafeAILab drafter, trained on boundary 2, 3, 4) as published, with
    safetensors weights; `config` adds keys to its config.json, which carries no aux ids."""
    folder = EXAMPLE / "eagle3-safeai"
    cfg = {**json.loads((folder / "config.json").read_text()), **config}
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    return {"config.json": json.dumps(cfg).encode(), "model.safetensors": save_safetensors(state)}


@pytest.fixture(scope="module")
def safeai_published(hub) -> dict[str, str]:
    hub[0].commit("tester/tiny-target", {p.name: p.read_bytes() for p in (EXAMPLE / "target").iterdir()})
    hub[0].commit("tester/tiny-safeai", example_drafter_files())
    # ids where SafeAILab documents no convention: only the entry says which
    hub[0].commit("tester/tiny-safeai-ids", example_drafter_files(eagle_aux_hidden_state_layer_ids=[2, 3, 4]))
    return {"omitted": "tester/tiny-safeai", "undocumented": "tester/tiny-safeai-ids"}


def stating_registry(tmp_path: Path, drafter: str) -> Path:
    """A registry whose one entry states the ids the example was trained on, in the boundary convention."""
    reg = tmp_path / "registry"
    reg.mkdir()
    data = entry(
        "tiny-safeai",
        drafter,
        dialect="safeai",
        aux_layers={"ids": [2, 3, 4], "convention": "boundary"},
        evidence={
            k: {"level": "model-card", "source": "https://huggingface.co/tester/tiny-safeai"}
            for k in ("dialect", "aux_layers")
        },
    )
    data["target"]["repo"] = "tester/tiny-target"
    (reg / "tiny-safeai.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return reg


def aux_differences(result) -> dict[str, dict]:
    return {k: v for k, v in diffs(result, "tiny-safeai").items() if k.startswith("aux_layers")}


def test_every_command_honours_the_aux_ids_an_entry_states_for_a_config_without_them(hub, safeai_published, tmp_path):
    reg = stating_registry(tmp_path, safeai_published["omitted"])
    r = sync(hub, reg, "--write")
    assert r.code == 0 and aux_differences(r) == {}, r.out + r.err
    assert sync(hub, reg).code == 0
    r = hubcli(hub, "registry", "check", "--online", "--registry", reg, "--json")
    assert r.code == 0, r.out
    lint = hubcli(hub, "lint", "tiny-safeai", "--registry", reg, "--json")
    assert lint.code == 0 and lint.json()["spec"]["aux"] == {"ids": [2, 3, 4], "convention": "boundary"}, lint.out
    served = hubcli(hub, "serve-config", "tiny-safeai", "--registry", reg, "--json")
    # the published folder's config has no ids: vLLM would capture its default (2, L//2, L-3) for the 4-layer
    # target, said as such; the path converts it first (the converted folder carries the entry's ids), then serves it
    sc = served.json()
    assert served.code == 0 and sc["unconverted_capture"] == [2, 2, 1] and sc["aux_layers_captured"] == [2, 3, 4]
    converted = ROOT / "tiny-safeai-eagle31"  # in the CLI's working directory, named whole (doctor reads it anywhere)
    assert sc["convert_command"] == f"eaglezoo convert tiny-safeai {converted} --registry {reg}"
    assert sc["steps"] == [sc["convert_command"], sc["command"]] and sc["drafter"] == str(converted)
    pulled = hubcli(hub, "pull", "tiny-safeai", "--registry", reg, "--json")
    assert pulled.code == 0 and set(pulled.json()["sha256_verified"]) == {"config.json", "model.safetensors"}
    r = hubcli(
        hub,
        "verify",
        "tiny-safeai",
        "--registry",
        reg,
        "--prompts",
        EXAMPLE / "prompts.jsonl",
        "--max-prompts",
        "2",
        "--json",
    )
    assert r.code == 0, r.err
    report = r.json()
    assert report["registry_id"] == "tiny-safeai"
    assert any(f["code"] == "aux-ids" and "boundary [2, 3, 4]" in f["message"] for f in report["lint"])
    assert report["acceptance_per_position"][0] > 0.4  # the layers it was trained on (about 0.6; wrong ones collapse)


def test_ids_a_config_stores_without_their_convention_are_read_in_the_entrys(hub, safeai_published, tmp_path):
    reg = stating_registry(tmp_path, safeai_published["undocumented"])
    r = sync(hub, reg, "--write")
    assert r.code == 0 and aux_differences(r) == {}, r.out + r.err
    assert hubcli(hub, "registry", "check", "--online", "--registry", reg).code == 0
    assert hubcli(hub, "lint", "tiny-safeai", "--registry", reg).code == 0
    # an entry whose ids select another capture than the config's: sync's finding, check --online's problem
    path = reg / "tiny-safeai.yaml"
    data = yaml.safe_load(path.read_text())
    data["aux_layers"]["ids"] = [1, 2, 3]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = sync(hub, reg)
    d = aux_differences(r)
    assert r.code == 1 and list(d) == ["aux_layers.ids"]
    assert (d["aux_layers.ids"]["kind"], d["aux_layers.ids"]["registry"], d["aux_layers.ids"]["hub"]) == (
        "differs",
        [1, 2, 3],
        [2, 3, 4],
    )
    r = hubcli(hub, "registry", "check", "--online", "--registry", reg, "--json")
    problems = r.json()["entries"]["tiny-safeai"]["problems"]
    assert r.code == 1 and any(
        "registry entry tiny-safeai (aux_layers) selects boundary [1, 2, 3], but "
        "eagle_aux_hidden_state_layer_ids selects [2, 3, 4]" in p
        for p in problems
    ), problems


def test_the_hub_upgrades_a_template_fact_it_confirms(hub, registry):
    """A fact held on a trainer template that the published config states too becomes a Hub fact."""
    path = registry / "sync-specforge.yaml"
    data = yaml.safe_load(path.read_text())
    template = {"level": "publisher-template", "source": "https://github.com/org/trainer/blob/main/drafter.json"}
    data.update(hidden_size=64, evidence={"hidden_size": template})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    d = diffs(sync(hub, registry, "sync-specforge"), "sync-specforge")
    assert (d["hidden_size"]["kind"], d["hidden_size"]["level"]) == ("confirmed", "hub-file")
    assert sync(hub, registry, "--write", "sync-specforge").code == 0
    evidence = yaml.safe_load(path.read_text())["evidence"]["hidden_size"]
    assert evidence["level"] == "hub-file" and evidence["source"].startswith("tester/sync-specforge@")
