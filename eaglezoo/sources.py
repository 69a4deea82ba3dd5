"""Where a drafter or target comes from: a local directory, or a Hub repo id pulled into the cache."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import UsageError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_repo_id(text: str) -> bool:
    return bool(REPO_ID.match(text)) and not Path(text).exists()


def local_dir(src: str, revision: str | None, what: str = "drafter") -> Path:
    """A local directory for `src`; Hub repo ids are pulled (or served from the cache offline)."""
    path = Path(src)
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{what} {src}: not a directory")
        return path
    if is_repo_id(src):
        from .hub import pull
        return pull(src, revision=revision).path
    raise UsageError(f"{what} {src}: no such directory (nor a Hub repo id of the form owner/name)")
