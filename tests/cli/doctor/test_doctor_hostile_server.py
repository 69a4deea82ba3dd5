"""`eaglezoo doctor --endpoint` against a server that lies or stalls (tests/support/hostile_vllm.py): counters no
engine could have counted, a context no model has, a redirect to another host, silence, an answer trickled a byte
at a time, terminal escapes in its error. Each is refused in one line, exit 2, before any verdict; a silent or
trickling server within 90 s with the default settings. And a planned deployment's K table out of bounds, refused
before any engine starts."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import CLI_ENV, ROOT, assert_clean_failure, run_cli, run_inprocess
from support.hostile_vllm import hostile, metrics_text

QUICK = ["--max-prompts", "4", "--max-new-tokens", "16"]
ZERO = metrics_text(0, 0, 0, [0, 0, 0])


def doctor(server, *args):
    try:
        return run_inprocess("doctor", "tiny-example-eagle31", "--endpoint", server.url, *QUICK, *args)
    finally:
        server.stop()


@pytest.mark.parametrize(
    "before, after, says",
    [
        (ZERO, metrics_text(40, 120, 1e30, [30, 20, 10]), "num_accepted_tokens"),  # 10^30 accepted
        (ZERO, metrics_text(40, 120, -5, [30, 20, 10]), "num_accepted_tokens"),  # a negative count
        (ZERO, metrics_text(-40, 120, 60, [30, 20, 10]), "num_drafts"),
        (ZERO, metrics_text(10, 30, 60, [10, 10, 10]), "num_accepted_tokens"),  # 6 accepted per draft at K=3
        (ZERO, metrics_text(40, 400, 60, [30, 20, 10]), "num_draft_tokens"),  # 10 drafted per draft at K=3
        (ZERO, metrics_text(40, 120, 60, [300, 20, 10]), "num_accepted_tokens_per_pos"),  # position 0 > drafts
        (
            metrics_text(100, 300, 150, [80, 50, 20]),
            metrics_text(140, 420, 210, [70, 90, 50]),
            "num_accepted_tokens_per_pos",
        ),  # went backwards at position 0 while the others moved on
        (metrics_text(100, 300, 150, [80, 50, 20]), metrics_text(40, 120, 60, [30, 20, 10]), "num_drafts"),  # reset
    ],
)
def test_counters_no_engine_could_have_counted_are_no_measurement(before, after, says):
    r = doctor(hostile(metrics=[before, after]))
    assert_clean_failure(r, contains=says)
    assert "/metrics" in r.err


@pytest.mark.parametrize(
    "metrics, says",
    [
        ({"num_spec_tokens": 3, "per_step_accepted": [1, 99, 2]}, "per_step_accepted 99"),
        ({"num_spec_tokens": 3, "per_step_accepted": [1, -1]}, "per_step_accepted -1"),
        ({"num_spec_tokens": 3, "per_step_accepted": [1, 1e30]}, "per_step_accepted 1"),
        ({"num_spec_tokens": -3, "per_step_accepted": [1]}, "num_spec_tokens -3"),
    ],
)
def test_per_request_acceptance_no_engine_could_have_counted_is_no_measurement(metrics, says):
    r = doctor(hostile(per_request={"num_spec_steps": 2, **metrics}))
    assert_clean_failure(r, contains=says)


@pytest.mark.parametrize("length", [-5, 0, 10**15, "1024", True, "\x1b]0;owned\x07\x1b[2J"])
def test_a_context_no_model_has_is_refused(length):
    r = doctor(hostile(model={"id": "examples/tiny/target", "root": "examples/tiny/target", "max_model_len": length}))
    assert_clean_failure(r, contains="max_model_len")
    assert "\x1b" not in r.err + r.out


@pytest.mark.parametrize(
    "spec, says",
    [
        ({"num_speculative_tokens": -3}, "num_speculative_tokens is -3"),
        ({"num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": [[1, 4, -1]]}, "K -1"),
        ({"num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": [[0, 4, 2]]}, "batch size"),
    ],
)
def test_a_speculative_config_vllm_would_not_start_with_is_refused(spec, says):
    """/server_info (dev mode) stating what vLLM refuses at start (vllm/v1/spec_decode/dynamic/utils.py)."""
    info = {
        "vllm_config": {
            "speculative_config": {"method": "eagle3", "model": "examples/tiny/eagle31-safeai", **spec},
            "model_config": {"dtype": "torch.float32"},
        }
    }
    r = doctor(hostile(server_info=info))
    assert_clean_failure(r, contains=says)


def test_a_redirect_to_another_host_is_refused_naming_it():
    elsewhere = hostile()  # a healthy server: its answers must not be taken for the one named
    try:
        r = doctor(hostile(redirect_to=elsewhere.url))
    finally:
        elsewhere.stop()
    assert_clean_failure(r, contains=f"redirected to {elsewhere.url}/v1/models")


def test_escapes_in_a_servers_error_never_reach_the_terminal():
    body = b'{"error": {"message": "\\u001b]0;owned\\u0007\\u001b[2Jboom \\u001b[31mred"}}'
    r = doctor(hostile(error_body=body))
    assert_clean_failure(r, contains="boom")
    assert "\x1b" not in r.err + r.out and "\x07" not in r.err + r.out


def timed(server, env: dict, limit: float = 60):
    """doctor in its own process (EAGLEZOO_* settings are read once per process), killed at `limit` seconds."""
    t0 = time.monotonic()
    try:
        r = run_cli("doctor", "tiny-example-eagle31", "--endpoint", server.url, *QUICK, env=env, timeout=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"doctor ran past {limit} s")
    finally:
        server.stop()
    return r, time.monotonic() - t0


def test_a_trickling_server_is_cut_at_the_request_limit():
    """A byte every 0.2 s never lets a socket timeout fire: the request's own deadline cuts it."""
    r, seconds = timed(hostile(trickle=0.2), env={"EAGLEZOO_ENDPOINT_TIMEOUT": "2"})
    assert_clean_failure(r, contains="did not answer")
    assert "EAGLEZOO_ENDPOINT_TIMEOUT" in r.err
    assert seconds < 45  # the CLI's start included, on a loaded machine


