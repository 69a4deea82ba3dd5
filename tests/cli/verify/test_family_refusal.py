"""verify of a family eaglezoo reads but does not run (DSpark), and of an MTP folder: one line naming what it can
do instead."""

from __future__ import annotations

import json

from conftest import assert_clean_failure, run_inprocess
from support import families as F


def test_verify_of_a_dspark_drafter(tmp_path):
    r = run_inprocess("verify", F.deepspec_dspark(tmp_path / "d"), "--target", F.target(tmp_path / "t"))
    assert_clean_failure(r, contains="dspark")
    assert "serve-config" in r.err


def test_verify_of_an_mtp_folder(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"speculators_model_type": "mtp"}))
    r = run_inprocess("verify", tmp_path / "m", "--target", F.target(tmp_path / "t"))
    assert_clean_failure(r, contains="MTP")
