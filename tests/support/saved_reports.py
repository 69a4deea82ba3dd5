"""A valid saved report of each kind, as plain JSON data, for tests that edit one field and read it back:
verify's is the shipped one, tune's and compare's those written before `kind` (tests/support/reports/), with
`kind` and a reproduction added; doctor's is written here, shaped as `eaglezoo doctor --report` writes it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAVED = Path(__file__).resolve().parent / "reports"
REPRODUCTION = {
    "command": ["eaglezoo", "compare", "a", "b"],
    "eaglezoo": "0.1.0",
    "python": "3.11.0",
    "torch": "2.5.0",
    "transformers": "4.50.0",
    "engine": "native",
    "prompt_set": "default",
    "prompts_sha256": "0" * 64,
    "seed": None,
    "bootstrap_seed": 0,
    "machine": None,
}
DOCTOR = {
    "kind": "doctor",
    "eaglezoo_version": "0.1.0",
    "verdict": "engine-config",
    "summary": "the server accepts 1.500, the native reference 2.250",
    "server": {
        "url": "http://127.0.0.1:8000",
        "engine": "vllm",
        "version": "0.32.0",
        "target": "tiny-target",
        "drafter": "/models/drafter",
        "method": "eagle3",
        "k": 3,
        "k_table": [[1, 4, 3], [5, 8, 0]],
        "draft_sample_method": None,
        "max_model_len": 2048,
        "per_request_metrics": True,
        "config_readable": True,
    },
    "drafter": "examples/tiny/eagle31-safeai",
    "target": "examples/tiny/target",
    "prompts": 4,
    "max_new_tokens": 16,
    "measured": [
        {
            "source": "server",
            "mean_acceptance_length": 1.5,
            "interval": [1.5, 1.5],
            "per_position": [0.3, 0.15, 0.05],
            "prompts": 4,
            "drafts": 20,
            "per_prompt": [],
        },
        {
            "source": "reference",
            "mean_acceptance_length": 2.25,
            "interval": [2.0, 2.5],
            "per_position": [0.6, 0.4, 0.25],
            "prompts": 4,
            "drafts": 16,
            "per_prompt": [2.0, 2.5, 2.25, 2.25],
        },
    ],
    "findings": [
        {
            "cause": "k-table-zero",
            "verdict": "engine-config",
            "what": "the table sends K=0 at 5-8",
            "evidence": ["the server's table: [[1, 4, 3], [5, 8, 0]]"],
            "fix": "set the table to K=3",
            "restores": None,
            "confirmed": True,
        }
    ],
    "floors": [0.5, 0.3, 0.2],
    "notes": ["a note"],
    "timing": {"server_s": 1.0, "reference_s": 2.0, "target_passes": 1.0, "total_s": 3.5},
}


def valid(kind: str) -> dict:
    """A report of `kind` that `eaglezoo report` reads and prints."""
    if kind == "verify":
        return json.loads((ROOT / "registry" / "reports" / "tiny-example-eagle31.k3.t0.native.json").read_text())
    if kind == "doctor":
        return copy.deepcopy(DOCTOR)
    data = json.loads((SAVED / f"{kind}-before-kind.json").read_text())
    return {**data, "kind": kind, "reproduction": copy.deepcopy(REPRODUCTION)}


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path
