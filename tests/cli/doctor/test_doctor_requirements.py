"""doctor names each requirement the drafter declares (its registry entry's, issue 43 item 4) that the vLLM server
or the workload breaks: /version below the least release (with why), the served K against the recommended K, the
server's context beyond the trained one. The server answers as vLLM does for the example
(tests/support/hostile_vllm.py, every lie off but its version)."""

from __future__ import annotations

import json

from conftest import run_inprocess
from support.hostile_vllm import hostile
from support.requirements import CARD, declared

ENTRY = "tiny-example-eagle31"
NEEDS = {
    "recommended_k": 2,
    "context_length": 512,
    "engines": [{"engine": "vllm", "min_version": "0.40.0", "reason": "the fc_norm fix", "source": CARD}],
    "source": CARD,
}


def broken(tmp_path, version: str, needs: dict) -> list[str]:
    registry = declared(tmp_path, ENTRY, needs)
    server = hostile(version=version)
    try:
        r = run_inprocess(
            "doctor", ENTRY, "--registry", registry, "--endpoint", server.url, "--max-prompts", "4",
            "--max-new-tokens", "16", "--json",
        )  # fmt: skip
    finally:
        server.stop()
    assert r.code in (0, 1), r.err
    return [n for n in json.loads(r.out)["notes"] if n.startswith("requirement broken")]


def test_doctor_names_each_requirement_the_server_breaks(tmp_path):
    found = broken(tmp_path, "0.32.0", NEEDS)
    assert len(found) == 3, found
    version, k, context = found
    assert "vllm 0.32.0 is below the drafter's least release 0.40.0: the fc_norm fix" in version and CARD in version
    assert "drafts K=3; the drafter's recommended K is 2" in k
    assert "context (1024 tokens) is beyond the 512" in context


def test_a_server_that_meets_them_breaks_none(tmp_path):
    needs = {**NEEDS, "recommended_k": 3, "context_length": 4096}
    needs["engines"] = [{**NEEDS["engines"][0], "min_version": "0.32.0"}]
    assert broken(tmp_path, "0.32.0", needs) == []
