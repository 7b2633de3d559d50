"""What the front end adds to every operation of the OpenAPI document.

The routes document their own answers (``cuzk.api.openapi.OPERATIONS``). In front of them sit
the bearer token check (``cuzk.api.auth``), the bounds on requests in flight and on long-polls
(``cuzk.api.limits``) and the server protocol's deadlines, connection cap and answers to
malformed HTTP (``cuzk.api.server``). Their answers are the same for every route, so they are
mapped over the operation list here, from the same facts the front end acts on, for the server
as configured: the security scheme appears only when a token is set, ``/metrics`` needs it only
with ``server.metrics_require_auth``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from cuzk.api.auth import OPEN_PATHS as AUTH_OPEN_PATHS
from cuzk.api.limits import EXEMPT_PATHS as LIMIT_EXEMPT_PATHS
from cuzk.api.limits import LONG_POLL_PATH
from cuzk.api.openapi import OPERATIONS, RETRY_AFTER, Operation, Reply, openapi_schema
from cuzk.protocol import Error

HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")

BEARER_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "description": "The server's token (server.auth_token or auth_token_file), sent as"
    " `Authorization: Bearer <token>`.",
}
UNAUTHORIZED = Reply(
    "No bearer token, or not the server's (server.auth_token); nothing was done.",
    headers={
        "WWW-Authenticate": {
            "description": 'Bearer realm="cuzk", with error="invalid_token" for a wrong token.',
            "required": True,
            "schema": {"type": "string"},
        }
    },
)
TOO_SLOW = Reply(
    "The request's headers (server.header_timeout_s) or body (server.body_timeout_s) did not"
    " arrive in time; the connection is closed after this answer."
)
MALFORMED = Reply(
    "Malformed HTTP (a bad request line, header, Content-Length or chunked encoding, no Host"
    " header), named in the error; the connection is closed after this answer."
)
HEADERS_TOO_LARGE = Reply(
    "The request line and headers ran past the server's header size limit (16 KiB buffered"
    " without their end); the connection is closed after this answer."
)
TRANSFER_CODING_NOT_IMPLEMENTED = Reply(
    "A Transfer-Encoding other than chunked; the connection is closed after this answer."
)
TOO_MANY_LONG_POLLS = Reply(
    "A long-poll (?wait=) past server.max_long_polls_per_client from this client or"
    " server.max_long_polls in all; poll without ?wait= or retry after Retry-After seconds.",
    headers=RETRY_AFTER,
)
BUSY = "the server is at server.max_connections connections"
BUSY_LIMITED = (
    "the server is at server.max_requests_in_flight requests or server.max_connections connections"
)


def _merged(own: Reply | None, front: Reply, also: str) -> Reply:
    """The front end's answer under a status code the route may use for its own: one reply
    whose description says both and whose body is either shape (the front end's is Error)."""
    if own is None:
        return front
    shape = own.shape if own.shape is Error or own.shape is None else own.shape | Error
    return dataclasses.replace(own, description=f"{own.description} {also}", shape=shape)


def _busy(own: Reply | None, limited: bool) -> Reply:
    """The front end's 503, merged with a route's own (readiness, draining)."""
    why = BUSY_LIMITED if limited else BUSY
    front = Reply(f"Busy: {why}; retry after Retry-After seconds.", headers=RETRY_AFTER)
    return _merged(own, front, f"Or busy: {why}; retry shortly.")


def front_end_operations(
    operations: Iterable[Operation], *, auth: bool, metrics_require_auth: bool = False
) -> list[Operation]:
    """Each operation with the answers the front end can give in front of it."""
    open_paths = set(AUTH_OPEN_PATHS) | (set() if metrics_require_auth else {"/metrics"})
    out = []
    for op in operations:
        replies = dict(op.replies)
        extra = dict(op.extra)
        if auth:
            if op.path in open_paths:
                extra["security"] = []
            else:
                extra["security"] = [{"bearerAuth": []}]
                replies[401] = UNAUTHORIZED
        replies[400] = _merged(replies.get(400), MALFORMED, f"Or: {MALFORMED.description}")
        replies.setdefault(408, TOO_SLOW)
        replies.setdefault(431, HEADERS_TOO_LARGE)
        replies.setdefault(501, TRANSFER_CODING_NOT_IMPLEMENTED)
        replies[503] = _busy(replies.get(503), op.path not in LIMIT_EXEMPT_PATHS)
        if op.method == "get" and op.path == LONG_POLL_PATH:
            replies[429] = TOO_MANY_LONG_POLLS
        out.append(dataclasses.replace(op, replies=replies, extra=extra))
    return out


def front_end_document(
    *, auth: bool, metrics_require_auth: bool = False, operations: Iterable[Operation] = OPERATIONS
) -> dict[str, Any]:
    """The document /openapi.json serves for a server configured this way."""
    doc = openapi_schema(
        front_end_operations(operations, auth=auth, metrics_require_auth=metrics_require_auth)
    )
    if auth:
        doc["components"]["securitySchemes"] = {"bearerAuth": dict(BEARER_SCHEME)}
        doc["security"] = [{"bearerAuth": []}]
    return doc
