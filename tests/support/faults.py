"""Drafters and targets broken the way users break them, each a copy of a healthy folder with one fault: what
`eaglezoo doctor` must name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def edit_config(folder: Path, change) -> Path:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config, indent=2))
    return folder


def edit_tensors(folder: Path, change) -> Path:
    for file in folder.glob("*.safetensors"):
        tensors = load_file(file)
        change(tensors)
        save_file(tensors, file, metadata={"format": "pt"})
    return folder


def aux_ids_absent(drafter: Path, out: Path) -> Path:
    """The top-level ids vLLM reads removed (as in a SafeAILab or SpecForge folder): vLLM captures its default."""
    return edit_config(copy(drafter, out), lambda c: c.pop("eagle_aux_hidden_state_layer_ids"))


def aux_ids_other_convention(drafter: Path, out: Path) -> Path:
    """The boundary ids written as layer outputs (each one lower), where vLLM reads boundary ids."""

    def lower(c):
        c["eagle_aux_hidden_state_layer_ids"] = [i - 1 for i in c["eagle_aux_hidden_state_layer_ids"]]

    return edit_config(copy(drafter, out), lower)


def norm_output_stripped(drafter: Path, out: Path) -> Path:
    """EAGLE 3.1's norm_output key dropped (a converter that knows only EAGLE-3): no tensor goes with it, so vLLM
    loads the drafter and feeds back the pre-norm state. (Dropping fc_norm too fails loudly in vLLM 0.32: its
    fc_norm weights then have no module to load into.)"""
    return edit_config(copy(drafter, out), lambda c: c.pop("norm_output"))


def d2t_missing(drafter: Path, out: Path) -> Path:
    """The draft-to-target map dropped from the weights: vLLM keeps its zero map, and says nothing."""
    return edit_tensors(copy(drafter, out), lambda t: t.pop("d2t"))


def fine_tuned(target: Path, out: Path, scale: float = 0.5, seed: int = 0) -> Path:
    """The target with its decoder weights moved (a fine-tune): same config and tokenizer, other hidden states."""
    generator = torch.Generator().manual_seed(seed)

    def move(tensors):
        for name, t in tensors.items():
            if ".layers." in name and t.is_floating_point() and t.dim() == 2:
                noise = torch.randn(t.shape, generator=generator) * t.float().std() * scale
                tensors[name] = (t.float() + noise).to(t.dtype)

    return edit_tensors(copy(target, out), move)
