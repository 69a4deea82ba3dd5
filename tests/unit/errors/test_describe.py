"""`errors.describe`: every failure, ours or the system's, is one sentence of ours, never the internal text."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "exc, sentence",
    [
        (
            OSError(28, "No space left on device", "/out/model.safetensors"),
            "no space left on the device: /out/model.safetensors",
        ),
        (OSError(36, "File name too long", "xx"), "a file name is too long: xx"),
        (OSError(21, "Is a directory", "d"), "a directory was given where a file is needed: d"),
        (OSError(13, "Permission denied", "p"), "permission denied: p"),
        (OSError(104, "Connection reset by peer"), "the connection was reset"),
        (RecursionError("maximum recursion depth exceeded"), "an input is nested too deeply to read"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "an input file is not valid UTF-8 text"),
        (TimeoutError("timed out"), "the server did not answer in time"),
        (ZeroDivisionError("division by zero"), "internal error (ZeroDivisionError)"),
    ],
)
def test_every_failure_is_one_sentence_without_internal_text(exc, sentence):
    from eaglezoo.errors import describe

    failure = describe(exc)
    assert failure.message == sentence and failure.exit_code == 2
    assert str(exc) not in failure.message  # the internal text never reaches the user
