"""The ``cuzk`` console script: one argparse subcommand per module in this package."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Sequence

from cuzk import __version__
from cuzk.errors import CuzkError, InputError

SUBCOMMANDS = (
    "serve", "submit", "get", "cancel", "workers", "keys", "status", "prove", "keygen", "verify",
    "circuit", "bench",
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
    _describe(parser)
    return parser


def _describe(parser: argparse.ArgumentParser) -> None:
    """A subcommand registered with a one-line ``help`` and no ``description`` shows that line
    atop its own ``--help`` too, rather than nothing."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                line = helps.get(name)
                if sub.description is None and line:
                    sub.description = line[0].upper() + line[1:].replace("%%", "%") + "."
                _describe(sub)


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, if it is one (options come first)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in SUBCOMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 failure, 2 usage or configuration, 130
    interrupted, 141 the reader of stdout went away). Never a traceback: an error no
    subcommand turned into its one line is said here on one line (``-v``: with the traceback)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except BrokenPipeError:
        return _reader_gone()


def _main(argv: list[str]) -> int:
    command = _command(argv)
    parser = build_parser(only=command)
    args = parser.parse_args(argv)
    # Quiet by default (httpx logs every request at INFO); `serve` raises cuzk's own loggers.
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    name = f"cuzk {command}" if command else "cuzk"
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader gone (`| head -1`) is met here, not at exit
        return status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except Exception as e:
        if args.verbose:
            traceback.print_exc()
        print(f"{name}: {_one_line(e)}", file=sys.stderr)
        return 2 if isinstance(e, InputError) else 1


def _one_line(e: Exception) -> str:
    """What an error no subcommand caught says: cuzk's own errors and file errors as they are,
    anything else as the bug it is."""
    if isinstance(e, CuzkError):
        return " ".join(str(e).split())
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return (f"unexpected error: {' '.join(what.split())} (a bug in cuzk: run again with -v for"
            " the traceback and report it)")


def _reader_gone() -> int:
    """stdout's reader closed the pipe (``cuzk status --json | head -1``): stop quietly, as
    command-line tools do, with the status a shell gives a process SIGPIPE ended (128 + 13).
    stdout now points at /dev/null so that the interpreter's flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 141


if __name__ == "__main__":
    sys.exit(main())
