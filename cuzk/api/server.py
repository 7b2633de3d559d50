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
part of a request is still awaited (no ASGI layer sees a connection before its headers are
parsed; docs/interfaces.md says why no public hook does this, and
tests/cuzk/api/test_api_server_uvicorn_contract.py checks the internals it relies on):

- a new connection must deliver its complete request headers within ``header_timeout_s`` of
  connecting (so a connection that connects and sends nothing is closed then too); on a
  kept-alive connection the next request's headers must arrive within ``header_timeout_s`` of
  its first byte, and the wait for that first byte is uvicorn's keep-alive timeout;
- once the headers are in, the body must be complete within ``body_timeout_s``;
- past ``max_connections`` open connections a new one is answered 503 and closed at once;
- a client that stops reading its response is cut after ``write_timeout_s`` without reading:
  uvicorn pauses the app's ``send`` while the transport's write buffer is over its high-water
  mark, so without this bound such a client holds its request (and its slot in
  ``max_requests_in_flight``) forever. The deadline runs while writing is paused and restarts
  whenever the client takes some of what is queued for it (the transport's buffer plus the
  kernel's send queue, ``TIOCOUTQ``): the kernel lets the transport write again only once about
  half its send buffer (megabytes on a fast link) is free, so a time bound on the pause alone
  would also cut a reader that is slow but reading. When the deadline expires the connection is
  aborted (a plain close would wait to flush the buffer the client never drains) and the app
  sees a disconnect.

A request that runs out of time is answered ``408`` (JSON, ``Connection: close``) unless a
response has started, and the connection is closed either way. The header deadline is answered
even when nothing has arrived: under load a client's request can be in flight as the deadline
passes, and a connection closed without a word looks to it like a request lost (issue 19: in
2,000-connection floods some admitted connections that had sent a whole request got nothing);
408 tells it to send the request again. Every connection closed with an answer (408, 400, the
503 past the connection cap) lingers: its side is closed (FIN) but what the client still sends is
read and discarded for up to ``LINGER_S``, since closing a socket with unread bytes makes the
kernel send a reset, which can overtake the answer and destroy it. Lingering connections do not
count against ``max_connections`` (and are at most that many). Requests in flight are bounded in
the app (``cuzk.api.limits``), where the response can be JSON.

uvicorn answers malformed HTTP framing (what h11 refuses: a bad request line or header, a header
block over h11's size limit, bad chunked encoding, an unsupported transfer coding) with a plain
text 400; here it is JSON like every other error, names what h11 found wrong, and carries the
status h11 hints (431 for an oversize header block, 501 for a transfer coding it does not
implement), with ``Connection: close``.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import re
import struct
import sys
import termios
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from cuzk.config import Config

log = logging.getLogger("cuzk.api.server")

_DONE_STATES = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR, h11.SWITCHED_PROTOCOL)
_DETAIL_CHARS = 200  # h11's message may quote the client's bytes: enough to see what was wrong
_TIMER_SLACK_S = 0.005  # asyncio may run a timer this much early (its clock resolution)
LINGER_S = 2.0
"""After answering and closing its side, how long a connection still reads (and discards) what
the client sends, so a request arriving late meets no reset that would destroy the answer."""
_BYTEARRAY = re.compile(r"bytearray\((b(['\"]).*?\2)\)")


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


def malformed_request_answer(exc: BaseException | None, max_header_bytes: int) -> bytes:
    """The JSON answer to a request h11 could not parse: h11's status hint and its reason."""
    status = getattr(exc, "error_status_hint", 400) if exc is not None else 400
    if status not in (400, 431, 501):
        status = 400
    detail = "unparseable request"
    if exc is not None:  # h11 quotes the offending bytes as bytearray(b'...'): keep the b'...'
        detail = _BYTEARRAY.sub(r"\1", str(exc))[:_DETAIL_CHARS]
    if status == 431:
        message = (
            f"request header fields too large: over {max_header_bytes} bytes of request line"
            f" and headers buffered without their end ({detail})"
        )
    elif status == 501:
        message = f"not implemented: {detail}"
    else:
        message = f"malformed HTTP request: {detail}"
    return _raw_response(status, HTTPStatus(status).phrase, message)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with read and write deadlines, a connection cap, and JSON answers
    to malformed HTTP."""

    header_timeout_s: float = 5.0
    body_timeout_s: float = 30.0
    write_timeout_s: float = 30.0
    max_connections: int = 1024
    on_close: Callable[[str], None] | None = None  # told the reason of each connection it cuts
    # Per server (protocol_class makes one per configuration): answered, closing, still read.
    lingering: ClassVar[set[GuardedH11Protocol]] = set()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._unsent = 0  # bytes the client had not taken at the last check while paused
        self._last_progress = 0.0  # loop time the client last took some
        self._phase: str | None = None  # "headers" | "body" while a deadline runs
        self._refused = False
        self._lingering: asyncio.TimerHandle | None = None

    # -- deadlines

    def _arm(self, phase: str) -> None:
        self._disarm()
        self._phase = phase
        if phase == "headers":
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

    def _close(self, reason: str, why: str, response: bytes | None, abort: bool = False) -> None:
        """Cut the connection (``abort``: drop what is still buffered for the client)."""
        if self.transport.is_closing() and not abort:
            return
        if self.on_close is not None:
            self.on_close(reason)
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.debug("closing the connection from %s: %s", client, why)
        if response is not None:
            self.transport.write(response)
        if self.cycle is not None and not self.cycle.response_complete:
            # The app (reading the body, or waiting to write) sees a disconnect, never a partial
            # body, and writes nothing more.
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        if abort:
            self.transport.abort()
        elif (
            response is not None
            and self.transport.can_write_eof()
            and len(self.lingering) < self.max_connections  # bounded, as open connections are
        ):
            self._linger()
        else:
            self.transport.close()

    def _linger(self) -> None:
        """Close our side once the answer is sent, but keep reading (and discarding) for up to
        ``LINGER_S``: closing a socket with unread bytes makes the kernel send a reset, and a
        reset can reach the client before it has read the answer, which it then never sees."""
        self._disarm()
        self.transport.write_eof()
        self.lingering.add(self)
        self._lingering = self.loop.call_later(LINGER_S, self.transport.close)

    def _on_header_timeout(self) -> None:
        self._deadline = None
        why = f"request headers not received within {self.header_timeout_s:g} s"
        # Answered even when nothing arrived: a request may be in flight (a client that sent
        # it just now must learn it was not taken; 408 tells it to repeat the request).
        response = _raw_response(408, "Request Timeout", f"{why} (server.header_timeout_s)")
        self._close("header_timeout", why, response)

    def _on_body_timeout(self) -> None:
        self._deadline = None
        why = f"request body not received within {self.body_timeout_s:g} s of its headers"
        response = None
        if self.cycle is None or not self.cycle.response_started:
            response = _raw_response(408, "Request Timeout", f"{why} (server.body_timeout_s)")
        self._close("body_timeout", why, response)

    def _unsent_bytes(self) -> int:
        """What the client has not taken yet: the transport's buffer and the kernel's send queue
        (where the kernel does not say, the buffer alone, which holds still while paused, so the
        deadline then runs from the pause)."""
        unsent = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                queued = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4)
                unsent += struct.unpack("i", queued)[0]
            except (OSError, ValueError):
                pass
        return unsent

    def _check_writing(self) -> None:
        """While paused: cut the client once it has taken nothing for ``write_timeout_s``."""
        now = self.loop.time()
        unsent = self._unsent_bytes()
        if unsent < self._unsent:
            self._unsent, self._last_progress = unsent, now
        left = self._last_progress + self.write_timeout_s - now
        if left <= _TIMER_SLACK_S:
            self._write_deadline = None
            why = (
                f"the client read nothing of its response for {self.write_timeout_s:g} s"
                " (server.write_timeout_s)"
            )
            self._close("write_timeout", why, None, abort=True)
            return
        self._write_deadline = self.loop.call_later(
            min(left, self.write_timeout_s / 4), self._check_writing
        )

    def _stop_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    # -- uvicorn / asyncio protocol hooks

    def pause_writing(self) -> None:
        """The transport's buffer is over its high-water mark: the client must read within
        ``write_timeout_s``."""
        super().pause_writing()
        if self._write_deadline is None:
            self._unsent, self._last_progress = self._unsent_bytes(), self.loop.time()
            self._write_deadline = self.loop.call_later(
                self.write_timeout_s / 4, self._check_writing
            )

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stop_write_deadline()

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this from its ``except h11.RemoteProtocolError`` block: the exception
        being handled says what was wrong and which status h11 suggests."""
        exc = sys.exception()
        max_header_bytes = (
            self.config.h11_max_incomplete_event_size
            or h11._connection.DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        )
        response = None
        if self.cycle is None or not self.cycle.response_started:
            response = malformed_request_answer(exc, max_header_bytes)
        self._disarm()
        self._close("malformed_request", f"{msg} ({exc})", response)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) - len(self.lingering) > self.max_connections:
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
        if self._refused or self._lingering is not None:
            return  # answered and closing: what the client still sends is discarded
        if self._phase is None and self.conn.their_state is h11.IDLE:
            # The first byte of the next request on a kept-alive connection.
            self._arm("headers")
        super().data_received(data)
        if not self.transport.is_closing():
            self._follow_client_state()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE:
            self._disarm()  # uvicorn's keep-alive timer now bounds the wait for the next request
        else:
            self._follow_client_state()

    def shutdown(self) -> None:
        """The server is stopping: a connection already answered and lingering just closes."""
        if self._lingering is not None:
            self.transport.close()
            return
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._stop_write_deadline()
        if self._lingering is not None:
            self._lingering.cancel()
            self.lingering.discard(self)
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
            "write_timeout_s": s.write_timeout_s,
            "max_connections": s.max_connections,
            "on_close": staticmethod(on_close) if on_close is not None else None,
            "lingering": set(),
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
