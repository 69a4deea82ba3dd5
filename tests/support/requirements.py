"""A user registry holding a copy of a shipped entry with requirements declared (issue 43, item 4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from conftest import ROOT

CARD = "https://example.org/card"
REQUIREMENTS = {
    "chat_endpoint": True,
    "thinking": "off",
    "recommended_k": 2,
    "context_length": 1024,
    "engines": [{"engine": "vllm", "min_version": "0.22.0", "reason": "the fc_norm fix", "source": CARD}],
    "source": CARD,
}


def declared(tmp_path: Path, entry: str = "tiny-example-eagle3", requirements: dict = REQUIREMENTS) -> Path:
    """The user's registry folder: the shipped `entry` with `requirements`, its example files copied beside it (an
    entry's paths resolve inside its own repository)."""
    data = yaml.safe_load((ROOT / "registry" / f"{entry}.yaml").read_text())
    data["requirements"] = requirements
    folder = tmp_path / "mine" / "registry"
    folder.mkdir(parents=True, exist_ok=True)
    if data["drafter"].get("path") and not (tmp_path / "mine" / "examples").exists():
        shutil.copytree(ROOT / "examples" / "tiny", tmp_path / "mine" / "examples" / "tiny")
    (folder / f"{entry}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder
