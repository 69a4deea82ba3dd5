"""What the served files make the engine do, against what the drafter was trained for: each difference is a
suspect with its fix, and, where the native reference can try the fix, the drafter as served with that fix
alone. vLLM's reading is the one in its `llama_eagle3.py` (0.32): the aux ids as each model runner reads them
(`checkpoint.formats.aux_ids.vllm_captures`: the top-level `eagle_aux_hidden_state_layer_ids`, eagle_config's on
the V1 runner, else its default; each layer once, in ascending order); `fc_norm`, `norm_output`, `norm_before_fc`,
`norm_before_residual` false when absent; a `d2t` missing from the weights leaves its zero-initialised map (every
draft id read as itself)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

import torch

from ..checkpoint.formats.aux_ids import Capture
from ..checkpoint.read import Drafter
from ..verify.dflash import as_vllm_runs
from .report import Verdict
from .trials import Variant

VOCAB_MAPS = ("d2t", "t2d")
NORMS_31 = ("fc_norm", "norm_output")


@dataclass(frozen=True)
class Suspect:
    cause: str
    verdict: Verdict
    what: str
    fix: str
    fixed: Variant | None = None  # the drafter as served with this fix alone, where a native trial can try it
    fails: bool = False  # vLLM cannot run the folder so: it fails on the first request that drafts


def as_served(served: Drafter, capture: Capture | None) -> Variant:
    """The served folder as vLLM runs it (a DFlash anchor always the bonus token: `verify.dflash.as_vllm_runs`), on
    the layers it captures (those the config holds where vLLM cannot say: its depth unknown)."""
    spec, state = as_vllm_runs(served.spec), served.state()
    if spec.has_vocab_map:
        state.setdefault("d2t", torch.zeros(spec.draft_vocab_size, dtype=torch.long))
        state.setdefault("t2d", torch.zeros(spec.vocab_size, dtype=torch.bool))
    boundary = capture.layers if capture else (spec.aux.boundary() if spec.aux else [])
    return Variant("as served", spec, state, tuple(boundary))


def as_named(named: Drafter) -> Variant:
    return Variant("reference", named.spec, named.state(), tuple(named.spec.aux.boundary()))


def suspects(served: Drafter, named: Drafter, capture: Capture | None, named_as: str | None = None) -> list[Suspect]:
    """`capture`: what vLLM captures for the served folder (one model runner's reading). `named_as`: the drafter as
    the user named it (a registry id keeps the entry's facts in a convert command)."""
    base, ref = as_served(served, capture), as_named(named)
    folder = shlex.quote(str(served.path))
    convert = f"eaglezoo convert {shlex.quote(named_as or str(named.path))} OUT"
    return [
        s
        for s in (
            _aux(capture, base, ref, folder, convert),
            _flags(base, ref, folder, convert),
            _vocab_map(base, ref, convert),
        )
        if s is not None
    ] + _weights(base, ref, convert)


def _fixed(base: Variant, cause: str, **changes) -> Variant:
    return replace(base, source=f"fix: {cause}", **changes)


def _aux(capture: Capture | None, base: Variant, ref: Variant, folder: str, convert: str) -> Suspect | None:
    captured, trained = list(base.boundary), list(ref.boundary)
    if capture is None or (captured == trained and capture.fits):
        return None
    key = f'"eagle_aux_hidden_state_layer_ids": {trained}'
    if capture.key is None:
        cause = "aux-ids-default"
        what = (
            f"the served config holds no aux ids where vLLM reads them, so {capture.said()}; the drafter was "
            f"trained on boundary {trained}"
        )
    elif list(capture.read) in ([t - 1 for t in trained], [t + 1 for t in trained]):
        cause = "aux-ids-convention"
        what = (
            f"{capture.said()}, as boundary ids: they are the trained layers {trained} written in the other "
            "convention (layer output vs boundary)"
        )
    else:
        cause = "aux-ids-other"
        what = f"{capture.said()}; the drafter was trained on boundary {trained}"
    if not capture.fits:
        what += (
            f". That is {len(capture.captured)} aux states where the drafter's fc takes {capture.states}"
            + (f" (the target has {capture.target_layers} layers)" if capture.captured != capture.layers else "")
            + ": vLLM "
            "fails on the first request that drafts"
        )
    fix = (
        f"set {key} at the top level of {folder}/config.json (boundary convention), or serve OUT after "
        f"`{convert}`, which writes it"
    )
    return Suspect(cause, "engine-config", what, fix, _fixed(base, cause, boundary=ref.boundary), not capture.fits)


def _flags(base: Variant, ref: Variant, folder: str, convert: str) -> Suspect | None:
    theirs, ours = base.spec.flags(), ref.spec.flags()
    differ = {flag: value for flag, value in ours.items() if theirs[flag] != value}
    if not differ:
        return None
    dropped = all(value for value in differ.values()) and set(differ) <= set(NORMS_31)
    cause = "norm-flags-dropped" if dropped else "norm-flags-differ"
    served = ", ".join(f"{flag}={str(theirs[flag]).lower()}" for flag in differ)
    trained = ", ".join(f'"{flag}": {str(value).lower()}' for flag, value in differ.items())
    wanted = ", ".join(f"{flag}={str(value).lower()}" for flag, value in differ.items())
    what = f"vLLM runs the drafter with {served} (absent keys read as false); it was trained with {wanted}"
    return Suspect(
        cause,
        "engine-config",
        what,
        f"set {trained} in {folder}/config.json, or serve OUT after `{convert}`",
        _fixed(base, cause, spec=base.spec.model_copy(update=differ)),
    )


def _vocab_map(base: Variant, ref: Variant, convert: str) -> Suspect | None:
    if not ref.spec.has_vocab_map or base.spec.draft_vocab_size != ref.spec.draft_vocab_size:
        return None
    served_map = base.state["d2t"]
    if torch.equal(served_map, ref.state["d2t"]):
        return None
    missing = not served_map.any()
    cause = "d2t-missing" if missing else "d2t-wrong"
    what = (
        "the served weights hold no d2t: vLLM keeps its zero map and reads every draft id as the target id "
        "of the same number"
        if missing
        else "the served d2t (draft-to-target vocabulary map) differs from the "
        f"drafter's own: {int((served_map != ref.state['d2t']).sum())} of {served_map.numel()} ids map elsewhere"
    )
    maps = {name: ref.state[name] for name in VOCAB_MAPS if name in ref.state}
    return Suspect(
        cause,
        "drafter",
        what,
        f"serve the drafter's own vocabulary map: serve OUT after `{convert}`",
        _fixed(base, cause, state={**base.state, **maps}),
    )


def _weights(base: Variant, ref: Variant, convert: str) -> list[Suspect]:
    names = sorted(set(ref.state) - set(VOCAB_MAPS))
    changed = [
        n
        for n in names
        if n not in base.state
        or base.state[n].shape != ref.state[n].shape
        or not torch.equal(base.state[n], ref.state[n].to(base.state[n].dtype))
    ]  # in the served precision
    if not changed:
        return []
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    state = {**base.state, **{n: ref.state[n] for n in names}}
    return [
        Suspect(
            "weights-differ",
            "drafter",
            f"the served drafter's tensors differ from the drafter named: {shown}",
            f"serve the drafter named: serve OUT after `{convert}`",
            _fixed(base, "weights-differ", state=state),
        )
    ]


def k_table_zero(k_table: list[list[int]] | None) -> list[list[int]]:
    """The rows of vLLM's num_speculative_tokens_per_batch_size that send K=0."""
    return [row for row in k_table or [] if row[2] == 0]
