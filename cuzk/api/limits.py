"""A bound on requests being handled at once, answered 503 with JSON past it.

The connection cap and the read deadlines live in the server protocol (``cuzk.api.server``);
this bound is on work the app has accepted (a long-poll holds its slot for its whole wait), so it
is counted where requests enter the app. Liveness and readiness probes are never refused: an
overloaded server is alive, and its probes must say so quickly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Scope = dict[str, Any]

EXEMPT_PATHS = frozenset({"/healthz", "/readyz"})


class InFlightLimit:
    """ASGI middleware: at most ``limit`` HTTP requests inside the app at once."""

    def __init__(
        self, app: Any, limit: int, on_refuse: Callable[[str], None] | None = None
    ) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0
        self.on_refuse = on_refuse

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            if self.on_refuse is not None:
                self.on_refuse("too_many_requests")
            body = json.dumps(
                {
                    "error": f"the server is handling {self.limit} requests, its limit"
                    " (server.max_requests_in_flight); retry shortly"
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"retry-after", b"1"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
