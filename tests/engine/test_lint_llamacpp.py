"""lint's llama.cpp row, checked against llama.cpp b11434 itself: a drafter FOLDER that llama.cpp's own converter
would bake wrongly (no top-level aux ids; a speculators config without norm_before_residual) is named with the
eaglezoo command that writes every fact, and the converter (tests/support/llamacpp.py) bakes exactly what lint says;
the taps it bakes are the ones llama-server logs it loads (src/models/eagle3.cpp:12-15)."""

from __future__ import annotations

import json
import re

from conftest import EXAMPLE, run_inprocess
from support import llamacpp
from support.llama_servers import binary
from support.llamacpp_serve import serving

TARGET = EXAMPLE / "target"


def lint(folder, *extra):
    r = run_inprocess("lint", folder, "--target", TARGET, *extra, "--json")
    return {f["code"]: f for f in r.json()["findings"]}


def converted_by_llamacpp(folder, out):
    proc = llamacpp.convert(llamacpp.source_dir(), folder, TARGET.resolve(), out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return llamacpp.fields(out)


def test_folder_without_top_level_ids_is_named_as_llamacpp_bakes_it(tmp_path):
    found = lint(EXAMPLE / "eagle3-safeai", "--aux-layers", "2,3,4", "--aux-convention", "boundary")
    said = found["llamacpp-converter-taps"]
    assert said["severity"] == "warning" and "eaglezoo convert SRC OUT --to gguf" in said["hint"]
    baked = json.loads(re.search(r"bakes taps (\[[^]]*\])", said["message"]).group(1))
    assert baked == [2, 2, 1]
    fields = converted_by_llamacpp(EXAMPLE / "eagle3-safeai", tmp_path / "baked.gguf")
    assert list(fields["eagle3.target_layers"]) == baked  # what lint says is what the converter writes
    target = tmp_path / "tg"
    assert run_inprocess("convert", TARGET, target, "--to", "gguf", "--dtype", "float32").code == 0
    log = tmp_path / "server.log"
    args = [binary(), "-m", target / "target.gguf", "-md", tmp_path / "baked.gguf", "--spec-type", "draft-eagle3"]
    with serving([*map(str, args), "-t", "1", "-c", "512", "-v"], log):  # -v: the loader's INFO lines
        pass
    assert "EAGLE3 extract_layers = [2, 2, 1]" in log.read_text()  # the taps the server runs
    named = tmp_path / "named"  # eaglezoo's conversion writes the ids at the top level: nothing to say
    assert run_inprocess("convert", EXAMPLE / "eagle3-safeai", named, "--aux-layers", "2,3,4", "--aux-convention",
                         "boundary", "--target", TARGET).code == 0  # fmt: skip
    assert "llamacpp-converter-taps" not in lint(named)


def test_speculators_config_without_norm_before_residual_is_named(tmp_path):
    folder = tmp_path / "spec"
    r = run_inprocess("convert", EXAMPLE / "eagle3-safeai", folder, "--to", "speculators", "--target", TARGET,
                      "--aux-layers", "1,2,3", "--aux-convention", "boundary")  # fmt: skip
    assert r.code == 0, r.err
    cfg = json.loads((folder / "config.json").read_text())
    del cfg["norm_before_residual"]  # as some speculators configs ship: vLLM reads true
    (folder / "config.json").write_text(json.dumps(cfg))
    found = lint(folder, "--flag", "norm_before_residual=true")
    assert "llamacpp-converter-norm-before-residual" in found
    assert "llamacpp-converter-norm-before-residual" not in lint(folder, "--flag", "norm_before_residual=false")
    fields = converted_by_llamacpp(folder, tmp_path / "spec.gguf")
    assert fields["eagle3.norm_before_residual"] is False  # llama.cpp's converter drops it, as lint says


def test_engine_table_names_llamacpp_and_refuses_eagle31():
    r = run_inprocess("lint", EXAMPLE / "eagle31-safeai", "--target", TARGET, "--json")
    data = r.json()
    unfaithful = [f["message"] for f in data["findings"] if f["code"] == "engine-unfaithful"]
    assert any(m.startswith("llamacpp") and "fc_norm/norm_output" in m for m in unfaithful), unfaithful
    r = run_inprocess(
        "lint",
        EXAMPLE / "eagle3-safeai",
        "--target",
        TARGET,
        "--aux-layers",
        "1,2,3",
        "--aux-convention",
        "boundary",
        "--json",
    )
    engines = {e["engine"]: e for e in r.json()["engines"]}
    assert engines["llamacpp"]["faithful"] and engines["llamacpp"]["min_version"] == "11434"
