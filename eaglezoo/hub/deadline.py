"""The limits of the Hub client's HTTP session, and what the Hub last answered.

Each Hub call (`hub.hub_call`) has a deadline (`settings.hub_deadline_s`): once it has waited that
long without word from the Hub, retries included, it stops. Word is a response body's bytes or its
end; headers alone are not (a server may send them and stall), and the time spent sending a request
body is not waiting. So a long download or upload that is moving is never cut. Every request's
timeouts are clipped to the time left, no request starts after the deadline, and a transport failure
after it raises `DeadlinePassed`, which none of the client's retry loops catches. Imported only with
the client, so that commands which never reach the Hub do not pay for httpx2.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from contextlib import contextmanager

import httpx2

from ..errors import printable
from ..settings import hub_deadline_s, hub_timeout_s

RETRIED_FAILURES = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)  # as the client's
RETRIED_STATUSES = {408, 429, 500, 502, 503, 504}  # the client sleeps before retrying these
SHAPE_ERRORS = (TypeError, KeyError, AttributeError, IndexError)  # the client's parsing of JSON it did not expect

_deadline = math.inf  # time.monotonic() by which the Hub must have sent word
_last = threading.local()  # .response: the last answer this thread received


class DeadlinePassed(Exception):
    """The deadline passed while the client waited: not an httpx2 error, so the client does not retry it."""

    def __init__(self, why: str | None = None):
        super().__init__(why or f"the Hub did not answer within {hub_deadline_s():g} s")


class TooLarge(Exception):
    """The call's answers held more bytes than it allows: not an httpx2 error, so the client does not retry it."""


_bytes_allowed: int | None = None  # what the answers of the running call may hold in all (None: no bound)
_bytes_received = 0
_bytes_lock = threading.Lock()  # a call's downloads may run in threads


def start_call(max_bytes: int | None = None) -> None:
    """A Hub call starts: the whole deadline ahead, no answer yet, and `max_bytes` of answers allowed."""
    global _bytes_allowed, _bytes_received
    _heard_from_hub()
    _last.response = None
    with _bytes_lock:
        _bytes_allowed, _bytes_received = max_bytes, 0


def _count(size: int) -> None:
    global _bytes_received
    with _bytes_lock:
        _bytes_received += size
        if _bytes_allowed is not None and _bytes_received > _bytes_allowed:
            raise TooLarge(f"the Hub sent more than {_bytes_allowed} bytes, the most this call reads")


def _heard_from_hub() -> None:
    global _deadline
    _deadline = time.monotonic() + hub_deadline_s()


def _time_left() -> float:
    return _deadline - time.monotonic()


@contextmanager
def _stopping_at_deadline():
    """A transport failure after the deadline ends the call instead of feeding the client's retries."""
    try:
        yield
    except RETRIED_FAILURES:
        if _time_left() <= 0:
            raise DeadlinePassed() from None
        raise


class _Body(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream):
        self._inner = inner

    def close(self) -> None:
        self._inner.close()


class _Received(_Body):
    """A response body: each chunk, and its end, is word from the Hub."""

    def __iter__(self):
        with _stopping_at_deadline():
            for chunk in self._inner:
                if chunk:
                    _heard_from_hub()
                    _count(len(chunk))
                yield chunk
        _heard_from_hub()


class _Sent(_Body):
    """A request body: the time it takes to send moves the deadline on. Measured from one chunk asked
    for to the next, i.e. writes that completed: a write the server never takes is not counted, and a
    small body (written at once into the socket's buffer) moves nothing."""

    def __iter__(self):
        global _deadline
        asked = None
        for chunk in self._inner:
            now = time.monotonic()
            if asked is not None:
                _deadline += now - asked
            asked = now
            yield chunk


def limit_request(request: httpx2.Request) -> None:
    """Request hook (every attempt and redirect): our timeouts where the client set none (it often passes
    None, which disables them), all clipped to the time left."""
    left = _time_left()
    if left <= 0:
        raise DeadlinePassed()
    limits = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        k: min(limits.get(k) or hub_timeout_s(), left) for k in ("connect", "read", "write", "pool")
    }
    if not isinstance(request.stream, _Sent):  # a redirect sends the same stream again
        request.stream = _Sent(request.stream)


def watch_response(response: httpx2.Response) -> None:
    """Response hook, before the body is read (headers alone are no word from the Hub)."""
    wait = _asked_wait_s(response) if response.status_code in RETRIED_STATUSES else 0
    if wait and wait >= _time_left():  # the client would sleep past the deadline before its next try
        raise DeadlinePassed(
            f"the Hub answered {response.status_code} and asked to wait {wait} s before "
            f"a retry, past the {hub_deadline_s():g} s deadline"
        )
    response.stream = _Received(response.stream)
    _last.response = response


def _asked_wait_s(response: httpx2.Response) -> int:
    from huggingface_hub.utils import parse_ratelimit_headers

    limit = parse_ratelimit_headers(response.headers)
    retry_after = response.headers.get("Retry-After", "").strip()
    return max(
        limit.reset_in_seconds if limit and limit.remaining == 0 else 0,
        int(retry_after) if retry_after.isdigit() else 0,
    )


class BoundedClient(httpx2.Client):
    """The Hub client's session: failures while waiting for the headers, after the deadline, end the call. A
    subclass rather than a transport of our own, so that httpx still mounts the proxies the environment names."""

    def send(self, request: httpx2.Request, **kwargs) -> httpx2.Response:
        with _stopping_at_deadline():
            return super().send(request, **kwargs)


# --------------------------------------------------------------------------------------------
# answers the client could not read

EXPECTED = {
    "tree": "the repo's file list",
    "paths-info": "the files' details",
    "refs": "the repo's branches and tags",
    "preupload": "the files' upload modes",
    "commit": "the new commit",
    "branch": "the new branch",
    "tag": "the new tag",
}


def unreadable_answer(exc: BaseException) -> str | None:
    """When `exc` is the client failing to read the Hub's last 2xx answer as the JSON it expects: what
    the Hub sent and what was expected, in one clause. Else None."""
    response = getattr(_last, "response", None)
    if response is None or not response.is_success:
        return None
    if isinstance(exc, json.JSONDecodeError):
        sent = "text that is not JSON"
    elif isinstance(exc, SHAPE_ERRORS):
        sent = "JSON of another shape"
    else:
        return None
    return (
        f"the Hub at {response.url.copy_with(query=None)} answered {response.status_code} with {sent} "
        f"({_excerpt(response)}), expected {_expected_answer(response.url.path)}"
    )


def _expected_answer(path: str) -> str:
    if path.endswith("/api/repos/create"):
        return "the new repo's URL"
    if path.endswith("/info/lfs/objects/batch"):
        return "LFS upload instructions"
    m = re.search(r"/api/(?:models|datasets|spaces)/[^/]+/[^/]+(?:/([^/]+))?", path)
    return EXPECTED.get(m.group(1), "the repo's details") if m else "a JSON answer of the Hub API"


def _excerpt(response: httpx2.Response, size: int = 60) -> str:
    try:
        text = printable(response.content[: 4 * size].decode("utf-8", "replace"))
    except httpx2.ResponseNotRead:
        return "a body not read"
    if not text:
        return "an empty body"
    return repr(text if len(text) <= size else text[:size] + "…")
