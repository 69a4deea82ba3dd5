"""The official `huggingface_hub` client, configured and bounded, and `hub_call`: every call's errors as one line.

The endpoint and token come from the client's own settings (HF_ENDPOINT, HF_TOKEN, the token file).
`configure()` runs once at CLI start, before anything imports the client: Xet off for uploads
(HF_HUB_DISABLE_XET: plain LFS works against every Hub-compatible server) unless the user set it,
progress bars only on a terminal, and a connect/read timeout on every request; each call also has a
deadline (`deadline.py`). Tokens are never printed: whatever a server's text quotes passes through
`errors.printable`, which hides every secret the process holds.

What a pull and a push do is in `pull.py` and `push.py`.
"""

from __future__ import annotations

import os

from ..errors import HubError, HubSilent, UsageError, network_problem, printable
from ..settings import hub_deadline_s, hub_timeout_s


def configure(show_progress: bool) -> None:
    """Client settings read at import time by huggingface_hub: call before it is imported."""
    os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", f"{hub_timeout_s():g}")
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", f"{min(hub_timeout_s(), 10):g}")
    hub_deadline_s()  # checked now: a bad value is one line before any work
    if not show_progress:
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"


def repo_id_problem(repo: str) -> str | None:
    """Why the Hub client's own validator refuses `repo` as a repo id, or None (no network: the rules alone)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError as exc:
        return str(exc)
    return None


_bounded = False


def _bound_the_client() -> None:
    """The client's shared HTTP session has no timeout, and many calls pass `timeout=None` explicitly
    (which disables the session's default). So the session is rebuilt through the client's public factory
    hook: the library's own event hooks (offline mode, request ids), read from the session it made, plus
    ours, which give every request our limits and the call's deadline, in a client that stops at the deadline
    (`deadline.py`)."""
    global _bounded
    if _bounded:
        return
    from huggingface_hub import get_session, set_client_factory

    from . import deadline  # noqa: PLC0415 - httpx2 only at a Hub call

    library_hooks = get_session().event_hooks

    def factory():
        hooks = {
            "request": [*library_hooks.get("request", []), deadline.limit_request],
            "response": [*library_hooks.get("response", []), deadline.watch_response],
        }
        return deadline.BoundedClient(event_hooks=hooks, follow_redirects=True, timeout=None)  # as the library's

    set_client_factory(factory)
    _bounded = True


def _server_says(exc: BaseException) -> str:
    """The server's own message (first line, secrets hidden): what the Hub said, not our internals."""
    text = str(exc).strip().splitlines()
    return printable(text[0] if text else type(exc).__name__)


def hub_call(fn, what: str, max_bytes: int | None = None):
    """Runs one client call and maps its errors to one-line messages. The client itself retries
    connection errors, timeouts, 429 and 5xx with backoff; each request is bounded (`settings.hub_timeout_s`),
    and so is the whole call's wait for word from the Hub, retries included (`settings.hub_deadline_s`).
    `max_bytes`: what the call's answers may hold in all; past it the call stops (TooLarge)."""
    _bound_the_client()
    from huggingface_hub.utils import logging as hf_logging

    from .deadline import start_call  # noqa: PLC0415 - httpx2 only at a Hub call

    hf_logging.set_verbosity_error()  # the client logs each retry; we report the outcome once
    start_call(max_bytes)
    try:
        return fn()
    except Exception as exc:  # a full disk or a bug is not the Hub's: errors.describe words those
        error = _hub_error(exc, what)
        if error is None:
            raise
        raise error from exc


def _client_errors() -> list[tuple[type | tuple[type, ...], str, str]]:
    """The client's exceptions, most specific first: (kinds, what happened, what to do)."""
    from huggingface_hub import errors as e

    return [
        (
            e.GatedRepoError,
            "the repository is gated; accept its terms on the Hub first",
            "accept the terms on the repo's Hub page, then retry with HF_TOKEN set",
        ),
        (
            e.RepositoryNotFoundError,
            "repository not found (or private, and the token cannot see it)",
            "check the repo id; for a private repo set HF_TOKEN",
        ),
        (e.RevisionNotFoundError, "revision not found", "check --revision (a branch, tag or commit of that repo)"),
        (
            (e.LocalEntryNotFoundError, e.OfflineModeIsEnabled),
            "not in the local cache, and offline mode (HF_HUB_OFFLINE) forbids downloading it",
            "run once without HF_HUB_OFFLINE=1 to download it",
        ),
    ]


def _hub_error(exc: Exception, what: str) -> Exception | None:
    """The one-line error for a failed client call; None when the failure is not the Hub's."""
    from huggingface_hub import errors as e

    from .deadline import DeadlinePassed, TooLarge, unreadable_answer  # noqa: PLC0415 - httpx2 only at a Hub call

    if isinstance(exc, TooLarge):
        return HubError(
            f"{what}: {exc}: refused", hint="the repo holds more than eaglezoo reads from it: do not use it"
        )
    if isinstance(exc, DeadlinePassed):
        return HubSilent(
            f"{what}: {exc}",
            hint="check HF_ENDPOINT and your network; EAGLEZOO_HUB_DEADLINE sets "
            "how long a Hub call waits, retries included",
        )
    for kinds, happened, to_do in _client_errors():
        if isinstance(exc, kinds):
            return HubError(f"{what}: {happened}", hint=to_do)
    if isinstance(exc, e.EntryNotFoundError):
        return HubError(f"{what}: file not found ({_server_says(exc)})", hint="check the file name and --revision")
    if isinstance(exc, e.HFValidationError):
        return UsageError(f"{what}: not a valid Hub repo id or revision", hint="repo ids look like owner/name")
    if isinstance(exc, e.HfHubHTTPError):
        return _http_error(exc, what)
    problem = network_problem(exc)
    if problem is not None:
        return _unreachable(what, problem)
    answer = unreadable_answer(exc)
    if answer is None:
        return None
    return HubError(
        f"{what}: {answer}",
        hint="HF_ENDPOINT must name a Hugging Face Hub or a mirror of its API; a proxy or login page answers like this",
    )


def _http_error(exc: Exception, what: str) -> Exception:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status == 401:
        return HubError(
            f"{what}: authentication failed (401): the token is missing, wrong or expired",
            hint="set HF_TOKEN to a valid token (huggingface-cli login)",
        )
    if status == 403:
        return HubError(
            f"{what}: forbidden (403): the token may not write to this repository",
            hint="use a token with write access to that namespace",
        )
    if status is not None and status < 500 and status != 429:
        return HubError(
            f"{what}: the Hub answered {status}: {_server_says(exc)}",
            hint="see the Hub's message; check the repo id and --revision",
        )
    return _unreachable(what, f"the Hub answered {status}")


def _unreachable(what: str, problem: str) -> HubError | HubSilent:
    # a Hub that does not answer stops the command: each later call would wait as long
    error = HubSilent if problem == "timed out" else HubError
    return error(
        f"{what}: the Hub could not be reached ({problem})",
        hint="check HF_ENDPOINT and your network; EAGLEZOO_HUB_TIMEOUT sets the per-request limit",
    )


# --------------------------------------------------------------------------------------------
# pull


# --------------------------------------------------------------------------------------------
# push
