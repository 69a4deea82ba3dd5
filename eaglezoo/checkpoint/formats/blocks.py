"""What the block families' dialects share (DFlash, DSpark; docs/formats.md#families): the spec from the family
keys, the decoder config and the aux ids (through `aux_ids`), and strict accounting of the tensors, whose names
are the same in every form (the z-lab, DeepSpec and speculators bodies load into the same module:
speculators convert/dflash/converter.py:6-7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import BadInput
from ..problems import Finding, error
from ..spec import AuxLayers, DrafterSpec, Family, FamilyFields
from ..tensors import Checkpoint
from .aux_ids import AuxKey
from .base import NAME_THE_DIALECT, Decisions, Reading, arch_of, parse_ids, require_int

FIELD_KEYS = (
    "block_size",
    "mask_token_id",
    "sample_from_anchor",
    "sliding_window_non_causal",
    "num_target_layers",
    "markov_rank",
    "markov_head_type",
    "enable_confidence_head",
    "confidence_head_with_markov",
)
BORROWED = ("embed_tokens.weight", "lm_head.weight", "verifier_norm.weight")
BODY_PREFIXES = ("layers.", "fc.", "hidden_norm.", "norm.")
DSPARK_HEADS = ("markov_head.", "confidence_head.")


def check_field_types(fields: dict[str, Any], where: str) -> None:
    for key in ("block_size", "num_target_layers", "markov_rank"):
        v = fields.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < (0 if key == "markov_rank" else 1)):
            raise BadInput(
                f"{where}: {key} must be a positive integer, found {v!r}",
                code="family-field",
                hint=f"fix {key} in config.json",
            )
    v = fields.get("mask_token_id")
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
        raise BadInput(
            f"{where}: mask_token_id must be a token id (an integer >= 0), found {v!r}",
            code="family-field",
            hint="fix mask_token_id in config.json",
        )
    for key in (
        "sample_from_anchor",
        "sliding_window_non_causal",
        "enable_confidence_head",
        "confidence_head_with_markov",
    ):
        v = fields.get(key)
        if v is not None and not isinstance(v, bool):
            raise BadInput(
                f"{where}: {key} must be true or false, found {v!r}",
                code="family-field",
                hint=f"write true or false for {key} in config.json",
            )


def check_mask_token(mask: int | None, vocab: int, where: str) -> None:
    """The parallel families' mask token (DFlash, DSpark, P-EAGLE): a row of the vocabulary the drafter embeds, or
    the mask slots hold a token no embedding has (vLLM would index past the table)."""
    if mask is not None and mask >= vocab:
        raise BadInput(
            f"{where}: mask_token_id {mask} is outside the vocabulary (0..{vocab - 1})",
            hint="use the mask token the drafter was trained with",
            code="mask-token-range",
        )


@dataclass(frozen=True)
class BlockDialect:
    """A block dialect's own terms: its name, the family it reads, the key its aux ids sit under, and the
    architectures the drafter is recorded with."""

    name: str
    family: Family
    key: AuxKey
    architectures: list[str]
    alternates: tuple[AuxKey, ...] = ()  # where the ids may sit instead, read where `key` holds none


@dataclass(frozen=True)
class BlockFields:
    """What a block dialect found in its config: `fields` the family keys (None where unstated), `extra` the family
    keys this dialect keeps that eaglezoo carries unread, the draft vocabulary and target hidden size (None: the
    drafter's own vocabulary and hidden size)."""

    fields: dict[str, Any]
    extra: dict[str, Any]
    draft_vocab: int | None = None
    target_hidden: int | None = None


def read_block(
    dialect: BlockDialect, found: BlockFields, cfg: dict, layer_cfg: dict, ckpt: Checkpoint, d: Decisions
) -> Reading:
    """A block-family drafter of `dialect`, from what it `found` in `cfg` (the decoder keys in `layer_cfg`)."""
    family, key, fields, architectures = dialect.family, dialect.key, found.fields, dialect.architectures
    check_field_types(fields, "config.json")
    hidden = require_int(layer_cfg, "hidden_size")
    vocab = require_int(layer_cfg, "vocab_size")
    check_mask_token(fields.get("mask_token_id"), vocab, "config.json")
    require_int(layer_cfg, "num_attention_heads")
    key = next((k for k in (key, *dialect.alternates) if k.get(cfg) is not None), key)
    ids_value = key.get(cfg)
    if ids_value is None:
        raise BadInput(
            f"config.json: {key.name} is absent; a {family} drafter needs the target layers it reads",
            hint="write the ids the drafter was trained on into config.json",
            code="aux-ids-missing",
        )
    ids = parse_ids(ids_value, key.name)
    aux = AuxLayers(ids=tuple(ids), convention=key.convention)
    d.decide(f"aux ids {ids} from {key.name} ({key.convention} convention) = boundary {aux.boundary()}")
    draft_vocab = found.draft_vocab or vocab
    if not isinstance(draft_vocab, int) or draft_vocab <= 0 or draft_vocab > vocab:
        raise BadInput(
            f"config.json: draft_vocab_size must be an integer in 1..vocab_size ({vocab}), found {draft_vocab!r}",
            hint="fix draft_vocab_size in config.json",
        )
    renames, drops = account(ckpt, family)
    spec = DrafterSpec(
        arch=arch_of({**layer_cfg, "architectures": architectures}),
        architectures=architectures,
        num_layers=require_int(layer_cfg, "num_hidden_layers"),
        hidden_size=hidden,
        target_hidden_size=found.target_hidden or hidden,
        vocab_size=vocab,
        draft_vocab_size=draft_vocab,
        num_aux=len(ids),
        aux=aux,
        dtype=cfg.get("torch_dtype") or cfg.get("dtype") or layer_cfg.get("torch_dtype") or layer_cfg.get("dtype"),
        family=family,
        family_fields=FamilyFields(**fields, extra=found.extra),
        layer_config=dict(layer_cfg),
    )
    return Reading(dialect.name, spec, renames, drops, d.decisions, d.warnings)


def account(ckpt: Checkpoint, family: Family) -> tuple[dict[str, str], dict[str, str]]:
    """Every tensor mapped under its own name; one the family does not know is refused by name."""
    known = BODY_PREFIXES + (DSPARK_HEADS if family == "dspark" else ())
    unknown = [n for n in ckpt.refs if not n.startswith(known) and n not in BORROWED and n not in ("d2t", "t2d")]
    if unknown:
        raise BadInput(
            f"{len(unknown)} tensor(s) a {family} drafter does not have: {', '.join(sorted(unknown)[:5])}",
            hint=f"if the dialect was misdetected, {NAME_THE_DIALECT}",
            code="unexpected",
        )
    return {n: n for n in ckpt.refs}, {}


def split_fields(source: dict, keys=FIELD_KEYS) -> dict[str, Any]:
    return {k: source.get(k) for k in keys}


def ids_for(spec: DrafterSpec, key: AuxKey) -> list[int]:
    assert spec.aux is not None
    return key.from_boundary(spec.aux.boundary())


CARRIED = "eaglezoo_carried"  # keys of the other form, kept so that the way back is the same file


def carried_in(cfg: dict, interpreted: set[str], d: Decisions) -> dict[str, Any]:
    """The top-level keys no reader of this form interprets, plus those a conversion carried here before."""
    extra = {k: v for k, v in cfg.items() if k not in interpreted and k != CARRIED}
    inner = cfg.get(CARRIED)
    if isinstance(inner, dict):
        extra.update(inner)
        d.decide(f"{CARRIED}: {sorted(inner)} carried from the other form")
    return extra


def place_extra(out: dict, extra: dict[str, Any], own: set[str], decisions: list[str]) -> dict:
    """`extra` keys this form owns at the top level; the others kept under `eaglezoo_carried`."""
    carried = {}
    for k, v in extra.items():
        if k in own:
            out[k] = v
        else:
            carried[k] = v
    if carried:
        out[CARRIED] = carried
        decisions.append(
            f"{sorted(carried)}: no place in this form; kept under {CARRIED} (engines ignore it) "
            "so that converting back gives the same config"
        )
    return out


def stated(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def anchor_sampled(spec: DrafterSpec, dialect: str | None) -> bool:
    """Whether vLLM samples the block's anchor position too: as stated, else its default, false for the
    speculators forms (transformers_utils/configs/speculators/algos.py:116,182) and for z-lab DFlash; DeepSpec's
    dense DSpark is drafted anchor-first, which is why vLLM's default K for it is the whole block
    (config/speculative.py:1481-1488)."""
    f = spec.family_fields
    if f is not None and f.sample_from_anchor is not None:
        return f.sample_from_anchor
    return dialect == "dspark"


def max_k(spec: DrafterSpec, dialect: str | None) -> int | None:
    """The most tokens one block drafts: block_size, less the anchor when the anchor is only the bonus token."""
    f = spec.family_fields
    if f is None or f.block_size is None:
        return None
    return f.block_size if anchor_sampled(spec, dialect) else f.block_size - 1


def proposed_ks(config: dict) -> list[int]:
    """The K a speculators config proposes itself: every `speculators_config.proposal_methods[].speculative_tokens`
    (vLLM PR #44566 defaults K from it), integers only; [] where the config proposes none."""
    envelope = config.get("speculators_config")
    methods = envelope.get("proposal_methods") if isinstance(envelope, dict) else None
    tokens = [m.get("speculative_tokens") for m in methods if isinstance(m, dict)] if isinstance(methods, list) else []
    return [k for k in tokens if isinstance(k, int) and not isinstance(k, bool)]


def proposal_bound(spec: DrafterSpec, dialect: str | None) -> int | None:
    """The most a config may propose: `max_k`, or, where sample_from_anchor is unstated (the tools read it
    differently, lint's anchor-layout), the whole block: a K beyond it is beyond the block under every reading."""
    f = spec.family_fields
    if f is None or f.block_size is None:
        return None
    return f.block_size if f.sample_from_anchor is None else max_k(spec, dialect)


def proposed_k_findings(spec: DrafterSpec, dialect: str | None, config: dict) -> list[Finding]:
    """The K the config proposes, held to the block like a `-k` (check_block_k): past `proposal_bound` the drafter
    proposes tokens its block never drafted, and acceptance collapses (1.31 at K=7 against 2.74 at K=5, block_size
    5)."""
    most = proposal_bound(spec, dialect)
    block = spec.family_fields.block_size if spec.family_fields else None
    return [
        error(
            "config-k-beyond-block",
            f"speculators_config proposes speculative_tokens {k}, beyond the {spec.family} drafter's block: "
            f"block_size {block} drafts at most {most} tokens a step (vLLM PR #41834)",
            f"set speculative_tokens to {most} or less in config.json",
        )
        for k in proposed_ks(config)
        if most is not None and k > most
    ]
