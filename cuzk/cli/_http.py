"""What the client subcommands share: the server URL and turning HTTP failures into messages."""

from __future__ import annotations

import argparse
import os
from typing import Any

import httpx

DEFAULT_SERVER = "http://127.0.0.1:9820"


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


def make_client(server: str | None, timeout: float = 30.0) -> httpx.Client:
    url = server or default_server()
    if "://" not in url:
        url = "http://" + url
    return httpx.Client(base_url=url, timeout=timeout)


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
