"""One run of a client command: its client, its retries, its one-line error and, with
``--json``, its one JSON object (``cuzk.cli._results``), so each verb states only its calls."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from rich.console import Console
from rich.text import Text

from cuzk.cli._http import (
    RETRY_FOR_SECONDS,
    CliError,
    add_json_argument,
    add_retry_argument,
    add_server_argument,
    make_client,
    retrying_caller,
    server_url,
)
from cuzk.cli._output import error_console
from cuzk.cli._results import Result, emit
from cuzk.errors import CuzkError


def add_client_arguments(parser: argparse.ArgumentParser) -> None:
    """``--server``, ``--token-file``, ``--retry-for`` and ``--json``, the same on every verb."""
    add_server_argument(parser)
    add_retry_argument(parser)
    add_json_argument(parser)


@dataclass
class Run:
    """What a verb's body is given: ``call(method, path, **kwargs)`` (retried within
    ``--retry-for``), where to say things, and the result it fills."""

    command: str
    call: Callable[..., Any]
    console: Console
    json: bool
    client: httpx.Client

    def say(self, text: str) -> None:
        """A line for people on stdout; nothing with ``--json`` (stdout is the object)."""
        if not self.json:
            print(text, file=sys.stdout)


def run_client(
    args: argparse.Namespace,
    command: str,
    result: Result,
    body: Callable[[Run], int | None],
    timeout: float = 30.0,
    console: Console | None = None,
) -> int:
    """Run ``body`` against the server; a CliError or CuzkError it raises is the command's one
    line on stderr (and ``error`` in the JSON). ``body`` returns its exit status (None: 0); one
    that fails without raising (a job that failed) sets ``result["error"]`` itself."""
    console = console or error_console()
    use_json = bool(getattr(args, "json", False))

    def warn(text: str) -> None:
        console.print(f"cuzk {command}: {text}", highlight=False, markup=False)

    try:
        with make_client(args.server, timeout=timeout, token_file=args.token_file) as client:
            retry_for = float(getattr(args, "retry_for", RETRY_FOR_SECONDS))
            call = retrying_caller(client, retry_for, warn)
            code = body(Run(command, call, console, use_json, client)) or 0
    except (CliError, CuzkError) as e:
        line = " ".join(str(e).split())
        console.print(Text.assemble((f"cuzk {command}:", "bold red"), " ", line))
        result["error"], code = line, 1
    result["ok"] = code == 0
    if use_json:
        emit(result)
    return code


def describe_server(args: argparse.Namespace) -> str:
    """The server URL as the result names it (never raises: a bad URL is the client's to say)."""
    return server_url(getattr(args, "server", None))
