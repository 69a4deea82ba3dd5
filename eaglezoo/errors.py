"""One exception hierarchy, and the one table that turns any failure into a sentence for the user.

The CLI catches once (`cli.run`) and asks `describe()` what to say: eaglezoo's own errors carry
their message and hint; known OS, network and Hub failures map to a fixed sentence; anything else
is a bug and says so, without the internal exception's text.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
from dataclasses import dataclass
from types import FrameType

EXIT_FINDINGS = 1  # checks ran and found problems
EXIT_USAGE = 2  # usage error or bad input


class EaglezooError(Exception):
    exit_code = EXIT_USAGE
    kind = "error"

    def __init__(self, message: str, hint: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code  # a stable finding code, where lint reports this problem

    def __str__(self) -> str:
        return self.message


class UsageError(EaglezooError):
    """The user asked for something that cannot be done as asked."""

    kind = "usage"


class Ambiguous(UsageError):
    """A fact of a drafter its files leave to the reader (a flag absent where engines default it differently, ids
    of no documented convention): the strict reader refuses it; `values` are the readings an engine could take,
    which doctor measures to settle it (`doctor/ambiguity.py`). `fact`: a norm flag's name, or "aux_convention"."""

    def __init__(self, message: str, hint: str, code: str | None, fact: str, values: tuple[bool | str, ...]):
        super().__init__(message, hint, code)
        self.fact = fact
        self.values = values


class BadInput(EaglezooError):
    """A file, config or checkpoint is malformed or inconsistent."""

    kind = "bad-input"


class HubError(EaglezooError):
    """The Hub (or a local mirror of it) refused or failed a request."""

    kind = "hub"


class HubSilent(EaglezooError):
    """The Hub did not answer: a request timed out, or a call's deadline passed. Not a HubError, which a
    command may report for one repo before it goes on to the next: every later call would wait as long."""

    kind = "hub"


class EngineError(EaglezooError):
    """A serving engine (vLLM offline or a running server) refused, failed or answered nonsense."""

    kind = "engine"


