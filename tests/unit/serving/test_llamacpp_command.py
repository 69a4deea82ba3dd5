"""The one llama-server command builder (serving.llamacpp_serve_command) as tune extends it: p-min and the slots
named where tune chose them, and K = 0 the target served alone (nothing drafts, so no -md and no draft flags)."""

from __future__ import annotations

import shlex

from eaglezoo.serving import llamacpp_serve_command


def test_tune_names_k_p_min_and_the_slots():
    command = shlex.split(llamacpp_serve_command("t/target.gguf", "d/drafter.gguf", "eagle3", 2, 0.75, parallel=4))
    assert command == [
        *("llama-server", "-m", "t/target.gguf", "-md", "d/drafter.gguf", "--spec-type", "draft-eagle3"),
        *("--spec-draft-n-max", "2", "--spec-draft-p-min", "0.75", "--metrics", "-np", "4"),
    ]


def test_k_zero_is_the_target_alone():
    assert (
        llamacpp_serve_command("t.gguf", "d.gguf", "dflash", 0, 0.0, parallel=2)
        == "llama-server -m t.gguf --metrics -np 2"
    )


def test_serve_config_s_command_is_unchanged():
    assert llamacpp_serve_command("t.gguf", "d.gguf", "peagle", 3) == (
        "llama-server -m t.gguf -md d.gguf --spec-type draft-eagle3 --spec-draft-n-max 3 --metrics"
    )