def test_a_server_answering_each_request_just_in_time_is_cut_at_doctors_total():
    """Each request answers within its own limit; doctor's total wait on the server is bounded all the same."""
    r, seconds = timed(hostile(slow=1.0), env={"EAGLEZOO_ENDPOINT_TIMEOUT": "5", "EAGLEZOO_DOCTOR_DEADLINE": "3"})
    assert_clean_failure(r, contains="within 3 s")
    assert "EAGLEZOO_DOCTOR_DEADLINE" in r.err
    assert seconds < 45  # the CLI's start included, on a loaded machine


def test_silent_and_trickling_servers_stop_doctor_within_90_s_by_default():
    """The default settings, no EAGLEZOO_* variable: both runs at once, each killed at 90 s if it is still going."""
    servers = {"silent": hostile(silent=True), "trickling": hostile(trickle=2.0)}
    env = {k: v for k, v in CLI_ENV.items() if not k.startswith("EAGLEZOO_")}
    t0 = time.monotonic()
    runs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "eaglezoo", "doctor", "tiny-example-eagle31", "--endpoint", s.url, *QUICK],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, s in servers.items()
    }
    try:
        for name, proc in runs.items():
            try:
                _, err = proc.communicate(timeout=max(0.0, 90 - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                pytest.fail(f"doctor ran past 90 s on a {name} server")
            assert proc.returncode == 2, (name, err)
            assert "did not answer" in err and err.count("\n") == 1, (name, err)
    finally:
        for proc in runs.values():
            proc.kill()
            proc.wait()
        for s in servers.values():
            s.stop()


@pytest.mark.parametrize(
    "row, says",
    [
        ([1, 4, -1], "K -1"),
        ([1, 4, 99], "K 99"),
        ([1, 4, 5], "K 5"),  # past the deployment's K (3 by default): vLLM would cut it to K without a word
        ([0, 4, 2], "batch size"),
        ([8, 4, 2], "batch size"),
    ],
)
def test_a_k_table_out_of_bounds_is_refused_before_the_engine_starts(row, says):
    r = run_inprocess(
        "doctor",
        "tiny-example-eagle31",
        "--engine",
        "vllm",
        "--engine-python",
        sys.executable,
        "--speculative-config",
        f'{{"num_speculative_tokens_per_batch_size": [{row}]}}',
    )
    assert_clean_failure(r, contains=says)
    assert "num_speculative_tokens_per_batch_size" in r.err


def test_a_bad_doctor_deadline_setting_is_one_line_before_any_request():
    r = run_cli(
        "doctor", "tiny-example-eagle31", "--endpoint", "http://127.0.0.1:9", env={"EAGLEZOO_DOCTOR_DEADLINE": "0"}
    )
    assert_clean_failure(r, contains="EAGLEZOO_DOCTOR_DEADLINE='0'")
