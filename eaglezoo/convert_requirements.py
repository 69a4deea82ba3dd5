"""What `convert` writes of a drafter's requirements (eaglezoo/requirements.py): the `requirements` block of
`conversion.json` (every field, null where no source states it), and the one field an engine reads where one
exists: speculators' proposal count, `speculators_config.proposal_methods[].speculative_tokens`, which vLLM reads as
the default K (vLLM PR #44566), set to the recommended K. The K a source config proposes is itself a requirement
(its source: that config), where the registry states none."""

from __future__ import annotations

from .checkpoint.formats.blocks import proposal_bound, proposed_ks
from .checkpoint.spec import DrafterSpec
from .errors import UsageError
from .requirements import Requirements

SOURCE_PROPOSAL = "the source's config.json (speculators_config.proposal_methods[].speculative_tokens)"


def declared(stated: Requirements | None, source_config: dict) -> Requirements:
    """The registry's requirements, with the source config's own proposed K where the registry states no K."""
    req = stated or Requirements()
    ks = sorted(set(proposed_ks(source_config)))
    if req.recommended_k is not None or len(ks) != 1:
        return req
    return req.model_copy(update={"recommended_k": ks[0], "sources": {**req.sources, "recommended_k": SOURCE_PROPOSAL}})


def write_k(config: dict, spec: DrafterSpec, dialect: str | None, req: Requirements, decisions: list[str]) -> dict:
    """`config` with speculators' proposal count set to the recommended K, where the config carries one; a K beyond
    what a block drafter drafts in one step is refused (the K-beyond-block trap)."""
    k = req.recommended_k
    methods = (config.get("speculators_config") or {}).get("proposal_methods")
    if k is None or not isinstance(methods, list):
        return config
    most = proposal_bound(spec, dialect)
    if most is not None and k > most:
        raise UsageError(
            f"the recommended K={k} ({req.source_of('recommended_k')}) is beyond the {spec.family} drafter's block: "
            f"it drafts at most {most} tokens a step",
            hint="fix the entry's requirements.recommended_k",
            code="k-beyond-block",
        )
    envelope = dict(config["speculators_config"])
    envelope["proposal_methods"] = [{**m, "speculative_tokens": k} if isinstance(m, dict) else m for m in methods]
    decisions.append(f"speculators_config proposes K={k}: the recommended K ({req.source_of('recommended_k')})")
    return {**config, "speculators_config": envelope}
