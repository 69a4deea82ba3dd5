"""The canonical description of an EAGLE-3 / EAGLE 3.1 drafter, whatever dialect it came in.

Every reader produces a `DrafterSpec`; every writer, lint check and the runnable drafter consume one.
Aux-layer ids never travel without their convention (docs/formats.md#aux-layer-conventions):

* ``boundary``      id i = the residual stream after i target layers (HF ``hidden_states[i]``; vLLM).
* ``layer-output``  id i = the output of layer i (0-based) = boundary i+1 (SGLang, ModelOpt, TRT-LLM).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Convention = Literal["boundary", "layer-output"]
CONVENTIONS: tuple[str, ...] = ("boundary", "layer-output")
# eagle3: one token a step; peagle: EAGLE-3 weights drafting K tokens in parallel with a mask token; dflash:
# a block of mask tokens drafted at once (non-causal); dspark: dflash plus Markov and confidence heads
# (docs/formats.md#families).
Family = Literal["eagle3", "peagle", "dflash", "dspark"]
FAMILIES: tuple[str, ...] = ("eagle3", "peagle", "dflash", "dspark")


class FamilyFields(BaseModel):
    """The keys of the parallel families, as stated (None: the file does not state it; each engine then applies
    its own default, which lint compares)."""

    model_config = ConfigDict(frozen=True)

    block_size: int | None = None
    mask_token_id: int | None = None
    sample_from_anchor: bool | None = None
    sliding_window_non_causal: bool | None = None
    num_target_layers: int | None = None
    markov_rank: int | None = None
    markov_head_type: str | None = None
    enable_confidence_head: bool | None = None
    confidence_head_with_markov: bool | None = None
    # family keys eaglezoo does not interpret, by the name they had, carried to the other form unchanged
    extra: dict[str, Any] = {}

    def stated(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None and k != "extra"}


class AuxLayers(BaseModel):
    model_config = ConfigDict(frozen=True)

    ids: tuple[int, ...]
    convention: Convention

    def boundary(self) -> list[int]:
        return list(self.ids) if self.convention == "boundary" else [i + 1 for i in self.ids]

    def layer_output(self) -> list[int]:
        return list(self.ids) if self.convention == "layer-output" else [i - 1 for i in self.ids]


def default_boundary_ids(num_target_layers: int) -> list[int]:
    """The documented default capture, identical in every stack once conventions are aligned:
    vLLM boundary (2, L//2, L-3) = ModelOpt/SGLang layer-output (1, L//2-1, L-4)
    (docs/formats.md#aux-layer-conventions)."""
    n = num_target_layers
    return [2, n // 2, n - 3]


class DrafterSpec(BaseModel):
    """Geometry, vocabulary, aux layers and the four norm flags of one drafter."""

    arch: Literal["llama", "qwen3", "mla"]
    architectures: list[str]
    num_layers: int
    hidden_size: int
    target_hidden_size: int
    vocab_size: int
    draft_vocab_size: int
    num_aux: int
    aux: AuxLayers | None
    fc_norm: bool = False
    norm_output: bool = False
    norm_before_fc: bool = False
    norm_before_residual: bool = False
    dtype: str | None = None
    family: Family = "eagle3"
    family_fields: FamilyFields | None = None  # peagle, dflash, dspark
    # Decoder hyper-parameters and any other config key carried through unchanged
    # (head counts, head_dim, rope, eps, context length, MLA ranks, token ids, ...).
    layer_config: dict[str, Any] = {}

    @property
    def head_dim(self) -> int:
        hd = self.layer_config.get("head_dim")
        return int(hd) if hd else self.hidden_size // int(self.layer_config["num_attention_heads"])

    @property
    def has_vocab_map(self) -> bool:
        return self.draft_vocab_size != self.vocab_size

    @property
    def max_position_embeddings(self) -> int | None:
        return self.layer_config.get("max_position_embeddings")

    def flags(self) -> dict[str, bool]:
        return {
            "fc_norm": self.fc_norm,
            "norm_output": self.norm_output,
            "norm_before_fc": self.norm_before_fc,
            "norm_before_residual": self.norm_before_residual,
        }

    @property
    def eagle_version(self) -> str:
        if self.fc_norm and self.norm_output:
            return "3.1"
        if self.fc_norm or self.norm_output or self.norm_before_fc:
            return "3.1-variant"
        return "3"


def effective_rope(cfg: dict) -> dict:
    """RoPE settings as the model computes them, whether written as rope_theta/rope_scaling
    (transformers 4) or rope_parameters (transformers 5); a missing theta means 10000
    (docs/formats.md#rope-theta-default)."""
    scaling = dict(cfg.get("rope_scaling") or {})
    if "type" in scaling:
        scaling["rope_type"] = scaling.pop("type")
    params = {**scaling, **(cfg.get("rope_parameters") or {})}
    params["rope_theta"] = float(params.get("rope_theta") or cfg.get("rope_theta") or 10000.0)
    if params.get("rope_type", "default") == "default":
        params.pop("rope_type", None)
    return params
