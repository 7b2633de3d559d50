"""Steps reported as they pass, from wherever a proof's work runs, to whoever asked to hear them.

The prover names each step when it starts or ends (``step("MSM B1 done")``); the engine (a
partition's open phase scope, read by ``/v1/status``) or ``cuzk prove`` (a line on the
terminal) listens for the duration of one call with ``reporting(sink)``. Nobody listening costs
one context-variable read. Work that moves to other threads takes the listener along with
``current()``. No dependencies: the prover and the engine core both import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Sink = Callable[[str], None]


def _nobody(name: str) -> None:
    """No one is listening."""


_SINK: ContextVar[Sink] = ContextVar("cuzk_progress_sink", default=_nobody)


@contextmanager
def reporting(sink: Sink) -> Iterator[None]:
    """Send the steps reported in this context (this thread, this call) to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def current() -> Sink:
    """The listener of this context, to report from threads the work is handed to."""
    return _SINK.get()


def step(name: str) -> None:
    """Report that the step ``name`` is now running (or has just ended, as its name says)."""
    _SINK.get()(name)
