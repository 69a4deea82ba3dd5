"""One module per on-disk dialect: `detect`, `read` (and `write_config` for the output formats)."""

from __future__ import annotations

from ...errors import Ambiguous, UsageError
from . import (
    deepspec_dspark,
    deepspec_eagle3,
    eagle31,
    foreign,
    modelopt,
    nemo,
    peagle,
    safeai,
    specforge,
    speculators,
    speculators_dflash,
    speculators_dspark,
    torchspec,
    zlab_dflash,
)
from .base import NAME_THE_DIALECT, FlatRules, read_flat

# Order matters only for error messages; detection must be unambiguous.
DIALECTS = {m.NAME: m for m in (eagle31, speculators, torchspec, modelopt, nemo, specforge, safeai)}
# Each dialect's reader, by its name (names.DIALECTS). These first: the families beside EAGLE-3
# (docs/formats.md#families) and DeepSpec's EAGLE-3, whose dialect wins over an EAGLE-3 one that also matches (a
# native P-EAGLE config is also a complete EAGLE 3.1 config).
PREFERRED_DIALECTS = {
    m.NAME: m
    for m in (
        peagle,
        peagle.Speculators,
        zlab_dflash,
        speculators_dflash,
        deepspec_dspark,
        speculators_dspark,
        deepspec_eagle3,
    )
}
DIALECTS.update(PREFERRED_DIALECTS)
WRITERS = ("eagle31", "speculators", "native")


def detect(cfg: dict, names: set[str], metadata: dict) -> str:
    foreign.refuse(cfg, names)
    families = [name for name, mod in PREFERRED_DIALECTS.items() if mod.detect(cfg, names, metadata)]
    if len(families) == 1:
        return families[0]
    matches = [name for name, mod in DIALECTS.items() if mod.detect(cfg, names, metadata)]
    for schema in WRITERS:  # a full schema wins over provenance markers carried through (e.g. torchspec_version)
        if schema in matches:
            return schema
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UsageError(
            f"unknown dialect: the config and tensor names match none of {', '.join(DIALECTS)}", hint=NAME_THE_DIALECT
        )
    raise Ambiguous(  # doctor reads each and measures them (doctor/ambiguity.py)
        f"ambiguous dialect: matches {', '.join(matches)}",
        hint=NAME_THE_DIALECT,
        code=None,
        fact="dialect",
        values=tuple(matches),
    )


def detect_config(cfg: dict) -> str | None:
    """The dialect a config alone shows (a trainer's template, a config quoted without its weights), or None
    when only the tensor names could tell. The config rules of `detect`, with what the names decide left out:
    an EAGLE-3 architecture of SpecForge's is SpecForge, a plain Llama config with a draft vocabulary SafeAILab."""
    none: set[str] = set()
    foreign.refuse(cfg, none)
    for name, mod in PREFERRED_DIALECTS.items():
        if mod.detect(cfg, none, {}):
            return name
    for name in ("speculators", "eagle31", "torchspec", "modelopt"):
        if DIALECTS[name].detect(cfg, none, {}):
            return name
    archs = cfg.get("architectures") or []
    if "LlamaForCausalLMEagle3" in archs:
        return "specforge"
    if archs == ["LlamaForCausalLM"] and "draft_vocab_size" in cfg:
        return "safeai"
    return None


def looks_like_drafter(cfg: dict) -> bool:
    """Any EAGLE marker at all: a draft vocabulary, EAGLE keys, or an EAGLE architecture."""
    keys = (
        "draft_vocab_size",
        "eagle_config",
        "eagle_aux_hidden_state_layer_ids",
        "speculators_config",
        "dflash_config",
        "speculators_model_type",
        "dspark_target_layer_ids",
        "pard_token",
    )
    archs = " ".join(map(str, cfg.get("architectures") or []))
    return any(k in cfg for k in keys) or any(w in archs for w in ("Eagle", "DFlash", "DSpark", "Peagle", "PEagle"))


def read_undetermined(cfg: dict, ckpt, opts):
    """A config no dialect claims: the flat reading every dialect shares, with no convention documented."""
    return read_flat(
        FlatRules(
            None,
            nested_convention=None,
            top_convention=None,
            prefix_renames=[],
            flag_defaults={"norm_before_residual": False, "norm_output": False},
        ),
        cfg,
        ckpt,
        opts,
    )


def get(name: str):
    if name not in DIALECTS:
        raise UsageError(f"unknown dialect {name!r}", hint=f"choose one of {', '.join(DIALECTS)}")
    return DIALECTS[name]
