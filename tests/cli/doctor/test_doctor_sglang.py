"""`eaglezoo doctor DRAFTER --endpoint URL` on an SGLang server: recognised by its /server_info, its resolved
speculative settings read, each rule a cause code with its fix. No SGLang runs here: the server is a real local HTTP
server whose answers are built from SGLang 0.5.23's own source (tests/support/sglang_source.py), so the report says
"SGLang rules checked against its source (0.5.23), not a running server"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, assert_clean_failure, run_cli, run_inprocess
from support.sglang_source import SglangServer, server_info

from eaglezoo.doctor.sglang import SOURCE_NOTE

TARGET = str(ROOT / "examples/tiny/target")
AS_GIVEN = str(ROOT / "examples/tiny/eagle31-safeai")  # no ids where SGLang reads them
# what `eaglezoo serve-config tiny-example-eagle31 --engine sglang` serves: the ids nested, layer-output
EAGLE3 = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}


@pytest.fixture
def nested(tmp_path: Path) -> str:
    """The drafter as SGLang should be given it: the trained ids [2, 3, 4] (boundary) in eagle_config, layer-output."""
    folder = tmp_path / "served"
    shutil.copytree(AS_GIVEN, folder)
    config = json.loads((folder / "config.json").read_text())
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 2, 3], "use_aux_hidden_state": True}
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


QUICK = ["--max-prompts", "4", "--max-new-tokens", "12"]


def doctor(info: dict, *args: str, legacy: bool = False, inprocess: bool = True, accepted: int | None = None):
    server = SglangServer(info, model=TARGET, legacy=legacy, accepted=accepted)
    try:
        run = run_inprocess if inprocess else run_cli
        return run("doctor", "tiny-example-eagle31", "--endpoint", server.url, *QUICK, *args)
    finally:
        server.stop()


def causes(result) -> dict[str, dict]:
    return {f["cause"]: f for f in json.loads(result.out)["findings"]}


def test_eagle_given_an_eagle3_drafter(nested):
    r = doctor(
        server_info(model_path=TARGET, speculative_draft_model_path=nested, accept_lengths=(1.0,), **EAGLE3)
        | {"speculative_algorithm": "EAGLE"}
    )
    assert r.code == 1, r.out + r.err
    assert "sglang-eagle-not-eagle3" in r.out and "--speculative-algorithm EAGLE3" in r.out
    assert "SGLang 0.5.23" in r.out and "1.000" in r.out  # the engine and its measured acceptance length
    assert SOURCE_NOTE in r.out


def test_a_well_served_drafter_is_healthy_and_says_what_it_read(nested):
    """The settings serve-config prints, the ids where SGLang reads them: healthy, its acceptance length reported; the
    sampled-traffic rule is said, not taken as the verdict."""
    r = doctor(
        server_info(model_path=TARGET, speculative_draft_model_path=nested, accept_lengths=(2.31, 2.29), **EAGLE3),
        "--json",
    )
    assert r.code == 0, r.out + r.err
    report = json.loads(r.out)
    assert report["verdict"] == "healthy" and report["server"]["engine"] == "sglang"
    assert report["server"]["k"] == 3 and report["server"]["method"] == "EAGLE3"
    assert "2.310, 2.290" in report["summary"]
    assert set(causes(r)) == {"sglang-no-rejection-sampling"}
    assert not causes(r)["sglang-no-rejection-sampling"]["confirmed"]
    assert SOURCE_NOTE in report["notes"]
    assert any("not the drafter named" in n for n in report["notes"])  # the converted copy serves, the entry is named


def test_aux_ids_sglang_does_not_read_are_named_with_the_convert_path():
    r = doctor(server_info(model_path=TARGET, speculative_draft_model_path=AS_GIVEN, **EAGLE3), "--json")
    assert r.code == 1, r.out + r.err
    found = causes(r)["sglang-aux-ids"]
    assert found["confirmed"] and "[2, 2, 1]" in found["what"] and "[2, 3, 4]" in found["what"]
    assert found["fix"].startswith("eaglezoo serve-config tiny-example-eagle31 --engine sglang")


@pytest.mark.parametrize(
    "settings, cause, fix",
    [
        (
            {"quantization": "fp8", "speculative_draft_model_quantization": "fp8"},
            "sglang-draft-quantization",
            "--speculative-draft-model-quantization unquant",
        ),
        (
            {"speculative_accept_threshold_single": 0.5},
            "sglang-accept-threshold",
            "--speculative-accept-threshold-single",
        ),
        ({"speculative_accept_threshold_acc": 0.3}, "sglang-accept-threshold", "--speculative-accept-threshold-acc"),
    ],
)
def test_a_setting_that_changes_acceptance_is_the_cause(nested, settings, cause, fix):
    info = server_info(model_path=TARGET, speculative_draft_model_path=nested, **EAGLE3, **settings)
    info["_speculative_draft_quantization_explicitly_set"] = False  # resolved: the user did not set it
    r = doctor(info, "--json")
    assert r.code == 1, r.out + r.err
    report = json.loads(r.out)
    assert report["findings"][0]["cause"] == cause and fix in report["findings"][0]["fix"]
    assert report["verdict"] == "engine-config"


def test_a_draft_quantization_the_user_chose_is_not_a_finding(nested):
    info = server_info(
        model_path=TARGET,
        speculative_draft_model_path=nested,
        quantization="fp8",
        speculative_draft_model_quantization="fp8",
        _speculative_draft_quantization_explicitly_set=True,
        **EAGLE3,
    )
    assert "sglang-draft-quantization" not in causes(doctor(info, "--json"))


def test_attention_dp_is_named_to_check(nested):
    r = doctor(server_info(model_path=TARGET, speculative_draft_model_path=nested, attn_dp_size=2, **EAGLE3), "--json")
    found = causes(r)["sglang-dp-attention"]
    assert not found["confirmed"] and "16274" in found["what"]
    assert json.loads(r.out)["verdict"] == "healthy"  # unconfirmed: said, not the verdict


def test_num_draft_tokens_taken_for_k(nested):
    """The user meant K=3 and launched with --speculative-num-draft-tokens 3: SGLang drafts 2 (num_steps)."""
    info = server_info(
        model_path=TARGET,
        speculative_draft_model_path=nested,
        launch_command="python -m sglang.launch_server --speculative-num-steps 2 --speculative-num-draft-tokens 3",
        **(EAGLE3 | {"speculative_num_steps": 2, "speculative_num_draft_tokens": 3}),
    )
    r = doctor(info, "-k", "3", "--json")
    assert r.code == 1, r.out + r.err
    found = causes(r)["sglang-draft-tokens"]
    assert found["confirmed"] and "K=2" in found["what"] and "K=3" in found["what"]
    assert found["fix"] == "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"


def test_a_release_known_to_serve_wrongly_is_named(nested):
    r = doctor(
        server_info(model_path=TARGET, speculative_draft_model_path=nested, version="0.5.10.post1", **EAGLE3), "--json"
    )
    found = causes(r)["engine-known-issue"]
    assert "https://github.com/sgl-project/sglang/issues/24795" in found["evidence"][0]
    assert found["fix"] == "upgrade SGLang to 0.5.11 or later"


def test_an_earlier_release_answers_on_get_server_info(nested):
    r = doctor(server_info(model_path=TARGET, speculative_draft_model_path=nested, **EAGLE3), "--json", legacy=True)
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["server"]["engine"] == "sglang"


# bad input


def test_a_server_without_speculative_settings_is_one_line_with_the_flag_to_add():
    r = doctor(server_info(model_path=TARGET), inprocess=False)
    assert_clean_failure(r, contains="runs no speculative decoding")
    assert "--speculative-algorithm EAGLE3" in r.err


def test_a_version_that_does_not_parse_is_said_not_fatal(nested):
    r = doctor(
        server_info(model_path=TARGET, speculative_draft_model_path=nested, version="nightly\x1b[2J", **EAGLE3),
        inprocess=False,
    )
    assert r.code == 0, r.out + r.err
    assert "does not parse as a release" in r.out and "Traceback" not in r.err
    assert "\x1b" not in r.out + r.err


@pytest.mark.parametrize(
    "lie, says",
    [
        ({"speculative_num_steps": "3"}, "speculative_num_steps"),
        ({"speculative_num_steps": 10**9}, "speculative_num_steps"),
        ({"speculative_accept_threshold_single": 7.0}, "speculative_accept_threshold_single"),
        ({"speculative_use_rejection_sampling": "yes"}, "speculative_use_rejection_sampling"),
        ({"internal_states": [{"avg_spec_accept_length": -2.0}]}, "avg_spec_accept_length"),
    ],
)
def test_a_setting_sglang_never_writes_is_one_line(nested, lie, says):
    r = doctor(server_info(model_path=TARGET, speculative_draft_model_path=nested, **EAGLE3) | lie)
    assert_clean_failure(r, contains=says)


def test_each_prompts_acceptance_is_read_from_its_answer(nested):
    """The prompts go as token ids, greedy, asking for return_spec_tokens_details; each answer's
    sglext.spec_tokens_details (SGLang's own models and meta_info arithmetic) is read back as its verify steps."""
    info = server_info(model_path=TARGET, speculative_draft_model_path=nested, **EAGLE3)
    server = SglangServer(info, model=TARGET, accepted=2)
    try:
        r = run_inprocess("doctor", "tiny-example-eagle31", "--endpoint", server.url, *QUICK, "--json")
    finally:
        server.stop()
    assert r.code == 0, r.out + r.err
    report = json.loads(r.out)
    (measured,) = report["measured"]
    assert measured["source"] == "server" and measured["prompts"] == 4
    assert measured["mean_acceptance_length"] == 3.0 and measured["per_position"] == [1.0, 1.0, 0.0]
    assert report["server"]["per_request_metrics"] and report["prompts"] == 4
    assert len(server.posted) == 4
    assert all(p["return_spec_tokens_details"] and p["temperature"] == 0.0 for p in server.posted)
    assert all(isinstance(p["prompt"], list) and p["max_tokens"] == 12 for p in server.posted)


def test_eagle_measured_at_one(nested):
    info = server_info(model_path=TARGET, speculative_draft_model_path=nested, **EAGLE3) | {
        "speculative_algorithm": "EAGLE"
    }
    r = doctor(info, "--json", accepted=0)
    assert r.code == 1, r.out + r.err
    report = json.loads(r.out)
    assert report["measured"][0]["mean_acceptance_length"] == 1.0
    assert report["findings"][0]["cause"] == "sglang-eagle-not-eagle3"


def test_answers_without_spec_details_are_said(nested):
    r = doctor(server_info(model_path=TARGET, speculative_draft_model_path=nested, **EAGLE3), "--json")
    report = json.loads(r.out)
    assert report["measured"] == [] and any("spec_tokens_details" in n for n in report["notes"])


@pytest.mark.parametrize(
    "lie, says",
    [
        ({"spec_correct_drafts_histogram": [0, 0, 0, 0, 3]}, "accepting 4 drafts at K=3"),
        ({"spec_verify_ct": -1}, "not a whole number"),
        ({"spec_num_correct_drafts": 999}, "is not its"),
        ({"spec_correct_drafts_histogram": "lots"}, "not a whole number"),
    ],
)
def test_per_request_acceptance_sglang_never_writes_is_one_line(nested, lie, says):
    server = SglangServer(
        server_info(model_path=TARGET, speculative_draft_model_path=nested, **EAGLE3), model=TARGET, accepted=2, lie=lie
    )
    try:
        r = run_inprocess("doctor", "tiny-example-eagle31", "--endpoint", server.url, *QUICK)
    finally:
        server.stop()
    assert_clean_failure(r, contains=says)


def test_the_report_and_page_are_written_and_read_back(nested, tmp_path):
    """An SGLang diagnosis is a doctor report like any other: saved, its page written, `eaglezoo report` reads it."""
    report, page = tmp_path / "doctor.json", tmp_path / "doctor.html"
    info = server_info(model_path=TARGET, speculative_draft_model_path=nested, **EAGLE3) | {
        "speculative_algorithm": "EAGLE"
    }
    r = doctor(info, "--report", str(report), "--html", str(page), accepted=0)
    assert r.code == 1, r.out + r.err
    assert "sglang-eagle-not-eagle3" in page.read_text()
    shown = run_inprocess("report", str(report))
    assert shown.code == 0, shown.err
    assert "sglang-eagle-not-eagle3" in shown.out and SOURCE_NOTE in shown.out
