"""doctor on a vLLM server names the row of eaglezoo/engine_versions.py its /version falls in, for the drafter named
(the example's EAGLE 3.1 flags touch the fc_norm row), and says when a version does not parse; the server answers as
vLLM does for the example (tests/support/hostile_vllm.py, every lie off but its version)."""

from __future__ import annotations

import json

import pytest
from conftest import run_inprocess
from support.hostile_vllm import hostile


def notes(version: str) -> list[str]:
    server = hostile(version=version)
    try:
        r = run_inprocess(
            "doctor",
            "tiny-example-eagle31",
            "--endpoint",
            server.url,
            "--max-prompts",
            "4",
            "--max-new-tokens",
            "16",
            "--json",
        )
    finally:
        server.stop()
    assert r.code in (0, 1), r.err
    return [n for n in json.loads(r.out)["notes"] if "engine issue" in n]


def test_a_release_in_a_row_is_named_with_its_source():
    (note,) = notes("0.21.0")
    assert "vllm-fc-norm" in note and "https://github.com/vllm-project/vllm/pull/42764" in note


@pytest.mark.parametrize("version", ["0.22.0", "0.32.0"])
def test_a_release_past_the_rows_names_none(version):
    assert notes(version) == []


def test_a_version_that_does_not_parse_is_said():
    (note,) = notes("main-\x1b[2J")
    assert "does not parse as a release" in note and "\x1b" not in note
