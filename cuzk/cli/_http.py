"""What the client subcommands share: the server URL, its bearer token, and turning HTTP failures
into messages.

The token comes from ``--token-file``, else ``$CUZK_AUTH_TOKEN``, else the file named by
``$CUZK_AUTH_TOKEN_FILE``; never from a command-line value, which other users could read in the
process list."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

DEFAULT_SERVER = "http://127.0.0.1:9820"
TOKEN_ENV = "CUZK_AUTH_TOKEN"
TOKEN_FILE_ENV = "CUZK_AUTH_TOKEN_FILE"


RETRY_FOR_SECONDS = 120.0
"""How long a client command rides out a server that cannot answer now (a drain, a restart, a
503 with Retry-After) before giving up; ``--retry-for`` changes it."""


class CliError(Exception):
    """A failure to report to the user as one line, without a traceback."""


class Refused(CliError):
    """The server answered with an error status; ``status`` lets a command say what it means
    for its own resource (a 404 on a cancel: no such job)."""

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def default_server() -> str:
    """``$CUZK_URL``; else where ``cuzk serve`` listens under the same environment
    (``$CUZK_SERVER_LISTEN``, a wildcard host reached on loopback); else the default."""
    url = os.environ.get("CUZK_URL", "").strip()
    if url:
        return url
    host, _, port = os.environ.get("CUZK_SERVER_LISTEN", "").strip().rpartition(":")
    if port.isdigit() and int(port) > 0:
        host = host.strip("[]")
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    return DEFAULT_SERVER


def add_server_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help=f"cuzk server URL (default: $CUZK_URL, else the address $CUZK_SERVER_LISTEN names,"
        f" else {DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help=f"file holding the server's bearer token (default: ${TOKEN_ENV}, else the file"
        f" ${TOKEN_FILE_ENV} names; none: send no token)",
    )


def add_retry_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--retry-for",
        type=float,
        default=RETRY_FOR_SECONDS,
        metavar="SECONDS",
        help="keep retrying this long while the server is unreachable, draining, restarting or"
        " answers 503 (default: %(default)g; 0: never retry)",
    )


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object on stdout, whatever the outcome, instead of text (its shape:"
        " docs/cli.md, \"Output for scripts\")",
    )


def retrying_caller(
    client: httpx.Client, retry_for: float, say: Callable[[str], None]
) -> Callable[..., Any]:
    """``call(method, path, **kwargs)``: :func:`request_retrying` that says once, through
    ``say``, that it is retrying and for how long (a silent wait looks like a hang)."""
    retried: list[str] = []

    def on_retry(why: str) -> None:
        if not retried:
            say(f"{why}; retrying for up to {retry_for:g} s")
        retried.append(why)

    def call(method: str, path: str, **kwargs: Any) -> Any:
        return request_retrying(client, method, path, retry_for, on_retry, **kwargs)

    return call


def auth_token(token_file: str | None = None) -> str | None:
    """The bearer token to send, if any; CliError when a named token file is unusable."""
    if token_file is None:
        token = os.environ.get(TOKEN_ENV, "").strip()
        if token:
            return token
        token_file = os.environ.get(TOKEN_FILE_ENV) or None
        if token_file is None:
            return None
    try:
        token = Path(token_file).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read the token file {token_file}: {e}") from None
    if not token:
        raise CliError(f"the token file {token_file} is empty")
    return token


def server_url(server: str | None) -> str:
    """The URL a client command talks to: ``--server``, else :func:`default_server`."""
    url = server or default_server()
    return url if "://" in url else "http://" + url


def make_client(
    server: str | None, timeout: float = 30.0, token_file: str | None = None
) -> httpx.Client:
    url = server_url(server)
    token = auth_token(token_file)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        return httpx.Client(base_url=url, timeout=timeout, headers=headers)
    except (httpx.InvalidURL, ValueError) as e:
        raise CliError(f"the server URL {url!r} is not a URL ({e}); give one such as"
                       f" {DEFAULT_SERVER} (--server or CUZK_URL)") from None


RETRY_AFTER_MAX_S = 10.0
"""The longest a client sleeps between tries, whatever ``Retry-After`` says."""


def _retry_after(response: httpx.Response) -> float:
    try:
        return min(max(float(response.headers.get("retry-after", "1")), 0.1), RETRY_AFTER_MAX_S)
    except ValueError:
        return 1.0


def request_retrying(
    client: httpx.Client,
    method: str,
    path: str,
    retry_for: float,
    on_retry: Callable[[str], None] | None = None,
    **kwargs: Any,
) -> Any:
    """:func:`request`, tried again for up to ``retry_for`` seconds while the server cannot take
    it now: a 503 (draining, restarting, journal unwritable; after its ``Retry-After``), or no
    connection / a connection dropped before the answer (a drain ending, a restart). Only for
    requests that are safe to repeat: GETs, and submits carrying a ``request_id``.
    ``on_retry(why)`` is called before each wait."""
    deadline = time.monotonic() + retry_for
    while True:
        try:
            return request(client, method, path, **kwargs)
        except _Retryable as e:
            wait = e.wait
            if time.monotonic() + wait > deadline:
                raise CliError(f"{e} (still so after retrying for {retry_for:g} s)") from None
            if on_retry is not None:
                on_retry(str(e))
            time.sleep(wait)


class _Retryable(CliError):
    """The server could not take the request now; trying again later may succeed."""

    def __init__(self, message: str, wait: float) -> None:
        super().__init__(message)
        self.wait = wait


def request(client: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    """One API call; returns the decoded JSON or raises CliError saying what went wrong."""
    try:
        response = client.request(method, path, **kwargs)
    except httpx.ConnectError as e:
        raise _Retryable(
            f"cannot reach the cuzk server at {client.base_url} ({_reason(e)});"
            " is `cuzk serve` running? (set --server or CUZK_URL)", 0.5
        ) from None
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
        raise _Retryable(
            f"the connection to {client.base_url} dropped before an answer ({_reason(e)})", 0.5
        ) from None
    except httpx.TimeoutException:
        raise CliError(f"the cuzk server at {client.base_url} did not answer in time") from None
    except httpx.HTTPError as e:
        raise CliError(f"request to {client.base_url} failed: {e}") from None
    try:
        data = response.json()
    except ValueError:
        data = None
    status = response.status_code
    if not isinstance(data, dict) and status not in _PROXY_STATUSES:
        # Every cuzk answer is a JSON object, its errors included: this is another server.
        what = response.headers.get("content-type", "no content type").split(";")[0]
        raise CliError(
            f"not a cuzk server at {client.base_url}: {method} {path} answered {status}"
            f" {response.reason_phrase} ({what}); check --server or CUZK_URL"
        )
    if status >= 400:
        message = data.get("error") if isinstance(data, dict) else None
        if response.status_code == 401:
            has_token = "authorization" in client.headers
            hint = (
                "the token sent was refused"
                if has_token
                else f"the server needs a token: set ${TOKEN_ENV} or --token-file"
            )
            message = f"{message or 'unauthorized'} ({hint})"
        detail = message or " ".join(response.text[:200].split())
        if not isinstance(data, dict):
            detail = f"{response.reason_phrase} (not JSON: from a proxy in front of cuzk?)"
        text = f"server refused {method} {path}: {status} {detail}"
        if status == 503:
            raise _Retryable(text, _retry_after(response))
        raise Refused(text, status, detail)
    return data


_PROXY_STATUSES = frozenset({502, 503, 504})
"""Statuses a proxy or load balancer in front of cuzk answers in its own format."""


def _reason(error: Exception) -> str:
    text = str(error)
    if "refused" in text.lower():
        return "connection refused"
    return text or type(error).__name__
