"""eaglezoo's own environment settings, read when first needed and checked: a bad value is one line."""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

from .errors import UsageError


@functools.cache
def env_seconds(name: str, default: float) -> float:
    """A timeout in seconds from the environment variable `name`: a finite number above 0."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise UsageError(f"{name}={text!r}: give a number of seconds above 0", hint=f"e.g. {name}=60")
    return value


def hub_timeout_s() -> float:
    """Connect and read limit of every Hub request."""
    return env_seconds("EAGLEZOO_HUB_TIMEOUT", 60.0)


def hub_deadline_s() -> float:
    """The longest a Hub call waits for the Hub to send something, retries included."""
    return env_seconds("EAGLEZOO_HUB_DEADLINE", 75.0)


def endpoint_timeout_s() -> float:
    """The longest one request to a running server may take, from connecting to its last byte: a whole-request
    deadline, so that a server trickling its answer is cut as one that says nothing. A completion of the default
    64 tokens answers in seconds; a long generation on a slow server needs more."""
    return env_seconds("EAGLEZOO_ENDPOINT_TIMEOUT", 60.0)


def doctor_deadline_s() -> float:
    """The longest `doctor` waits on a server in all, every request together (time with none in flight is not
    counted): with the startup, a server that stalls or trickles stops doctor within 90 s."""
    return env_seconds("EAGLEZOO_DOCTOR_DEADLINE", 60.0)


def cache_dir() -> Path:
    """Where eaglezoo keeps what it builds once (a packaged target converted to a plain folder)."""
    return Path(os.environ.get("EAGLEZOO_CACHE") or Path.home() / ".cache" / "eaglezoo")
