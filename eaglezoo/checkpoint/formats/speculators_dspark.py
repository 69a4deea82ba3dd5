"""speculators `dspark` drafters (docs/formats.md#dspark); see speculators_block."""

from __future__ import annotations

from ..spec import DrafterSpec
from ..tensors import Checkpoint
from . import speculators_block
from .base import Reading, ReadOptions

NAME = "speculators-dspark"
FAMILY = "dspark"


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    return speculators_block.detect(cfg, FAMILY)


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    return speculators_block.read(NAME, FAMILY, cfg, ckpt)


def write_config(spec: DrafterSpec, verifier, decisions: list[str], warnings: list[str]) -> dict:
    return speculators_block.write_config(spec, verifier, decisions, warnings)
