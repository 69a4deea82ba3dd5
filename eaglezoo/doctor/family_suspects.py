"""The hypotheses of the parallel families (P-EAGLE served as `eagle3` with `parallel_drafting`, DFlash as
`dflash`), beside the aux ids, flags and weights every family shares (`suspects.py`): each a suspect with its fix
and the drafter as served with that fix alone, which the native trial tries.

vLLM 0.32 reads the mask token from `dflash_config.mask_token_id`, else the top-level `mask_token_id`, else
`pard_token` (`v1/spec_decode/llm_base_proposer.py:360-380`): every mask slot of a round takes that token's
embedding, so a mask token other than the one trained on feeds every drafted position but the first another input.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from ..checkpoint.formats.aux_ids import Capture
from ..checkpoint.read import Drafter
from ..verify.dflash import samples_anchor
from .suspects import Suspect, as_named, as_served
from .trials import Variant

FAMILIES = ("peagle", "dflash")
ANCHOR_CAUSE = "anchor-layout-served"
VLLM_ANCHOR = (
    "vLLM 0.32 lays a DFlash block out as [bonus, mask x K] and samples the masks only "
    "(v1/spec_decode/utils.py:731-742)"
)
# What a drafter may borrow from the target it is served with: vLLM shares the target's embedding and lm_head with a
# drafter that has none, and keeps a drafter's own where it differs from the target's
# (v1/spec_decode/llm_base_proposer.py:1416-1530, `_maybe_share_embeddings`, `_maybe_share_lm_head`). P-EAGLE's
# lm_head is its own (draft vocabulary), DFlash's is the target's unless it ships one.
BORROWED = {"peagle": ("embed_tokens.weight",), "dflash": ("embed_tokens.weight", "lm_head.weight")}


def family_suspects(served: Drafter, named: Drafter, capture: Capture | None, named_as: str | None) -> list[Suspect]:
    """`suspects.suspects`' arguments: the family's own hypotheses (none for EAGLE-3)."""
    if named.spec.family not in FAMILIES or served.spec.family != named.spec.family:
        return []
    base, ref = as_served(served, capture), as_named(named)
    folder = shlex.quote(str(served.path))
    convert = f"eaglezoo convert {shlex.quote(named_as or str(named.path))} OUT"
    found = (_mask_token(base, ref, folder, convert), _borrowed(base, ref, folder, convert), _anchor(base, ref))
    return [s for s in found if s is not None]


def _anchor(base: Variant, ref: Variant) -> Suspect | None:
    """A DFlash drafter trained sampling its anchor (`sample_from_anchor`: the anchor's slot predicts the token after
    the bonus, and the block holds K-1 masks), which vLLM 0.32 runs with the anchor as the bonus token and K masks
    (`verify.dflash.as_vllm_runs`): every draft is read one slot off the one it was trained at."""
    if ref.spec.family != "dflash" or not samples_anchor(ref.spec) or samples_anchor(base.spec):
        return None
    fields = base.spec.family_fields
    assert fields is not None
    sampled = fields.model_copy(update={"sample_from_anchor": True})
    return Suspect(
        ANCHOR_CAUSE,
        "engine-config",
        "the drafter was trained sampling its anchor (sample_from_anchor true: K drafts from the anchor and K-1 "
        f"masks); {VLLM_ANCHOR}, so every draft is read one slot off the one it was trained at",
        "no vLLM 0.32 setting samples a DFlash anchor: serve this drafter where it is (llama.cpp reads "
        "dflash.sample_from_anchor, common/speculative.cpp:1046-1047), or one trained with the anchor as the bonus",
        replace(base, source=f"fix: {ANCHOR_CAUSE}", spec=base.spec.model_copy(update={"family_fields": sampled})),
    )


def anchor_notes(served: Drafter, named: Drafter) -> list[str]:
    """A served DFlash config stating a sampled anchor where the drafter named was trained with the anchor as the
    bonus token: vLLM 0.32's V1 runner ignores the key (the server runs the trained layout), its V2 runner refuses to
    start with it. Said, not judged: this server is not slowed by it."""
    if named.spec.family != "dflash" or not samples_anchor(served.spec) or samples_anchor(named.spec):
        return []
    folder = shlex.quote(str(served.path))
    return [
        f"the served config states sample_from_anchor true; the drafter was trained with the anchor as the bonus "
        f"token: vLLM's V1 runner ignores it ({VLLM_ANCHOR}) and runs the trained layout, the V2 runner refuses to "
        f"start with it (v1/worker/gpu/spec_decode/dflash/speculator.py:80-85): remove sample_from_anchor from "
        f"{folder}/config.json ({ANCHOR_CAUSE})"
    ]


def _mask_token(base: Variant, ref: Variant, folder: str, convert: str) -> Suspect | None:
    served, trained = base.spec.family_fields, ref.spec.family_fields
    if served is None or trained is None or trained.mask_token_id is None:
        return None
    if served.mask_token_id == trained.mask_token_id:
        return None
    key = "dflash_config.mask_token_id" if base.spec.family == "dflash" else "mask_token_id"
    what = (
        f"vLLM drafts with mask token {served.mask_token_id} (from {key}); the drafter was trained on mask token "
        f"{trained.mask_token_id}: every mask slot of a round reads another input"
    )
    fields = served.model_copy(update={"mask_token_id": trained.mask_token_id})
    return Suspect(
        "mask-token-differ",
        "engine-config",
        what,
        f"set {key} to {trained.mask_token_id} in {folder}/config.json, or serve OUT after `{convert}`",
        replace(base, source="fix: mask-token-differ", spec=base.spec.model_copy(update={"family_fields": fields})),
    )


def _borrowed(base: Variant, ref: Variant, folder: str, convert: str) -> Suspect | None:
    """The served folder ships a tensor the drafter named borrows from its target: vLLM then runs the folder's copy
    (another target's, unless it equals the served one's) where the drafter was trained on the target's."""
    extra = [n for n in BORROWED[ref.spec.family] if n in base.state and n not in ref.state]
    if not extra:
        return None
    names = " and ".join(n.removesuffix(".weight") for n in extra)
    what = (
        f"the served folder ships its own {names}, which vLLM keeps where it differs from the served target's; the "
        "drafter was trained borrowing the target's"
    )
    return Suspect(
        "borrowed-not-target",
        "drafter",
        what,
        f"remove {names} from the weights in {folder} (vLLM then shares the served target's), or serve OUT after "
        f"`{convert}`",
        replace(
            base,
            source="fix: borrowed-not-target",
            state={n: t for n, t in base.state.items() if n not in extra},
        ),
    )
