"""Bounds on requests being handled at once, answered with JSON past them.

The connection cap and the read deadlines live in the server protocol (``cuzk.api.server``);
these bounds are on work the app has accepted, so they are counted where requests enter it:

- a long-poll (``GET /v1/proofs/{id}?wait=N``, N not zero) spends its time waiting, not working,
  so it has its own bounds, ``server.max_long_polls`` in all and
  ``server.max_long_polls_per_client`` from one client address, answered 429 past them. It
  never takes a slot of the bound below, so however many a client holds, submits are taken
  (issue 19: 256 long-polls once made every other request 503 for up to 300 s);
- every other request counts against ``server.max_requests_in_flight``, 503 past it. ``/readyz``
  reports that bound as reached (a submit would be refused), so a load balancer can tell.

Liveness and readiness probes are never refused: an overloaded server is alive, and its probes
must say so quickly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

Scope = dict[str, Any]

EXEMPT_PATHS = frozenset({"/healthz", "/readyz"})
LONG_POLL_PATH = "/v1/proofs/{job_id}"  # the route (OpenAPI spelling) whose GET may wait
_LONG_POLL = re.compile(r"/v1/proofs/[^/]+")


def is_long_poll(scope: Scope) -> bool:
    """A GET of a job with a ``wait`` that is not zero (an invalid one too: the route answers
    it 400 at once, and counting it here costs nothing)."""
    if scope["method"] != "GET" or not _LONG_POLL.fullmatch(scope["path"]):
        return False
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "wait":
            try:
                if float(value) == 0:
                    continue
            except ValueError:
                pass
            return True
    return False


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", b"1"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Admission:
    """What is inside the app now: requests against ``limit``, long-polls in all and per
    client. Shared by the middleware that counts and ``/readyz`` that reports."""

    def __init__(self, limit: int, long_polls: int, long_polls_per_client: int) -> None:
        self.limit = limit
        self.long_poll_limit = long_polls
        self.long_poll_client_limit = long_polls_per_client
        self.in_flight = 0
        self.long_polls = 0
        self.long_polls_by_client: dict[str, int] = {}

    def submits_refused(self) -> bool:
        """Whether a submit arriving now would be answered 503 (the bound is reached)."""
        return self.in_flight >= self.limit


class InFlightLimit:
    """ASGI middleware: at most ``admission.limit`` requests inside the app at once, and
    long-polls within their own bounds, apart from it."""

    def __init__(
        self, app: Any, admission: Admission, on_refuse: Callable[[str], None] | None = None
    ) -> None:
        self.app = app
        self.admission = admission
        self.on_refuse = on_refuse

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        if is_long_poll(scope):
            await self._long_poll(scope, receive, send)
            return
        a = self.admission
        if a.in_flight >= a.limit:
            if self.on_refuse is not None:
                self.on_refuse("too_many_requests")
            await _refuse(
                send,
                503,
                f"the server is handling {a.limit} requests, its limit"
                " (server.max_requests_in_flight); retry shortly",
            )
            return
        a.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            a.in_flight -= 1

    async def _long_poll(self, scope: Scope, receive: Any, send: Any) -> None:
        a = self.admission
        client = scope.get("client")
        who = str(client[0]) if client else ""
        mine = a.long_polls_by_client.get(who, 0)
        if a.long_polls >= a.long_poll_limit or mine >= a.long_poll_client_limit:
            if self.on_refuse is not None:
                self.on_refuse("too_many_long_polls")
            if mine >= a.long_poll_client_limit:
                why = (
                    f"this client has {a.long_poll_client_limit} long-polls waiting, its limit"
                    " (server.max_long_polls_per_client)"
                )
            else:
                why = (
                    f"the server has {a.long_poll_limit} long-polls waiting, its limit"
                    " (server.max_long_polls)"
                )
            await _refuse(send, 429, f"{why}; poll without ?wait= or retry shortly")
            return
        a.long_polls += 1
        a.long_polls_by_client[who] = mine + 1
        try:
            await self.app(scope, receive, send)
        finally:
            a.long_polls -= 1
            left = a.long_polls_by_client[who] - 1
            if left:
                a.long_polls_by_client[who] = left
            else:
                del a.long_polls_by_client[who]
