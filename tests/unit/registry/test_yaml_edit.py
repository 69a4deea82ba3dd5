"""`registry.yaml_edit.set_values`: text in, text out. Each change touches its own value's lines only (comments, key
order, quoting and every other line stay byte for byte); a new key goes after its mapping's last line; what cannot
be edited in place is refused, never rewritten whole."""

from __future__ import annotations

import pytest
import yaml

from eaglezoo.errors import BadInput
from eaglezoo.registry.yaml_edit import set_values

ENTRY = """# an entry, as a person wrote it
id: pair  # the file's name
drafter:
  repo: org/drafter
  revision: null  # pinned by registry sync
target: {repo: org/target}
flags:
  fc_norm: true
notes:
- 'quoted: kept as written'
sources: [a, b]
null_reasons:
  hardware: not synced yet
"""


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines only `before` has, lines only `after` has), in order."""
    old, new = before.splitlines(), after.splitlines()
    return [x for x in old if x not in new], [x for x in new if x not in old]


def test_a_value_is_replaced_on_its_own_line_keeping_its_comment():
    sha = "0123456789abcdef0123456789abcdef01234567"
    text = set_values(ENTRY, {("drafter", "revision"): sha})
    assert changed_lines(ENTRY, text) == (
        ["  revision: null  # pinned by registry sync"],
        [f"  revision: {sha}  # pinned by registry sync"],
    )
    assert text.splitlines()[4] == f"  revision: {sha}  # pinned by registry sync"  # where it was


def test_new_keys_go_after_their_mappings_last_line_in_order():
    text = set_values(ENTRY, {("flags", "norm_output"): False, ("files",): {"config.json": "ab" * 32}})
    lines = text.splitlines()
    assert lines[lines.index("  fc_norm: true") + 1] == "  norm_output: false"
    assert lines[-2:] == ["files:", f"  config.json: {'ab' * 32}"]
    assert changed_lines(ENTRY, text)[0] == []  # nothing else was touched, comments included
    assert yaml.safe_load(text)["flags"] == {"fc_norm": True, "norm_output": False}


def test_lists_of_scalars_stay_flow_and_mappings_become_blocks():
    text = set_values(
        ENTRY,
        {
            ("sources",): ["x", "y", "z"],
            ("null_reasons", "hardware"): None,
            ("aux_layers",): {"ids": [1, 2, 3], "convention": "boundary"},
        },
    )
    assert "sources: [x, y, z]" in text.splitlines() and "  hardware: null" in text.splitlines()
    assert text.endswith("aux_layers:\n  ids: [1, 2, 3]\n  convention: boundary\n")
    assert "# an entry, as a person wrote it" in text and "  revision: null  # pinned by registry sync" in text
    assert "- 'quoted: kept as written'" in text.splitlines()


def test_a_null_becomes_the_mapping_a_deeper_key_needs():
    text = set_values("id: x\nhardware: null  # unknown yet\n", {("hardware", "gpus_per_node"): 8})
    assert yaml.safe_load(text) == {"id": "x", "hardware": {"gpus_per_node": 8}}
    assert text.startswith("id: x\n")


def test_the_result_reads_back_as_the_intended_data():
    changes = {("drafter", "revision"): "abc", ("flags", "fc_norm"): False, ("licence",): "apache-2.0"}
    expected = yaml.safe_load(ENTRY)
    expected["drafter"]["revision"], expected["flags"]["fc_norm"], expected["licence"] = "abc", False, "apache-2.0"
    assert yaml.safe_load(set_values(ENTRY, changes)) == expected


def test_a_key_a_flow_mapping_lacks_is_refused_not_rewritten():
    with pytest.raises(BadInput) as refused:
        set_values(ENTRY, {("target", "revision"): "abc"}, name="pair.yaml")
    assert str(refused.value) == "pair.yaml: cannot set target.revision in place; edit it by hand"