class Terminated(BaseException):
    """SIGTERM or SIGHUP: unwinds like KeyboardInterrupt, so every `finally` cleans up."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def raise_on_termination() -> None:
    """SIGTERM and SIGHUP raise `Terminated` in the main thread (SIGINT already raises)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Terminated(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def first_line(exc: BaseException) -> str:
    """A library's error text cut to its first line, for a one-line message that quotes it."""
    return str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__


def terminal_text(text: str) -> str:
    """Text a terminal shows as itself: every character that is not printable blanked (C0 and C1 controls, so
    ESC and every escape sequence it opens, and format characters such as bidi overrides), line breaks kept."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else " " for c in text)


def printable(text: str) -> str:
    """Text from elsewhere (a server, an engine), safe to print: no control characters, one line, and no
    secret this process holds (a server may echo the request's Authorization header back)."""
    return redact(" ".join(terminal_text(redact(text)).split()))


SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|CREDENTIAL", re.IGNORECASE)
SECRET_SHAPES = re.compile(
    r"\bbearer\s+[^\s'\",;]+|\bhf_[A-Za-z0-9]{20,}|(?<=://)[^/@\s:]+:[^/@\s]+(?=@)", re.IGNORECASE
)  # a header; an HF token; a URL's user:password
MIN_SECRET = 6  # shorter values are not worth hiding, and would blank out ordinary words
MIN_CUT = 4  # a secret cut at the end of an excerpt: this many of its first characters are hidden too


def held_secrets() -> list[str]:
    """Every secret this process could have sent: the Hub client's token (env or token file) and the values
    of environment variables named like secrets. Longest first, so that none is half-replaced."""
    found = {value for name, value in os.environ.items() if SECRET_NAME.search(name) and len(value) >= MIN_SECRET}
    hub = sys.modules.get("huggingface_hub")  # its token file matters only once the client may have sent it
    if hub is not None:
        try:
            token = hub.get_token()
        except Exception:  # noqa: BLE001 - an unreadable token file holds nothing we could have sent
            token = None
        if token and len(token) >= MIN_SECRET:
            found.add(token)
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every held secret, a bearer credential or an HF token shape replaced by ***, including a
    secret cut short at the end of the text (an excerpt of a longer body)."""
    for secret in held_secrets():
        text = text.replace(secret, "***")
        cut = next((n for n in range(len(secret) - 1, MIN_CUT - 1, -1) if text.endswith(secret[:n])), 0)
        if cut:
            text = text[:-cut] + "***"
    return SECRET_SHAPES.sub(_hidden, text)


def _hidden(match: re.Match[str]) -> str:
    found: str = match.group(0)
    if found.lower().startswith("hf_"):
        return "hf_***"
    if found.lower().startswith("bearer"):
        return found.split()[0] + " ***"
    return "***"  # a URL's user:password


@dataclass
class Failure:
    message: str
    hint: str | None
    code: str  # stable, for scripts reading --json errors
    exit_code: int


OS_ERRORS = {  # errno -> (sentence, hint)
    errno.ENOSPC: ("no space left on the device", "free some space or write elsewhere"),
    errno.EDQUOT: ("disk quota exceeded", "free some space or write elsewhere"),
    errno.ENAMETOOLONG: ("a file name is too long", "use a shorter path"),
    errno.EACCES: ("permission denied", "check the file's permissions"),
    errno.EPERM: ("operation not permitted", "check the file's permissions"),
    errno.EISDIR: ("a directory was given where a file is needed", None),
    errno.ENOTDIR: ("a path component is not a directory", None),
    errno.ENOENT: ("no such file or directory", None),
    errno.ELOOP: ("a symlink loops (too many levels of symbolic links)", "fix or remove that symlink"),
    errno.EROFS: ("the file system is read-only", "write elsewhere"),
    errno.EMFILE: ("too many open files", None),
    errno.ECONNREFUSED: ("the connection was refused", "check the endpoint (HF_ENDPOINT) and your network"),
    errno.ECONNRESET: ("the connection was reset", "retry; check the endpoint and your network"),
}
SIGNAL_EXITS: dict[int, int] = {signal.SIGTERM: 143, signal.SIGHUP: 129}


def describe(exc: BaseException) -> Failure:
    """What to tell the user about `exc`: one sentence, a hint, a stable code and the exit code."""
    if isinstance(exc, EaglezooError):
        return Failure(exc.message, exc.hint, exc.code or exc.kind, exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        return Failure("interrupted", None, "interrupted", 130)
    if isinstance(exc, Terminated):
        name = signal.Signals(exc.signum).name
        return Failure(f"stopped by {name}", None, "terminated", SIGNAL_EXITS.get(exc.signum, 128 + exc.signum))
    if isinstance(exc, RecursionError):
        return Failure("an input is nested too deeply to read", None, "bad-input", EXIT_USAGE)
    if isinstance(exc, UnicodeDecodeError):
        return Failure("an input file is not valid UTF-8 text", None, "bad-input", EXIT_USAGE)
    if isinstance(exc, OSError) and exc.errno in OS_ERRORS:
        sentence, hint = OS_ERRORS[exc.errno]
        where = f": {exc.filename}" if exc.filename else ""
        return Failure(sentence + where, hint, "os", EXIT_USAGE)
    network = _network_failure(exc)
    if network:
        return network
    return Failure(
        f"internal error ({type(exc).__name__})",
        "rerun with EAGLEZOO_DEBUG=1 and report the traceback",
        "internal",
        EXIT_USAGE,
    )


def network_problem(exc: BaseException) -> str | None:
    """ "timed out" or "connection failed" for a transport failure, else None. httpx (the Hub client's
    transport) raises its own types: matched by name, so this module imports neither."""
    names = {t.__name__ for t in type(exc).__mro__}
    if names & {"TimeoutException", "TimeoutError"}:
        return "timed out"
    if names & {"TransportError", "ConnectionError"}:
        return "connection failed"
    return None


def _network_failure(exc: BaseException) -> Failure | None:
    problem = network_problem(exc)
    if problem == "timed out":
        return Failure(
            "the server did not answer in time",
            "retry later; EAGLEZOO_HUB_TIMEOUT sets the limit",
            "network",
            EXIT_USAGE,
        )
    if problem:
        return Failure(
            "the connection to the server failed",
            "check the endpoint (HF_ENDPOINT) and your network",
            "network",
            EXIT_USAGE,
        )
    if "HFValidationError" in {t.__name__ for t in type(exc).__mro__}:
        return Failure("not a valid Hub repo id or revision", "repo ids look like owner/name", "usage", EXIT_USAGE)
    return None
