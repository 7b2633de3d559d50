"""The HTTP/1.1 server under the API: uvicorn, with the deadlines it lacks added per connection.

Why uvicorn, and why a protocol subclass. Of the ASGI servers considered:

- uvicorn (h11 or httptools) closes an idle kept-alive connection after ``timeout_keep_alive``,
  but only once a response has been sent: a connection that connects and says nothing, or
  trickles a request line, headers or a body one byte at a time, is held forever. Its
  ``limit_concurrency`` answers 503 past a count of connections *plus* tasks, one number for two
  different resources.
- hypercorn has ``keep_alive_timeout`` and ``read_timeout``, but the read timeout bounds each
  socket read, not the whole request, so one byte every few seconds still holds a connection.
- granian has a total header-read deadline (hyper's ``header_read_timeout``) but none for the
  body, and runs the app in worker processes of its own, while cuzk's engine (resident proving
  keys, GPU workers) must live in the serving process.

So cuzk keeps uvicorn (which the drain on SIGTERM and the tests already build on) and adds the
missing bounds in an ``H11Protocol`` subclass, where the h11 state machine says exactly which
part of a request is still awaited:

- a new connection must deliver its complete request headers within ``header_timeout_s`` of
  connecting (so a connection that connects and sends nothing is closed then too); on a
  kept-alive connection the next request's headers must arrive within ``header_timeout_s`` of
  its first byte, and the wait for that first byte is uvicorn's keep-alive timeout;
- once the headers are in, the body must be complete within ``body_timeout_s``;
- past ``max_connections`` open connections a new one is answered 503 and closed at once.

A request that runs out of time is answered ``408`` (JSON, ``Connection: close``) when some of it
has arrived and no response has started, and the connection is closed either way. Requests in
flight are bounded in the app (``cuzk.api.limits``), where the response can be JSON.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from cuzk.config import Config

log = logging.getLogger("cuzk.api.server")

_DONE_STATES = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR, h11.SWITCHED_PROTOCOL)


def _raw_response(status: int, reason: str, message: str, extra: str = "") -> bytes:
    """A complete ``Connection: close`` JSON response, written below h11 (which cannot answer a
    request it has not seen the headers of)."""
    body = json.dumps({"error": message}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        f"{extra}"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body deadlines and a connection cap."""

    header_timeout_s: float = 5.0
    body_timeout_s: float = 30.0
    max_connections: int = 1024
    on_close: Callable[[str], None] | None = None  # told the reason of each connection it cuts

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: str | None = None  # "headers" | "body" while a deadline runs
        self._request_bytes = 0  # bytes of the request whose headers are awaited
        self._refused = False

    # -- deadlines

    def _arm(self, phase: str) -> None:
        self._disarm()
        self._phase = phase
        if phase == "headers":
            self._request_bytes = 0
            delay, handler = self.header_timeout_s, self._on_header_timeout
        else:
            delay, handler = self.body_timeout_s, self._on_body_timeout
        self._deadline = self.loop.call_later(delay, handler)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = None
        self._phase = None

    def _follow_client_state(self) -> None:
        """Move the deadline to what h11 says the client still owes us."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body")
        elif state in _DONE_STATES:
            self._disarm()

    def _close(self, reason: str, why: str, response: bytes | None) -> None:
        if self.transport.is_closing():
            return
        if self.on_close is not None:
            self.on_close(reason)
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.debug("closing the connection from %s: %s", client, why)
        if response is not None:
            self.transport.write(response)
        if self.cycle is not None and not self.cycle.response_complete:
            # The app (if it is reading the body) sees a disconnect, never a partial body.
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()

    def _on_header_timeout(self) -> None:
        self._deadline = None
        why = f"request headers not received within {self.header_timeout_s:g} s"
        response = None
        if self._request_bytes:
            response = _raw_response(
                408,
                "Request Timeout",
                f"{why} (server.header_timeout_s)",
            )
        self._close("header_timeout", why, response)

    def _on_body_timeout(self) -> None:
        self._deadline = None
        why = f"request body not received within {self.body_timeout_s:g} s of its headers"
        response = None
        if self.cycle is None or not self.cycle.response_started:
            response = _raw_response(408, "Request Timeout", f"{why} (server.body_timeout_s)")
        self._close("body_timeout", why, response)

    # -- uvicorn / asyncio protocol hooks

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self._refused = True
            self._close(
                "too_many_connections",
                f"more than {self.max_connections} open connections",
                _raw_response(
                    503,
                    "Service Unavailable",
                    f"the server has {self.max_connections} connections open, its limit"
                    " (server.max_connections); retry shortly",
                    "retry-after: 1\r\n",
                ),
            )
            return
        self._arm("headers")

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._phase is None and self.conn.their_state is h11.IDLE:
            # The first byte of the next request on a kept-alive connection.
            self._arm("headers")
        if self._phase == "headers":
            self._request_bytes += len(data)
        super().data_received(data)
        if not self.transport.is_closing():
            self._follow_client_state()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE:
            self._disarm()  # uvicorn's keep-alive timer now bounds the wait for the next request
        else:
            self._follow_client_state()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def protocol_class(
    config: Config, on_close: Callable[[str], None] | None = None
) -> type[GuardedH11Protocol]:
    """The protocol class with this configuration's bounds (uvicorn instantiates it per
    connection and passes only its own config)."""
    s = config.server
    return type(
        "CuzkH11Protocol",
        (GuardedH11Protocol,),
        {
            "header_timeout_s": s.header_timeout_s,
            "body_timeout_s": s.body_timeout_s,
            "max_connections": s.max_connections,
            "on_close": staticmethod(on_close) if on_close is not None else None,
        },
    )


def _front_metrics_callback(app: Any) -> Callable[[str], None] | None:
    front = getattr(getattr(app, "state", None), "front_metrics", None)
    return front.connection_closed if front is not None else None


def uvicorn_config(app: Any, config: Config, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration ``cuzk serve`` (and the tests) run the app under."""
    s = config.server
    values: dict[str, Any] = {
        "host": s.host,
        "port": s.port,
        "http": protocol_class(config, _front_metrics_callback(app)),
        "timeout_keep_alive": s.keepalive_timeout_s,
        "lifespan": "off",
        "access_log": False,
        "timeout_graceful_shutdown": 5,
        "ws": "none",
    }
    values.update(overrides)
    return uvicorn.Config(app, **values)
