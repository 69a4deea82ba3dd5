"""Registry entries of the families beside EAGLE-3: the schema's family fields and `registry check`'s rules on them."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from eaglezoo.registry.check import check_entry
from eaglezoo.registry.load import Registry
from eaglezoo.registry.schema import Entry

BASE = {
    "id": "fam",
    "drafter": {"repo": "org/drafter"},
    "target": {"repo": "org/target"},
    "publisher": "tests",
    "sources": ["tests"],
    "null_reasons": {"hardware": "tests", "acceptance_floors": "tests", "aux_layers": "tests"},
}
DFLASH = {
    **BASE,
    "family": "dflash",
    "block_size": 16,
    "mask_token_id": 5,
    "evidence": {
        "block_size": {"level": "estimate", "source": "estimate: tests"},
        "mask_token_id": {"level": "estimate", "source": "estimate: tests"},
        "dialect": {"level": "estimate", "source": "estimate: tests"},
    },
}


def entry(**changes) -> Entry:
    return Entry.model_validate({**DFLASH, **changes})


def problems(e: Entry, tmp_path) -> list[str]:
    return check_entry(e, Registry(directory=tmp_path, entries={e.id: e}, broken={}))


def test_an_existing_eagle3_entry_loads_unchanged_as_family_eagle3():
    e = Entry.model_validate(
        yaml.safe_load(
            '{id: x, drafter: {repo: a/b}, target: {repo: c/d}, publisher: p, eagle_version: "3", sources: [s]}'
        )
    )
    assert (e.family, e.block_size, e.mask_token_id, e.spec().family) == ("eagle3", None, None, "eagle3")


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"family": "eagle3"}, "needs eagle_version"),
        ({"family": "peagle", "block_size": None}, "needs eagle_version"),
        ({"eagle_version": "3"}, "a dflash drafter has none"),
        ({"family": "peagle", "eagle_version": "3"}, "block_size is a dflash or dspark key"),
        (
            {"family": "eagle3", "eagle_version": "3", "block_size": None},
            "mask_token_id is a peagle, dflash or dspark key",
        ),
        ({"dialect": "speculators-dspark"}, "not a dflash dialect"),
        ({"family": "peagle", "eagle_version": "3", "block_size": None, "dialect": "dflash"}, "not a peagle dialect"),
        ({"family": "medusa"}, "family"),
        ({"block_size": 0}, "block_size"),
    ],
)
def test_family_fields_that_do_not_fit_are_refused(changes, says):
    with pytest.raises(ValidationError, match=says):
        entry(**changes)


def test_family_facts_need_evidence():
    with pytest.raises(ValidationError, match="block_size stated without evidence"):
        entry(evidence={k: v for k, v in DFLASH["evidence"].items() if k != "block_size"})


def test_the_spec_carries_the_family_to_serving():
    spec = entry(dialect="dflash").spec()
    assert (spec.family, spec.family_fields.block_size, spec.family_fields.mask_token_id) == ("dflash", 16, 5)


def test_a_consistent_family_entry_checks_clean(tmp_path):
    assert problems(entry(dialect="speculators-dflash"), tmp_path) == []


def test_check_finds_a_mask_token_outside_the_vocabulary(tmp_path):
    e = entry(
        target_vocab_size=5,
        evidence={**DFLASH["evidence"], "target_vocab_size": {"level": "estimate", "source": "estimate: t"}},
    )
    assert any("mask_token_id 5 is outside the vocabulary" in p for p in problems(e, tmp_path))


def test_check_finds_a_k_beyond_the_block(tmp_path):
    e = entry(block_size=4, engines=[{"engine": "vllm", "num_speculative_tokens": 4}])
    assert any("num_speculative_tokens 4 is beyond the block" in p for p in problems(e, tmp_path))
    assert problems(entry(block_size=4, engines=[{"engine": "vllm", "num_speculative_tokens": 3}]), tmp_path) == []


def test_check_finds_eagle_norm_flags_on_a_block_drafter(tmp_path):
    e = entry(
        flags={"fc_norm": True},
        evidence={**DFLASH["evidence"], "flags": {"level": "estimate", "source": "estimate: t"}},
    )
    assert any("a dflash drafter has none of EAGLE 3.1's norm flags" in p for p in problems(e, tmp_path))


def test_check_finds_a_block_beyond_the_context(tmp_path):
    e = entry(
        max_position_embeddings=8,
        evidence={**DFLASH["evidence"], "max_position_embeddings": {"level": "estimate", "source": "estimate: t"}},
    )
    assert any("block_size 16 exceeds max_position_embeddings 8" in p for p in problems(e, tmp_path))
