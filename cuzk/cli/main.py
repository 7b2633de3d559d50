"""The ``cuzk`` console script: one argparse subcommand per module in this package."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from cuzk import __version__

SUBCOMMANDS = (
    "serve", "submit", "get", "status", "prove", "keygen", "verify", "circuit", "bench"
)
"""Each is ``cuzk.cli.<name>`` exposing ``register(subparsers)``; the parser it adds sets
``func(args) -> int``."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; ``only`` registers just that subcommand, so ``cuzk status`` and ``cuzk
    submit`` (HTTP clients) never import the prover and numba that other subcommands need."""
    parser = argparse.ArgumentParser(
        prog="cuzk",
        description="cuzk: a persistent GPU-resident Groth16 proving engine.",
    )
    parser.add_argument("--version", action="version", version=f"cuzk {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages to stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        if only is None or name == only:
            importlib.import_module(f"cuzk.cli.{name}").register(subparsers)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, if it is one (options come first)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in SUBCOMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 failure, 2 usage or configuration)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=_command(argv))
    args = parser.parse_args(argv)
    # Quiet by default (httpx logs every request at INFO); `serve` raises cuzk's own loggers.
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
