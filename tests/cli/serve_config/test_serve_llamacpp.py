"""serve-config --engine llamacpp: the whole llama.cpp path in order (the target's GGUF, the drafter's GGUF, then
llama-server on both with the drafter family's --spec-type, K and --metrics), the same text on the site, and a
drafter llama.cpp b11434 cannot serve refused in one line with convert --to gguf's reason."""

from __future__ import annotations

import html
import json
import shlex

from conftest import EXAMPLE, assert_clean_failure, run_inprocess
from support.factory import make_drafter, make_spec

from eaglezoo.serving import llamacpp_serve_command

TARGET = EXAMPLE / "target"


def path_of(*args) -> dict:
    r = run_inprocess("serve-config", *args, "--engine", "llamacpp", "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_the_whole_path_in_order():
    sc = path_of("tiny-example-eagle3")
    target_step, drafter_step, serve = (shlex.split(s) for s in sc["steps"])
    assert target_step[:2] == ["eaglezoo", "convert"] and target_step[-2:] == ["--to", "gguf"]
    assert target_step[2].endswith("examples/tiny/target") and target_step[3].endswith("target-gguf")
    assert drafter_step[:3] == ["eaglezoo", "convert", "tiny-example-eagle3"]
    assert drafter_step[drafter_step.index("--target") + 1] == target_step[2] and "--to" in drafter_step
    assert serve == [
        "llama-server",
        "-m",
        f"{target_step[3]}/target.gguf",
        "-md",
        f"{drafter_step[3]}/drafter.gguf",
        "--spec-type",
        "draft-eagle3",
        "--spec-draft-n-max",
        "3",
        "--metrics",
    ]
    assert sc["command"] == sc["steps"][2] and sc["target_convert_command"] == sc["steps"][0]
    assert sc["convert_command"] == sc["steps"][1] and sc["aux_layers_captured"] == [2, 3, 4]
    # the example's third tap is the Llama target's last pre-norm state: said before any command
    assert any("tap 4 is the target's last pre-norm state" in w for w in sc["warnings"])


def test_printed_text_labels_each_step():
    r = run_inprocess("serve-config", "tiny-example-eagle3", "--engine", "llamacpp", "-k", "2")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    commands = [x for x in lines if not x.startswith("#")]
    assert [c.split()[0] for c in commands] == ["eaglezoo", "eaglezoo", "llama-server"], r.out
    assert "--spec-draft-n-max 2" in commands[2]
    labels = [x for x in lines if x.startswith("# 1.") or x.startswith("# 2.") or x.startswith("# 3.")]
    assert len(labels) == 3 and lines.index(labels[0]) < lines.index(commands[0]) < lines.index(labels[1])


def test_dflash_takes_draft_dflash_and_k_within_its_block():
    sc = path_of("tiny-example-dflash")
    assert "--spec-type draft-dflash" in sc["command"]
    r = run_inprocess("serve-config", "tiny-example-dflash", "--engine", "llamacpp", "-k", "9")
    assert_clean_failure(r, contains="beyond the dflash drafter's block")


def test_a_folder_and_its_target():
    sc = path_of(EXAMPLE / "dflash", "--target", TARGET)
    assert shlex.split(sc["steps"][1])[2].endswith("examples/tiny/dflash")


def test_the_builder_names_each_family():
    for family, spec_type in (("eagle3", "draft-eagle3"), ("dflash", "draft-dflash"), ("dspark", "draft-dspark")):
        words = shlex.split(llamacpp_serve_command("t.gguf", "d.gguf", family, 4))
        assert words[words.index("--spec-type") + 1] == spec_type and "--metrics" in words


def test_refuses_eagle31_fc_norm():
    r = run_inprocess("serve-config", "tiny-example-eagle31", "--engine", "llamacpp")
    assert_clean_failure(r, contains="cannot serve this drafter: fc_norm (EAGLE 3.1)")
    assert "vLLM" in r.err


def test_refuses_peagle():
    r = run_inprocess("serve-config", "tiny-example-peagle", "--engine", "llamacpp")
    assert_clean_failure(r, contains="a peagle drafter")


def test_refuses_four_taps(tmp_path):
    spec = make_spec(hidden=128, target_hidden=128, vocab=1024, draft_vocab=512, k=4, ids=(1, 2, 3, 4))
    src = make_drafter(tmp_path / "src", "speculators", spec=spec)
    r = run_inprocess("serve-config", src, "--target", TARGET, "--engine", "llamacpp")
    assert_clean_failure(r, contains="4 aux layers: llama.cpp b11434 reads exactly 3")


def test_refuses_a_folder_without_aux_ids_with_the_conversion_that_states_them():
    r = run_inprocess("serve-config", EXAMPLE / "eagle3-safeai", "--target", TARGET, "--engine", "llamacpp")
    assert_clean_failure(r, contains="aux ids are unknown")
    assert "--aux-layers" in r.err


def test_the_site_prints_the_same_path(tmp_path):
    site = tmp_path / "site"
    assert run_inprocess("registry", "site", site).code == 0
    page = html.unescape((site / "entries" / "tiny-example-eagle3.html").read_text())
    shown = page[page.index("<p>llamacpp</p><pre><code>") :].split("<code>")[1].split("</code>")[0].splitlines()
    assert shown == [  # the entry as the registry names it (the site is published: no local path)
        "eaglezoo convert examples/tiny/target target-gguf --to gguf",
        "eaglezoo convert tiny-example-eagle3 tiny-example-eagle3-gguf --to gguf --target examples/tiny/target",
        llamacpp_serve_command("target-gguf/target.gguf", "tiny-example-eagle3-gguf/drafter.gguf", "eagle3", 3),
    ]
    refused = html.unescape((site / "entries" / "tiny-example-eagle31.html").read_text())
    assert "llamacpp: not served (llama.cpp b11434 cannot serve this drafter: fc_norm" in refused
