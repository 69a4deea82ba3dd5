"""Is the drafter a server loaded the drafter named? Compared as the engine serves it: the aux ids it will
capture (in its boundary convention, as each of vLLM 0.32's model runners reads them: `aux_ids.vllm_captures`),
the four norm flags, the vocabulary maps and every weight. Each difference is a sentence that names it;
`verify --endpoint` fails on any (and `doctor` builds on them)."""

from __future__ import annotations

from pathlib import Path

from ..checkpoint.formats.aux_ids import vllm_captures
from ..checkpoint.formats.base import ReadOptions
from ..checkpoint.read import Drafter, read_drafter
from ..errors import EaglezooError, EngineError

SHOWN = 3  # differing tensors named in a sentence


def read_served(served: Path) -> Drafter:
    """The folder the server loaded, read from its own files alone; unreadable is an error that says why. A folder
    eaglezoo's strict reader refuses (ids that disagree, keys missing) is read as vLLM reads it: an HF-style EAGLE-3
    config whose only aux ids are the top-level ones, absent flags false (`llama_eagle3.py`)."""
    options = ReadOptions(allow_missing_aux=True, trust_stored_flags=True)
    try:
        return read_drafter(served, None, options, strict=False)
    except EaglezooError:
        pass
    try:
        return read_drafter(served, "eagle31", options, strict=False, view=vllm_view)
    except EaglezooError as exc:
        raise EngineError(
            f"the server's drafter {served} cannot be read here, so it cannot be checked: {exc.message}",
            hint=exc.hint or "fix that folder, or restart the server with the drafter named",
        ) from None


def vllm_view(config: dict) -> dict:
    """The config as vLLM reads its aux ids: where the top-level list (vLLM's) and eagle_config's (SGLang's, layer
    outputs) disagree, the top-level one alone."""
    top = config.get("eagle_aux_hidden_state_layer_ids")
    eagle = config.get("eagle_config") if isinstance(config.get("eagle_config"), dict) else {}
    nested = eagle.get("eagle_aux_hidden_state_layer_ids")
    ints = all(isinstance(x, list) and all(type(i) is int for i in x) for x in (top, nested))
    if not ints or [i + 1 for i in nested] == top:
        return config
    return {**config, "eagle_config": {k: v for k, v in eagle.items() if k != "eagle_aux_hidden_state_layer_ids"}}


def differences(served: Drafter, named: Drafter, target_layers: int | None) -> list[str]:
    """What differs between the served drafter and the named one (empty: the same drafter, served faithfully). The
    aux ids differ where no model runner of vLLM captures the trained layers."""
    found = []
    theirs, ours = served.spec, named.spec
    captures, trained = vllm_captures(served.config, target_layers), ours.aux.boundary() if ours.aux else None
    if trained is not None and captures and all(c.layers != trained or not c.fits for c in captures):
        found.append(f"aux ids: {'; '.join(c.said() for c in captures)}; the drafter was trained on boundary {trained}")
    for flag, value in ours.flags().items():
        if theirs.flags()[flag] != value:
            found.append(
                f"{flag}: the server's config says {str(theirs.flags()[flag]).lower()}, the drafter "
                f"named was trained with {str(value).lower()}"
            )
    if theirs.draft_vocab_size != ours.draft_vocab_size:
        found.append(f"draft vocabulary: {theirs.draft_vocab_size} tokens served, {ours.draft_vocab_size} named")
    found += _weight_differences(served, named)
    return found


def _weight_differences(served: Drafter, named: Drafter) -> list[str]:
    import torch

    theirs, ours = served.state(), named.state()
    missing, extra = sorted(ours.keys() - theirs.keys()), sorted(theirs.keys() - ours.keys())
    changed = sorted(
        k
        for k in ours.keys() & theirs.keys()
        if ours[k].shape != theirs[k].shape or not torch.equal(ours[k], theirs[k].to(ours[k].dtype))
    )
    found = []
    for what, names in (
        ("missing from the server's drafter", missing),
        ("only in the server's drafter", extra),
        ("with other values", changed),
    ):
        if names:
            more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
            found.append(f"tensors {what}: {', '.join(names[:SHOWN])}{more}")
    return found
