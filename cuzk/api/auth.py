"""Optional bearer-token authentication for the HTTP API.

With a token configured (``server.auth_token``, ``server.auth_token_file``, or their
``CUZK_SERVER_*`` variables), every request needs ``Authorization: Bearer <token>`` except the
liveness and readiness probes and, unless ``server.metrics_require_auth`` is set, ``/metrics``
(so a Prometheus scrape needs no secret). A refused request is answered 401 with a
``WWW-Authenticate`` challenge before the app sees it, so it changes nothing. The comparison is
constant-time (``hmac.compare_digest``) so response timing does not leak the token.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuzk.config import ConfigError, ServerConfig
from cuzk.logsafe import loggable

log = logging.getLogger("cuzk.api.auth")

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
MIN_TOKEN_CHARS = 16
_TOKEN_SHAPE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what an HTTP header carries intact
REALM = "cuzk"


def _check_token(token: str, where: str) -> str:
    if not _TOKEN_SHAPE.fullmatch(token):
        raise ConfigError([f"{where}: the token must be visible ASCII characters without spaces"])
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            [f"{where}: the token is {len(token)} characters; use at least {MIN_TOKEN_CHARS}"]
        )
    return token


def resolve_token(server: ServerConfig) -> str | None:
    """The configured token, read from its file if need be; None when authentication is off.

    Raises ConfigError naming the key when both sources are set, the file cannot be read, or
    the token is empty or too short to be a secret.
    """
    if server.auth_token and server.auth_token_file:
        raise ConfigError(
            ["server.auth_token and server.auth_token_file are both set; set only one"]
        )
    if server.auth_token:
        return _check_token(server.auth_token, "server.auth_token")
    if server.auth_token_file is None:
        return None
    path = Path(server.auth_token_file)
    where = f"server.auth_token_file ({path})"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{where}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError([f"{where}: cannot read the token: {e}"]) from None
    token = text.strip()
    if not token:
        raise ConfigError([f"{where}: the file is empty"])
    return _check_token(token, where)


def _unauthorized(message: str, challenge: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = json.dumps({"error": message}).encode()
    start = {
        "type": "http.response.start",
        "status": 401,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode("ascii")),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class BearerAuth:
    """ASGI middleware refusing requests without the right bearer token (401)."""

    def __init__(
        self,
        app: Any,
        token: str,
        metrics_require_auth: bool = False,
        on_refuse: Callable[[str], None] | None = None,
    ) -> None:
        self.app = app
        self.on_refuse = on_refuse
        self._token = token.encode("ascii")
        self.open_paths = OPEN_PATHS if metrics_require_auth else OPEN_PATHS | {"/metrics"}

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool | None:
        """True: the right token; False: a wrong one; None: no bearer token presented."""
        values = [v for k, v in headers if k == b"authorization"]
        if len(values) != 1:
            return None if not values else False
        scheme, _, presented = values[0].strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        return hmac.compare_digest(presented.strip(), self._token)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        verdict = self.authorized(scope["headers"])
        if verdict:
            await self.app(scope, receive, send)
            return
        if self.on_refuse is not None:
            self.on_refuse("unauthorized")
        if verdict is None:
            message = "authentication required: send 'Authorization: Bearer <token>'"
            challenge = f'Bearer realm="{REALM}"'
        else:
            message = "the bearer token is not valid for this server"
            challenge = f'Bearer realm="{REALM}", error="invalid_token"'
            client = scope.get("client")
            log.warning(
                "refused %s %s from %s: invalid bearer token",
                scope["method"],
                loggable(scope["path"]),
                client[0] if client else "unknown",
            )
        start, body = _unauthorized(message, challenge)
        await send(start)
        await send(body)
