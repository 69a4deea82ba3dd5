"""The one rule that finds llama-server: --llama-server, then EAGLEZOO_LLAMA_SERVER, then the cache, then PATH."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eaglezoo.errors import EngineError, UsageError
from eaglezoo.verify.llama_server import ENV_VAR, cached_build, find_llama_server


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def bare(monkeypatch, tmp_path):
    """No setting, an empty cache, and a PATH with nothing on it."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv("EAGLEZOO_LLAMACPP_BUILD", raising=False)
    monkeypatch.setenv("EAGLEZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    return tmp_path


def test_missing_everywhere_names_the_setup_command(bare):
    with pytest.raises(EngineError) as caught:
        find_llama_server()
    assert "llama-server not found" in caught.value.message
    assert "bash scripts/setup/llama_server.sh" in caught.value.hint


def test_order_explicit_then_env_then_cache_then_path(bare, monkeypatch):
    on_path = executable(bare / "empty-bin" / "llama-server")
    assert find_llama_server() == on_path
    cached = executable(cached_build())
    assert cached.is_relative_to(bare / "cache")
    assert find_llama_server() == cached
    named = executable(bare / "named" / "llama-server")
    monkeypatch.setenv(ENV_VAR, str(named))
    assert find_llama_server() == named
    given = executable(bare / "given" / "llama-server")
    assert find_llama_server(given) == given


def test_a_named_path_that_is_not_executable_is_refused(bare, monkeypatch):
    plain = bare / "llama-server"
    plain.write_text("")
    with pytest.raises(UsageError, match="not an executable file"):
        find_llama_server(plain)
    monkeypatch.setenv(ENV_VAR, str(bare / "absent"))
    with pytest.raises(UsageError, match=ENV_VAR):
        find_llama_server()


def test_the_setup_scripts_build_folder_is_honoured(bare, monkeypatch):
    monkeypatch.setenv("EAGLEZOO_LLAMACPP_BUILD", str(bare / "build"))
    built = executable(bare / "build" / "bin" / "llama-server")
    assert find_llama_server() == built
    assert os.access(built, os.X_OK)
