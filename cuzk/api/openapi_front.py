"""What the front end adds to every operation of the OpenAPI document.

The routes document their own answers (``cuzk.api.openapi``). In front of them sit the bearer
token check (``cuzk.api.auth``), the bound on requests in flight (``cuzk.api.limits``) and the
server protocol's deadlines and connection cap (``cuzk.api.server``); behind them, a fault in a
server-side file or an unexpected error is a 500. Those answers are the same for every route, so
they are added here, from the same facts the front end acts on, for the server as configured:
the security scheme appears only when a token is set, ``/metrics`` needs it only with
``server.metrics_require_auth``.
"""

from __future__ import annotations

import copy
from typing import Any

from cuzk.api.auth import OPEN_PATHS as AUTH_OPEN_PATHS
from cuzk.api.limits import EXEMPT_PATHS as LIMIT_EXEMPT_PATHS

HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")

SERVER_FAULT: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "additionalProperties": False,
    "description": "A server-side fault. When a server-side file (proving key, circuit) is at"
    " fault, `file` names it, `section` the part of it that is wrong (when known) and `problem`"
    " says what is wrong; `error` repeats all of it for a human.",
    "properties": {
        "error": {"type": "string"},
        "file": {"type": "string"},
        "section": {"type": "string"},
        "problem": {"type": "string"},
    },
}

_ERROR_JSON = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}


def _unauthorized() -> dict[str, Any]:
    return {
        "description": "No bearer token, or not the server's (server.auth_token); nothing was"
        " done.",
        "headers": {
            "WWW-Authenticate": {
                "description": 'Bearer realm="cuzk", with error="invalid_token" for a wrong one.',
                "required": True,
                "schema": {"type": "string"},
            }
        },
        "content": copy.deepcopy(_ERROR_JSON),
    }


def _busy(limited: bool) -> str:
    if limited:
        return (
            "The server is at server.max_requests_in_flight requests or server.max_connections"
            " connections; retry after Retry-After seconds."
        )
    return "The server is at server.max_connections connections; retry shortly."


def _server_fault(existing: dict[str, Any] | None) -> dict[str, Any]:
    description = "An unexpected server fault."
    if existing and existing.get("description"):
        description = existing["description"]
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ServerFault"}}},
    }


def _merge_503(existing: dict[str, Any] | None, limited: bool) -> dict[str, Any]:
    """A route's own 503 (readiness, draining) and the front end's, as one response."""
    busy = {"$ref": "#/components/schemas/Error"}
    if existing is None:
        return {"description": _busy(limited), "headers": copy.deepcopy(_RETRY_AFTER),
                "content": {"application/json": {"schema": busy}}}  # fmt: skip
    merged = copy.deepcopy(existing)
    own = merged.get("content", {}).get("application/json", {}).get("schema")
    merged["description"] = f"{merged.get('description', '')} Or: {_busy(limited)}".strip()
    if own is not None and own != busy:
        merged["content"]["application/json"]["schema"] = {"anyOf": [own, busy]}
    else:
        merged.setdefault("content", {"application/json": {"schema": busy}})
    return merged


def document_front_end(
    schema: dict[str, Any], *, auth: bool, metrics_require_auth: bool = False
) -> dict[str, Any]:
    """A copy of ``schema`` with the front end's responses and security on every operation."""
    doc = copy.deepcopy(schema)
    components = doc.setdefault("components", {})
    components.setdefault("schemas", {}).setdefault("ServerFault", copy.deepcopy(SERVER_FAULT))
    open_paths = set(AUTH_OPEN_PATHS) | (set() if metrics_require_auth else {"/metrics"})
    if auth:
        components["securitySchemes"] = {
            "bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "description": "The server's token (server.auth_token or auth_token_file),"
                " sent as `Authorization: Bearer <token>`.",
            }
        }
        doc["security"] = [{"bearerAuth": []}]
    for path, item in doc.get("paths", {}).items():
        for method in HTTP_METHODS:
            op = item.get(method)
            if op is None:
                continue
            responses = op.setdefault("responses", {})
            if auth:
                if path in open_paths:
                    op["security"] = []
                else:
                    op["security"] = [{"bearerAuth": []}]
                    responses["401"] = _unauthorized()
            responses.setdefault(
                "408",
                {
                    "description": "The request's headers (server.header_timeout_s) or body"
                    " (server.body_timeout_s) did not arrive in time; the connection is closed.",
                    "content": copy.deepcopy(_ERROR_JSON),
                },
            )
            responses["500"] = _server_fault(responses.get("500"))
            responses["503"] = _merge_503(responses.get("503"), path not in LIMIT_EXEMPT_PATHS)
    return doc
