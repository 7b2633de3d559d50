"""The benches behind ``cuzk bench``: scenarios and their drivers, each returning its figures.

One module per bench (``engine``, ``deadlines``, ``soak``, ``durability``, ``cluster``,
``prover``). A bench takes its options as plain values, reports progress as lines of text to an
``echo`` callable when given one, and returns a result that ``cuzk/cli/bench*.py`` prints:
argument parsing and the terminal belong to the command line, not here. Importing this package
imports nothing heavy; each bench imports what it drives.
"""

from __future__ import annotations

from collections.abc import Callable

Echo = Callable[[str], None]


def quiet(line: str) -> None:
    """An ``echo`` that shows nothing (a bench run from code, or a test)."""


class BenchFailed(RuntimeError):
    """A bench could not produce its figures; the message says why, in one line."""
