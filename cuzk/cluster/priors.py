"""A cluster head's phase priors: asked of a GPU worker actor, once per kind, never blocking.

The head's own rates say nothing of the nodes' machines, so the head asks a GPU worker actor
for the kind's prior (``ProverBackend.phase_prior`` there: the key's layout at that machine's
calibrated rates, calibrated once when the actor starts). Each kind is asked once: the answer
(a prior, or None when that worker cannot tell) is kept for the head's life. Admission never
waits on a busy or lost actor for more than ``PRIOR_TIMEOUT_S`` in all, per ask: a call that
has not answered by then stays pending (a later submit takes its answer, no second call), and
one that failed is asked again of a live worker at most every ``PRIOR_RETRY_S``. Meanwhile
the kind has no prior (None; the engine asks again at its next submit), logged once per kind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cuzk.engine.backend import PhasePrior

log = logging.getLogger(__name__)

PRIOR_TIMEOUT_S = 3.0
"""How long one ask of a GPU worker may hold admission up, over all the callers waiting on it
(a worker that calibrated at its start answers in milliseconds)."""
PRIOR_RETRY_S = 10.0
"""After an ask failed (its worker lost), the next ask waits at least this long."""


@dataclass(frozen=True)
class PriorSource:
    """The GPU worker to ask: its id, its node's id, and a call that starts the ask and
    returns something ``resolve`` can wait on (a Ray ObjectRef)."""

    worker_id: str
    node_id: str
    ask: Callable[[str], Any]


@dataclass
class _Ask:
    source: PriorSource
    pending: Any
    until: float  # monotonic: callers wait for the answer until then, then not at all


class RemotePriors:
    """Per kind: one ask of a GPU worker, its answer kept (thread-safe).

    ``pick``: a GPU worker to ask now (None: none answers yet); ``resolve(pending, timeout)``:
    the ask's answer, raising ``TimeoutError`` when it has none within ``timeout`` seconds.
    """

    def __init__(self, pick: Callable[[], PriorSource | None],
                 resolve: Callable[[Any, float], PhasePrior | None],
                 timeout_s: float = PRIOR_TIMEOUT_S, retry_s: float = PRIOR_RETRY_S) -> None:
        self._pick = pick
        self._resolve = resolve
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self._lock = threading.Lock()
        self._kind_locks: dict[str, threading.Lock] = {}
        self._answers: dict[str, PhasePrior | None] = {}
        self._asks: dict[str, _Ask] = {}
        self._retry_at: dict[str, float] = {}
        self._logged: set[str] = set()
        self.calls = 0  # asks started (each one remote call)

    def get(self, kind: str) -> PhasePrior | None:
        """The kind's prior, its ``basis`` naming the worker and node it came from; None while
        no worker has answered (or when the worker cannot tell)."""
        with self._lock:
            if kind in self._answers:
                return self._answers[kind]
            kind_lock = self._kind_locks.setdefault(kind, threading.Lock())
        with kind_lock:  # one ask per kind at a time; other kinds are not held up
            return self._get(kind)

    def _get(self, kind: str) -> PhasePrior | None:
        with self._lock:
            if kind in self._answers:
                return self._answers[kind]
            ask = self._asks.get(kind)
            retry_at = self._retry_at.get(kind, 0.0)
        now = time.monotonic()
        if ask is None:
            if now < retry_at:
                return None
            source = self._pick()
            if source is None:
                self._log_once(kind, "no GPU worker answers yet", logging.INFO)  # at start
                return None
            ask = _Ask(source, source.ask(kind), now + self.timeout_s)
            with self._lock:
                self._asks[kind] = ask
                self.calls += 1
        try:
            answer = self._resolve(ask.pending, max(0.0, ask.until - time.monotonic()))
        except TimeoutError:
            self._log_once(kind, f"GPU worker {ask.source.worker_id} has not answered within "
                                 f"{self.timeout_s:g} s (asked again at the next submit)")
            return None
        except Exception as e:  # the worker was lost: ask a live one later
            with self._lock:
                self._asks.pop(kind, None)
                self._retry_at[kind] = time.monotonic() + self.retry_s
            self._log_once(kind, f"GPU worker {ask.source.worker_id} failed: {e}")
            return None
        if answer is not None:
            src = ask.source
            answer = PhasePrior(dict(answer.seconds), f"{answer.basis}; from GPU worker "
                                f"{src.worker_id} on node {src.node_id[:12]}")
        with self._lock:
            self._answers[kind] = answer
            self._asks.pop(kind, None)
        return answer

    def _log_once(self, kind: str, why: str, level: int = logging.WARNING) -> None:
        with self._lock:
            first = kind not in self._logged
            self._logged.add(kind)
        if first:
            log.log(level, "no prior phase durations for %s yet: %s; its jobs are predicted once "
                        "a GPU worker answers or its phases are measured", kind, why)
