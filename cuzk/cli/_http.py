"""What the client subcommands share: the server URL, its bearer token, and turning HTTP failures
into messages.

The token comes from ``--token-file``, else ``$CUZK_AUTH_TOKEN``, else the file named by
``$CUZK_AUTH_TOKEN_FILE``; never from a command-line value, which other users could read in the
process list."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import httpx

DEFAULT_SERVER = "http://127.0.0.1:9820"
TOKEN_ENV = "CUZK_AUTH_TOKEN"
TOKEN_FILE_ENV = "CUZK_AUTH_TOKEN_FILE"


class CliError(Exception):
    """A failure to report to the user as one line, without a traceback."""


def default_server() -> str:
    return os.environ.get("CUZK_URL") or DEFAULT_SERVER


def add_server_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help=f"cuzk server URL (default: $CUZK_URL or {DEFAULT_SERVER})",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help=f"file holding the server's bearer token (default: ${TOKEN_ENV}, else the file"
        f" ${TOKEN_FILE_ENV} names; none: send no token)",
    )


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


def make_client(
    server: str | None, timeout: float = 30.0, token_file: str | None = None
) -> httpx.Client:
    url = server or default_server()
    if "://" not in url:
        url = "http://" + url
    token = auth_token(token_file)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, timeout=timeout, headers=headers)


def request(client: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    """One API call; returns the decoded JSON or raises CliError saying what went wrong."""
    try:
        response = client.request(method, path, **kwargs)
    except httpx.ConnectError as e:
        raise CliError(
            f"cannot reach the cuzk server at {client.base_url} ({_reason(e)});"
            " is `cuzk serve` running? (set --server or CUZK_URL)"
        ) from None
    except httpx.TimeoutException:
        raise CliError(f"the cuzk server at {client.base_url} did not answer in time") from None
    except httpx.HTTPError as e:
        raise CliError(f"request to {client.base_url} failed: {e}") from None
    try:
        data = response.json()
    except ValueError:
        data = None
    if response.status_code >= 400:
        message = data.get("error") if isinstance(data, dict) else None
        if response.status_code == 401:
            has_token = "authorization" in client.headers
            hint = (
                "the token sent was refused"
                if has_token
                else f"the server needs a token: set ${TOKEN_ENV} or --token-file"
            )
            message = f"{message or 'unauthorized'} ({hint})"
        raise CliError(
            f"server refused {method} {path}: {response.status_code}"
            f" {message or response.text[:200]}"
        )
    if data is None:
        raise CliError(f"{method} {path}: the server at {client.base_url} did not return JSON")
    return data


def _reason(error: Exception) -> str:
    text = str(error)
    if "refused" in text.lower():
        return "connection refused"
    return text or type(error).__name__
