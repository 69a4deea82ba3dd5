"""Converting the families beside EAGLE-3 on the command line: the forms both ways, and bad input refused in one
line (a block size of 0, a mask token out of range, a DFlash lm_head of the wrong vocabulary, a form that would
lose the family)."""

from __future__ import annotations

import json

import pytest
from conftest import assert_clean_failure, run_inprocess
from support import families as F


@pytest.fixture
def cli():
    return run_inprocess


def test_dflash_to_speculators_and_back(tmp_path, cli):
    src = F.zlab_dflash(tmp_path / "native")
    r = cli("convert", src, tmp_path / "spec", "--to", "speculators", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["plan"]["dialect"] == "dflash"
    r = cli("convert", tmp_path / "spec", tmp_path / "back", "--to", "native")
    assert r.code == 0, r.err
    assert (tmp_path / "back" / "config.json").read_text() == (src / "config.json").read_text()


def test_block_size_zero_is_one_line(tmp_path, cli):
    src = F.zlab_dflash(tmp_path / "native", block_size=0)
    out = tmp_path / "out"
    assert_clean_failure(cli("convert", src, out, "--to", "speculators"), out, contains="block_size")


def test_mask_token_of_the_wrong_type_is_one_line(tmp_path, cli):
    src = F.zlab_dflash(tmp_path / "native", mask_token_id=-1)
    out = tmp_path / "out"
    assert_clean_failure(cli("convert", src, out, "--to", "speculators"), out, contains="mask_token_id")


def test_lm_head_of_the_wrong_vocabulary_is_refused(tmp_path, cli):
    src = F.zlab_dflash(tmp_path / "native", lm_head_rows=F.VOCAB // 2)
    out = tmp_path / "out"
    assert_clean_failure(cli("convert", src, out, "--to", "speculators"), out, contains="lm_head")


def test_a_block_drafter_has_no_eagle31_form(tmp_path, cli):
    src = F.deepspec_dspark(tmp_path / "native")
    out = tmp_path / "out"
    assert_clean_failure(cli("convert", src, out, "--to", "eagle31"), out, contains="no EAGLE 3.1 form")
