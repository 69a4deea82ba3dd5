"""The Hub call's deadline (`hub/deadline.py`) on a client built as `hub.client` builds its session (the request and
response hooks, the bounded transport), against a fake transport: no request starts after the deadline, a wait the
Hub asks for past it is not waited, every timeout is clipped to the time left, a transport failure after it ends
the call, and a body that keeps arriving moves it on, past the deadline it started with."""

from __future__ import annotations

import time

import httpx2
import pytest

from eaglezoo.hub import deadline
from eaglezoo.hub.deadline import BoundedClient, DeadlinePassed, limit_request, watch_response

URL = "http://hub.test/api/models/tester/drafter"


@pytest.fixture(autouse=True)
def settings(monkeypatch):
    """A 3 s deadline and a 60 s per-request limit (EAGLEZOO_HUB_DEADLINE, EAGLEZOO_HUB_TIMEOUT)."""
    monkeypatch.setattr(deadline, "hub_deadline_s", lambda: 3.0)
    monkeypatch.setattr(deadline, "hub_timeout_s", lambda: 60.0)
    monkeypatch.setattr(deadline, "_deadline", deadline._deadline)  # restored after each test


def client(handler) -> httpx2.Client:
    return BoundedClient(
        event_hooks={"request": [limit_request], "response": [watch_response]},
        transport=httpx2.MockTransport(handler),
        timeout=None,
    )


def left(seconds: float) -> None:
    deadline._deadline = time.monotonic() + seconds


def test_no_request_starts_after_the_deadline():
    sent = []
    left(-0.1)
    with pytest.raises(DeadlinePassed, match="the Hub did not answer within 3 s"):
        client(lambda request: sent.append(request) or httpx2.Response(200)).get(URL)
    assert sent == []


@pytest.mark.parametrize("status", [429, 503])
def test_a_wait_asked_past_the_deadline_is_not_waited(status):
    left(2.5)
    busy = client(lambda request: httpx2.Response(status, headers={"Retry-After": "3600"}))
    with pytest.raises(DeadlinePassed) as stopped:
        busy.get(URL)
    assert str(stopped.value) == (
        f"the Hub answered {status} and asked to wait 3600 s before a retry, past the 3 s deadline"
    )


def test_a_wait_within_the_deadline_is_left_to_the_clients_retries():
    left(2.5)
    assert client(lambda request: httpx2.Response(429, headers={"Retry-After": "1"})).get(URL).status_code == 429
    assert client(lambda request: httpx2.Response(404, headers={"Retry-After": "3600"})).get(URL).status_code == 404


def test_every_timeout_is_ours_where_the_client_set_none_and_clipped_to_the_time_left():
    seen = []

    def handler(request):
        seen.append(request.extensions["timeout"])
        return httpx2.Response(200, json={})

    left(1000)
    client(handler).get(URL)
    client(handler).get(URL, timeout=httpx2.Timeout(5.0, read=None))
    left(2)
    client(handler).get(URL, timeout=httpx2.Timeout(5.0))
    assert seen[0] == {"connect": 60.0, "read": 60.0, "write": 60.0, "pool": 60.0}
    assert seen[1] == {"connect": 5.0, "read": 60.0, "write": 5.0, "pool": 5.0}
    assert set(seen[2]) == {"connect", "read", "write", "pool"} and all(1 < t <= 2 for t in seen[2].values()), seen[2]


def test_a_transport_failure_after_the_deadline_ends_the_call_and_before_it_is_retried():
    def times_out_after(seconds):
        def handler(request):
            left(seconds)  # the time the wait for an answer took
            raise httpx2.ReadTimeout("timed out", request=request)

        return handler

    with pytest.raises(DeadlinePassed):
        client(times_out_after(-0.1)).get(URL)
    left(3)
    with pytest.raises(httpx2.ReadTimeout):  # an error of the client's own: its retry loop takes it
        client(times_out_after(1.0)).get(URL)


class Trickle(httpx2.SyncByteStream):
    """A body sent in pieces, each `pause` s apart: together longer than the deadline."""

    def __init__(self, pieces: int, pause: float):
        self.pieces, self.pause = pieces, pause

    def __iter__(self):
        for _ in range(self.pieces):
            time.sleep(self.pause)
            yield b"x" * 1024


def test_a_body_that_keeps_arriving_outlives_the_deadline():
    left(0.3)
    response = client(lambda request: httpx2.Response(200, stream=Trickle(pieces=5, pause=0.2))).get(URL)
    assert response.content == b"x" * 5 * 1024  # 1 s of pieces, 0.3 s of deadline left when it started
    assert deadline._time_left() > 2.5  # word from the Hub: the whole deadline ahead again
