"""DeepSpec's EAGLE-3 drafters (docs/formats.md#deepspec-eagle-3): `Qwen3Eagle3Model`, top-level `target_layer_ids`
"after layer i" (read like DeepSpec's dense DSpark ids, +1 to a boundary: the same key vLLM resolves in
v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:123-127), `ttt_length`, `num_target_layers`,
`draft_num_hidden_layers`. Not in vLLM's model registry: convert it to EAGLE 3.1 to serve it."""

from __future__ import annotations

from ..tensors import Checkpoint
from . import aux_ids
from .base import FlatRules, Reading, ReadOptions, parse_ids, read_flat

NAME = "deepspec-eagle3"
ARCH = "Qwen3Eagle3Model"


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    return ARCH in (cfg.get("architectures") or []) and "speculators_model_type" not in cfg


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    view = {k: v for k, v in cfg.items() if k not in ("target_layer_ids", "draft_num_hidden_layers")}
    notes = []
    if "target_layer_ids" in cfg:
        ids = parse_ids(cfg["target_layer_ids"], "target_layer_ids")
        view["eagle_aux_hidden_state_layer_ids"] = aux_ids.DEEPSPEC_TARGET.to_boundary(ids)
        notes.append(
            f"target_layer_ids {ids} are DeepSpec's 'after layer i' ids: +1 = boundary "
            f"{view['eagle_aux_hidden_state_layer_ids']}"
        )
    if "draft_num_hidden_layers" in cfg:
        view["num_hidden_layers"] = cfg["draft_num_hidden_layers"]
        notes.append(f"draft_num_hidden_layers={cfg['draft_num_hidden_layers']} is the drafter's layer count")
    reading = read_flat(
        FlatRules(
            NAME,
            nested_convention="layer-output",
            top_convention="boundary",
            prefix_renames=[("midlayer.", "layers.0.")],
            flag_defaults={"norm_before_residual": False, "norm_output": False},
        ),
        view,
        ckpt,
        opts,
    )
    reading.spec.architectures = ["Eagle3Qwen3ForCausalLM"]
    renamed = "architecture Qwen3Eagle3Model (DeepSpec) written as Eagle3Qwen3ForCausalLM, the name vLLM registers"
    reading.decisions[:0] = [*notes, renamed]
    return reading
