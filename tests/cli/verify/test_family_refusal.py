"""verify of a DSpark drafter the native engine does not run (a bonus anchor: the speculators default), and of an MTP
folder: one line naming what it can do instead. The example DSpark drafter, anchor sampled, is measured natively."""

from __future__ import annotations

import json

from conftest import EXAMPLE, assert_clean_failure, run_inprocess
from support import families as F


def test_verify_of_a_bonus_anchor_dspark_drafter(tmp_path):
    src, spec_form = F.deepspec_dspark(tmp_path / "d"), tmp_path / "s"
    assert run_inprocess("convert", src, spec_form, "--to", "speculators").code == 0  # sample_from_anchor unstated
    r = run_inprocess("verify", spec_form, "--target", F.target(tmp_path / "t"))
    assert_clean_failure(r, contains="cannot run this dspark drafter: a bonus-anchor DSpark")
    assert "--engine llamacpp" in r.err


def test_verify_of_the_example_dspark_drafter_natively():
    """Anchor sampled, vanilla Markov head: the native engine measures it (verify/dspark.py), at K up to its block."""
    args = ("verify", EXAMPLE / "dspark-llamacpp", "--target", EXAMPLE / "target", "--max-prompts", "2")
    r = run_inprocess(*args, "-k", "4", "--max-new-tokens", "16", "--json")
    assert r.code == 0, r.err
    assert r.json()["mean_acceptance_length"] > 1 and len(r.json()["acceptance_per_position"]) == 4
    assert_clean_failure(run_inprocess(*args, "-k", "5"), contains="drafts at most 4 tokens")


def test_verify_of_an_mtp_folder(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"speculators_model_type": "mtp"}))
    r = run_inprocess("verify", tmp_path / "m", "--target", F.target(tmp_path / "t"))
    assert_clean_failure(r, contains="MTP")
