"""vllm-project/speculators format (docs/formats.md#speculators): decoder keys in `transformer_layer_config`,
EAGLE keys at the top level (ids in the boundary convention), `speculators_config` for vLLM."""

from __future__ import annotations

from ...errors import Ambiguous, BadInput, UsageError
from ..spec import DrafterSpec
from ..tensors import Checkpoint
from .base import NAME_THE_DIALECT, FlatRules, Reading, ReadOptions, read_flat, trivial_vocab_map_drop

NAME = "speculators"

ARCH_OF_MODEL_TYPE = {"llama": "LlamaForCausalLMEagle3", "qwen3": "Eagle3Qwen3ForCausalLM"}
TRAINING_ONLY = "speculators training-only verifier copy (excluded from speculators' own saves)"


def detect(cfg: dict, names: set[str], metadata: dict) -> bool:
    # the other speculators model types are dialects of their own (peagle, dflash, dspark)
    return ("speculators_config" in cfg or "speculators_model_type" in cfg) and cfg.get(
        "speculators_model_type", "eagle3"
    ) == "eagle3"


def read(cfg: dict, ckpt: Checkpoint, opts: ReadOptions) -> Reading:
    layer_cfg = cfg.get("transformer_layer_config")
    if not isinstance(layer_cfg, dict):
        raise BadInput(
            "config.json: speculators format without a transformer_layer_config object",
            hint=f"fix config.json; if the dialect was misdetected, {NAME_THE_DIALECT}",
        )
    if "norm_before_residual" not in cfg and "norm_before_residual" not in opts.flags:
        raise Ambiguous(  # vLLM: transformers_utils/configs/speculators/algos.py:33-35 (absent: true)
            "norm_before_residual is absent: speculators reads that as false, vLLM's speculators path "
            "as true (see docs/formats.md#residual-norm-default)",
            hint="state the trained behaviour with --flag norm_before_residual=true|false",
            code=None,  # lint refuses it in one line, as before: no reading past it holds
            fact="norm_before_residual",
            values=(True, False),
        )
    vocab = layer_cfg.get("vocab_size")
    reading = read_flat(
        FlatRules(NAME, nested_convention=None, top_convention="boundary", prefix_renames=[]),
        cfg,
        ckpt,
        opts,
        layer_cfg=layer_cfg,
        extra_drops=lambda n: (
            TRAINING_ONLY
            if n.startswith(("verifier_lm_head.", "verifier_norm."))
            else trivial_vocab_map_drop(ckpt, cfg.get("draft_vocab_size"), vocab)(n)
        ),
    )
    model_type = layer_cfg.get("model_type", "llama")
    if model_type not in ARCH_OF_MODEL_TYPE:
        reading.warnings.append(
            f"transformer_layer_config.model_type {model_type!r}: vLLM serves only llama and qwen3 "
            "in the speculators format"
        )
    reading.spec.architectures = [ARCH_OF_MODEL_TYPE.get(model_type, "LlamaForCausalLMEagle3")]
    if cfg.get("speculators_config"):
        reading.decisions.append("speculators_config is format metadata: regenerated, not carried, on output")
    return reading


def write_config(
    spec: DrafterSpec, dtype: str | None, verifier: str | None, num_spec_tokens: int = 3
) -> tuple[dict, list[str]]:
    """Returns (config, warnings)."""
    warnings = []
    if spec.arch == "mla":
        raise UsageError(
            "the speculators format holds llama and qwen3 drafters only (vLLM raises on other "
            "model_type); write MLA drafters with --to eagle31",
            hint="convert with --to eagle31 instead",
        )
    if spec.aux is None:
        raise UsageError(
            "cannot write the speculators format without aux-layer ids",
            hint="give them: --aux-layers 2,3,4 --aux-convention boundary (or --target DIR for the documented default)",
        )
    if spec.num_aux != 3:
        warnings.append(
            f"k={spec.num_aux} aux states: vLLM's speculators path sizes fc for 3 unless "
            "num_aux_hidden_states is set, which it does not carry; serve --to eagle31 instead"
        )
    layer = {k: v for k, v in spec.layer_config.items() if k != "eagle_config"}
    layer.setdefault("model_type", spec.arch)
    layer.update(
        {
            "hidden_size": spec.hidden_size,
            "num_hidden_layers": spec.num_layers,
            "vocab_size": spec.vocab_size,
            "tie_word_embeddings": False,
        }
    )
    if dtype:
        layer["torch_dtype"] = dtype
    if spec.layer_config.get("eagle_config"):
        warnings.append(
            "eagle_config keys other than the ids have no place in the speculators format: "
            f"{sorted(spec.layer_config['eagle_config'])} not written"
        )
    if verifier is None:
        warnings.append(
            "speculators_config.verifier.name_or_path is null: pass --verifier REPO so that "
            "`vllm serve <drafter>` can find the target"
        )
    cfg = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "transformer_layer_config": layer,
        "draft_vocab_size": spec.draft_vocab_size,
        "target_hidden_size": spec.target_hidden_size if spec.target_hidden_size != spec.hidden_size else None,
        "eagle_aux_hidden_state_layer_ids": spec.aux.boundary(),
        **spec.flags(),
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [
                {
                    "proposal_type": "greedy",
                    "speculative_tokens": num_spec_tokens,
                    "verifier_accept_k": 1,
                    "accept_tolerance": 0.0,
                }
            ],
            "verifier": {"name_or_path": verifier, "architectures": []},
        },
        "tie_word_embeddings": False,
    }
    if dtype:
        cfg["torch_dtype"] = dtype
    return cfg, warnings
