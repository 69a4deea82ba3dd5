"""`errors.printable`: every text quoted from a server or an engine passes through it, so it hides every
secret the process holds, however the text cuts or wraps it."""

from __future__ import annotations

import pytest

from eaglezoo.errors import printable

TOKEN = "hf_AbcdefghijklmnopqrstuvwxyzABCDEFGH"


@pytest.fixture(autouse=True)
def held(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-live-0123456789")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to hide without blanking ordinary words


@pytest.mark.parametrize(
    "text, shown",
    [
        (f"Authorization: Bearer {TOKEN}", "Authorization: Bearer ***"),
        (f"token={TOKEN}&x=1", "token=***&x=1"),
        ("key sk-live-0123456789 refused", "key *** refused"),
        (f"cut here {TOKEN[:12]}", "cut here ***"),  # an excerpt that ends inside the token
        ("Bearer someone-elses-credential, then", "Bearer ***, then"),  # a credential we do not hold
        ("hf_ZyxwvutsrqponmlkjihgfedcbaZYXW is not ours", "hf_*** is not ours"),
        ("a\nmulti\tline\x1b[31m text", "a multi line [31m text"),
        ("abc and hf_transfer stay", "abc and hf_transfer stay"),
        ("http://alice:s3cret@10.0.0.1:8000/v1 refused", "http://***@10.0.0.1:8000/v1 refused"),
        ("http://10.0.0.1:8000/v1 stays", "http://10.0.0.1:8000/v1 stays"),
    ],
)
def test_printable_hides_secrets(text, shown):
    assert printable(text) == shown
