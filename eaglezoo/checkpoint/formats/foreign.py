"""Speculative decoders eaglezoo detects but does not read as drafters (docs/formats.md#families): MTP heads and
DSpark heads shipped inside a target checkpoint, and PARD (an ordinary small causal LM drafting in parallel).
Each is one line naming what they are and what eaglezoo can do instead."""

from __future__ import annotations

from ...errors import UsageError


def what(cfg: dict, names: set[str]) -> tuple[str, str] | None:
    """(what the folder is, what eaglezoo can do instead), or None for a drafter of a family eaglezoo reads."""
    if cfg.get("dspark_target_layer_ids") is not None or cfg.get("dspark_block_size") is not None:
        kind = (
            "DSpark heads inside a DeepSeek-V4 target (dspark_* keys, tensors under mtp.*; vLLM "
            "config/speculative.py:1432-1454 reuses the target's config)"
        )
        instead = (
            'serve the target with `vllm serve TARGET --speculative-config \'{"method": "dspark"}\'`; '
            "eaglezoo serve-config and lint read standalone DSpark drafters"
        )
        return kind, instead
    if cfg.get("speculators_model_type") == "mtp" or (cfg.get("num_nextn_predict_layers") and not _is_drafter(cfg)):
        kind = "an MTP head (it drafts from the target's last hidden state and embedding, not from aux layers)"
        return (
            kind,
            "serve it with the engine's own `mtp` method; eaglezoo reads EAGLE-3, P-EAGLE, DFlash and DSpark drafters",
        )
    if "pard_token" in cfg:
        kind = (
            "a PARD drafter (a small causal LM drafting in parallel: vLLM method draft_model with "
            "parallel_drafting, v1/spec_decode/llm_base_proposer.py:370-371)"
        )
        instead = (
            "serve it with vLLM `method: draft_model` and `parallel_drafting: true`; eaglezoo reads EAGLE-3, "
            "P-EAGLE, DFlash and DSpark drafters"
        )
        return kind, instead
    return None


def _is_drafter(cfg: dict) -> bool:
    return any(k in cfg for k in ("eagle_aux_hidden_state_layer_ids", "dflash_config", "draft_vocab_size"))


def refuse(cfg: dict, names: set[str]) -> None:
    found = what(cfg, names)
    if found:
        kind, instead = found
        raise UsageError(f"this is {kind}, not a drafter eaglezoo reads", hint=instead, code="family-unsupported")
