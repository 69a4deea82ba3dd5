"""The commands eaglezoo prints (issue 46): the serve command is the one for production; what doctor and verify
--endpoint need of a server (VLLM_SERVER_DEV_MODE=1, which also opens /collective_rpc, and per-request acceptance)
comes apart, labelled; an entry whose aux ids are unknown says so before its command, on the site too; local paths
are printed whole, so doctor run from another folder reads the folder the server was given."""

from __future__ import annotations

import html
import json
import os
import shlex
import subprocess
import sys

from conftest import CLI_ENV, EXAMPLE, ROOT, run_inprocess

from eaglezoo.serving import DIAGNOSE_LABEL

ENTRY = "tiny-example-eagle31"
UNKNOWN_IDS = "angelslim-qwen3-8b-eagle3"  # a Hub entry whose aux ids no public file states
DEV = "VLLM_SERVER_DEV_MODE=1"
METRICS = "--per-request-spec-decode-metrics detailed"


def production_and_diagnostic(text: str) -> tuple[list[str], list[str]]:
    """(the lines that start vLLM for production, the dev-mode lines) of a printed path; each dev-mode line must
    come right after the label."""
    lines = text.splitlines()
    dev = [n for n, line in enumerate(lines) if DEV in line and not line.startswith("#")]
    for n in dev:
        assert lines[n - 1] == f"# {DIAGNOSE_LABEL}", (lines[n - 1], text)
    return [x for x in lines if x.startswith("vllm serve")], [lines[n] for n in dev]


def test_the_serve_command_is_for_production_and_the_diagnostic_one_is_labelled():
    r = run_inprocess("serve-config", ENTRY)
    assert r.code == 0, r.err
    served, diagnostic = production_and_diagnostic(r.out)
    assert len(served) == 1 and DEV not in served[0] and METRICS not in served[0], r.out
    assert len(diagnostic) == 1 and METRICS in diagnostic[0] and diagnostic[0].startswith(f"{DEV} vllm serve")
    assert shlex.split(diagnostic[0])[1:-2] == shlex.split(served[0])  # the same server, dev mode on
    sc = run_inprocess("serve-config", ENTRY, "--json").json()
    assert DEV not in sc["command"] and METRICS not in sc["command"] and sc["steps"][-1] == sc["command"]
    assert sc["diagnose_command"].startswith(DEV) and METRICS in sc["diagnose_command"]
    assert "collective_rpc" in DIAGNOSE_LABEL and "production" in DIAGNOSE_LABEL


def test_sglang_has_no_diagnostic_command():
    sc = run_inprocess("serve-config", ENTRY, "--engine", "sglang", "--json").json()
    assert sc["diagnose_command"] is None and DEV not in " ".join(sc["steps"])


def test_the_site_and_model_card_print_the_same_two_commands(tmp_path):
    from eaglezoo.hub.card import _serving_section
    from eaglezoo.registry.load import lookup

    site = tmp_path / "site"
    assert run_inprocess("registry", "site", site).code == 0
    page = (site / "entries" / f"{ENTRY}.html").read_text()
    import html

    served, diagnostic = production_and_diagnostic(html.unescape(page).replace("<pre><code>", "\n"))
    assert served and diagnostic and not any(DEV in s for s in served), page
    entry, _ = lookup(ENTRY, None)
    card = "\n".join(_serving_section(entry.spec(), "eagle31", "org/drafter", "org/target"))
    served, diagnostic = production_and_diagnostic(card)
    assert served and diagnostic, card


def test_an_entry_with_unknown_aux_ids_says_so_before_its_command():
    r = run_inprocess("serve-config", UNKNOWN_IDS)
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.startswith("# warning:") and "aux ids" in first, r.out  # before any command, where it is read
    assert "does not know this drafter's aux ids" in r.out
    assert r.out.index("does not know") < r.out.index("vllm serve")


def test_the_site_keeps_the_warnings_of_an_entry_with_unknown_aux_ids(tmp_path):
    site = tmp_path / "site"
    assert run_inprocess("registry", "site", site).code == 0
    page = html.unescape((site / "entries" / f"{UNKNOWN_IDS}.html").read_text())  # as a browser reads it
    assert "does not know this drafter's aux ids" in page
    assert page.index("does not know this drafter") < page.index("vllm serve"), page


def run_from(folder, *args) -> subprocess.CompletedProcess:
    env = {**CLI_ENV, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "eaglezoo", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=folder,
        env=env,
        timeout=300,
    )


def test_doctor_from_another_folder_reads_the_folders_serve_config_printed(tmp_path, monkeypatch):
    """serve-config run in one folder, the server started there as printed, doctor run from another: the paths the
    server reports (/server_info: the speculative config's model, as given; /v1/models: the target) must still be
    folders doctor can read (doctor.run.endpoint_sides, ServerFacts.local)."""
    from eaglezoo.doctor.run import endpoint_sides
    from eaglezoo.verify.endpoint import ServerFacts

    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir(), elsewhere.mkdir()
    os.symlink(ROOT / "examples", here / "examples")
    for args in ([ENTRY], ["examples/tiny/eagle31-safeai", "--target", "examples/tiny/target"]):
        proc = run_from(here, "serve-config", *args, "--json")
        assert proc.returncode == 0, proc.stderr
        sc = json.loads(proc.stdout)
        if sc["convert_command"]:  # run the path as printed, from where it was printed
            convert = run_from(here, *shlex.split(sc["convert_command"])[1:])
            assert convert.returncode == 0, convert.stderr
        words = shlex.split(sc["command"])
        served_target, served_drafter = words[2], json.loads(words[words.index("--speculative-config") + 1])["model"]
        facts = ServerFacts(
            url="http://127.0.0.1:8000",
            version=None,
            model="m",
            root=served_target,
            max_model_len=None,
            dev_mode=True,
            method="eagle3",
            drafter=served_drafter,
            k=3,
        )
        monkeypatch.chdir(elsewhere)  # doctor run from another folder
        sides = endpoint_sides(facts, None, None)
        assert sides.served_drafter is not None and sides.served_target is not None, (args, sc["command"])


def test_a_folder_drafter_is_printed_whole(tmp_path):
    r = run_inprocess("serve-config", EXAMPLE / "eagle31-safeai", "--target", EXAMPLE / "target", "--json")
    assert r.code == 0, r.err
    sc = r.json()
    assert os.path.isabs(sc["drafter"]) and os.path.isabs(sc["target"]), sc


def test_a_hint_that_turns_dev_mode_on_says_what_it_opens():
    """verify --endpoint's and doctor's hints name dev mode with where its command is printed and what it opens."""
    from eaglezoo.verify.endpoint import check_drafter

    note = check_drafter(None, None, "http://127.0.0.1:8000")[0]
    assert DEV in note and "collective_rpc" in note and "serve-config" in note, note
