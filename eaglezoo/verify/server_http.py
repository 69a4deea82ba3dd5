"""One HTTP request to a running server, bounded three ways:

- a whole-request deadline (`settings.endpoint_timeout_s`, EAGLEZOO_ENDPOINT_TIMEOUT; ABOUT_S for what the
  server says about itself): a timer shuts the request's sockets when it passes, so a server that trickles its
  answer a byte at a time, which no socket timeout catches, is cut when one that says nothing is;
- a total a command may set for all its requests together (`waiting_at_most`: doctor's EAGLEZOO_DOCTOR_DEADLINE),
  counted while any request is in flight, so that many answers each just in time cannot add up;
- no redirect to another origin (scheme, host, port): that host's answers would be taken for the server's.
  A redirect within the server is followed, as urllib does.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Self
from urllib.parse import urlsplit

from ..settings import endpoint_timeout_s

# What a server says about itself (/v1/models, /version, /server_info, /metrics) is served by its API process in
# milliseconds, even while its engine is busy generating: a server silent on it for this long is not answering.
ABOUT_S = 15.0


class TimedOut(Exception):
    def __init__(self, seconds: float, setting: str | None, whose: str | None):
        super().__init__(f"{seconds:g} s")
        # setting: the variable that set the bound (None: ABOUT_S); whose: the command's total, or None
        self.seconds, self.setting, self.whose = seconds, setting, whose


class Redirected(Exception):
    def __init__(self, location: str):
        super().__init__(location)
        self.location = location


class Budget:
    """The time a command may wait on a server in all: counted while at least one of its requests is in flight."""

    def __init__(self, seconds: float, setting: str, whose: str):
        self.seconds, self.setting, self.whose = seconds, setting, whose
        self._used, self._in_flight, self._since = 0.0, 0, 0.0
        self._lock = threading.Lock()

    def left(self) -> float:
        with self._lock:
            return self.seconds - self._used - (time.monotonic() - self._since if self._in_flight else 0.0)

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        with self._lock:
            if not self._in_flight:
                self._since = time.monotonic()
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if not self._in_flight:
                    self._used += time.monotonic() - self._since


_budget: ContextVar[Budget | None] = ContextVar("server_wait_budget", default=None)


@contextlib.contextmanager
def waiting_at_most(seconds: float, setting: str, whose: str) -> Iterator[None]:
    """Every request made inside (threads started with a copy of this context too) shares one total wait."""
    token = _budget.set(Budget(seconds, setting, whose))
    try:
        yield
    finally:
        _budget.reset(token)


class _Watch:
    """The sockets of one request (its same-origin redirects' too), shut down when its time is up."""

    def __init__(self, seconds: float):
        self.cut = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    def __enter__(self) -> Self:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            if self.cut:
                _shut(sock)

    def _cut(self) -> None:
        with self._lock:
            self.cut = True
            for sock in self._socks:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing left to cut
        sock.shutdown(socket.SHUT_RDWR)


def _watched(handler: type, watch: _Watch) -> urllib.request.BaseHandler:
    """urllib's HTTP(S) handler whose connections report their socket to `watch` as soon as they connect."""

    class Watched(handler):
        def do_open(self, http_class, req, **kwargs):
            class Connection(http_class):
                def connect(self):
                    super().connect()
                    watch.add(self.sock)

            return super().do_open(Connection, req, **kwargs)

    return Watched()


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return (
        parts.scheme.lower(),
        (parts.hostname or "").lower(),
        parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower()),
    )


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if origin(newurl) != origin(req.full_url):
            fp.close()
            raise Redirected(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def fetch(url: str, data: bytes | None, limit: int) -> bytes:
    """Up to `limit` + 1 bytes of the answer. Raises TimedOut, Redirected, or urllib's and http.client's errors;
    an HTTPError's body (up to 64 KiB, read within the deadline) is its `.body`. A request without a body (what
    the server says about itself) is bounded by ABOUT_S too."""
    budget = _budget.get()
    seconds, setting, whose = endpoint_timeout_s(), "EAGLEZOO_ENDPOINT_TIMEOUT", None
    if data is None and seconds > ABOUT_S:
        seconds, setting = ABOUT_S, None
    left = budget.left() if budget else seconds
    if budget and left < seconds:
        seconds, setting, whose = left, budget.setting, budget.whose
    if seconds <= 0:
        raise TimedOut(budget.seconds, setting, whose)
    watch = _Watch(seconds)
    opener = urllib.request.build_opener(
        _watched(urllib.request.HTTPHandler, watch), _watched(urllib.request.HTTPSHandler, watch), _SameOrigin
    )
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with budget.waiting() if budget else contextlib.nullcontext(), watch:
        try:
            raw = _read(opener, request, seconds, limit)
        except Exception as exc:
            if not (watch.cut or _timeout(exc)):
                raise
        else:
            if not watch.cut:  # cut short: what came may be a truncated answer that still parses
                return raw
    raise TimedOut(budget.seconds if whose else seconds, setting, whose)


def _read(opener: urllib.request.OpenerDirector, request: urllib.request.Request, seconds: float, limit: int) -> bytes:
    try:
        with opener.open(request, timeout=seconds) as resp:
            return resp.read(limit + 1)
    except urllib.error.HTTPError as exc:
        exc.body = _error_body(exc)
        raise


def _error_body(exc) -> bytes:
    try:
        return exc.read(1 << 16)
    except Exception:  # noqa: BLE001 - the body of an error page is optional information
        return b""


def _timeout(exc: BaseException) -> bool:
    reason = getattr(exc, "reason", exc)
    return isinstance(exc, TimeoutError) or isinstance(reason, TimeoutError)
