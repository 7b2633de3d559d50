"""What the engine tells its subscribers: typed, immutable events, and the bus that carries them.

The engine core produces events; consumers (the Prometheus histograms in ``cuzk.telemetry``,
a job journal, a test) subscribe. Nothing the engine reports as *state* travels this way:
state (busy workers, partition phases, memory) is read from the open leases and scopes when
asked, in ``Engine.snapshot()`` (docs/design.md section 5).

Delivery rules, so a subscriber can rely on them:

- Synchronous, in the thread where the thing happened, after it happened and before anyone
  waiting for it is woken: a job's ``JobSettled`` has reached every subscriber before
  ``Engine.wait`` returns that job, and ``PartitionFinalized`` precedes the job's success.
- ``JobAccepted`` is published before the job's partitions are queued (while the engine's
  job table is locked), so it precedes every other event of that job.
- Subscribers must be quick and must not call back into the engine. An exception in a
  subscriber is logged and swallowed: it never disturbs the engine or other subscribers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuzk.engine.witnesses import WitnessRef

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JobAccepted:
    """A job was accepted (the API's 202); ``inputs`` holds one mapping per partition (or one
    reference per partition to a witness submitted ready-made)."""

    job_id: str
    proof_kind: str
    priority: str
    request_id: str | None
    attempt: int
    inputs: tuple[Mapping[str, Any] | WitnessRef, ...]
    submitted_at: float  # wall-clock seconds
    trace_id: str | None
    sampled: bool


@dataclass(frozen=True, slots=True)
class PartitionPhaseEnded:
    """A partition left ``phase`` after ``seconds`` in it (time in nested phases excluded)."""

    job_id: str
    proof_kind: str
    partition: int
    phase: str
    seconds: float
    trace_id: str | None
    sampled: bool


@dataclass(frozen=True, slots=True)
class PartitionFinalized:
    """A partition's proof is ready and self-verified: snarkjs ``proof.json`` and public signals."""

    job_id: str
    proof_kind: str
    partition: int
    proof: Mapping[str, Any]
    public: Sequence[Any]


@dataclass(frozen=True, slots=True)
class PartitionFailed:
    """A partition failed in ``phase``; its job fails with it."""

    job_id: str
    proof_kind: str
    partition: int
    phase: str
    error: str


@dataclass(frozen=True, slots=True)
class MemoryWaited:
    """A reservation was granted after waiting ``seconds`` (0.0 when it fitted at once)."""

    budget: str  # "host" or a device such as "cuda:0"
    consumer: str
    seconds: float


@dataclass(frozen=True, slots=True)
class KeyEvicted:
    """A resident proving key is gone: evicted to make room for others (``to_make_room``), or
    by an operator or at shutdown."""

    proof_kind: str
    to_make_room: bool


@dataclass(frozen=True, slots=True)
class WorkersPaused:
    """An operator paused (``paused``) or resumed the GPU workers."""

    paused: bool


@dataclass(frozen=True, slots=True)
class JournalWritten:
    """One committed write to the job journal (fsync included) took ``seconds``."""

    seconds: float


@dataclass(frozen=True, slots=True)
class JobSettled:
    """A job's outcome is final: succeeded, failed (with ``error``) or cancelled.

    ``duration_s`` runs from submit to the outcome. Published once per job, before
    ``Engine.wait`` returns it; partitions of a failed or cancelled job may still be
    cleaning up (their resources are released by whoever holds them).
    """

    job_id: str
    proof_kind: str
    priority: str
    request_id: str | None
    attempt: int
    outcome: str
    error: str | None
    duration_s: float
    trace_id: str | None
    sampled: bool
    deadline: float | None = None  # wall clock
    finished_at: float | None = None  # wall clock
    deadline_missed: bool = False

    @property
    def margin_s(self) -> float | None:
        """Seconds to spare for a job that met its deadline; None otherwise."""
        if self.deadline is None or self.finished_at is None or self.deadline_missed:
            return None
        margin = self.deadline - self.finished_at
        return margin if margin >= 0 else None


EngineEvent = (
    JobAccepted
    | PartitionPhaseEnded
    | PartitionFinalized
    | PartitionFailed
    | MemoryWaited
    | KeyEvicted
    | WorkersPaused
    | JournalWritten
    | JobSettled
)
Subscriber = Callable[[EngineEvent], None]


class Subscription:
    """A handle on one subscriber; ``close()`` (or leaving the ``with`` block) unsubscribes."""

    def __init__(self, bus: EventBus, fn: Subscriber) -> None:
        self._bus = bus
        self._fn = fn

    def close(self) -> None:
        self._bus._remove(self._fn)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventBus:
    """Hands each published event to every subscriber, in subscription order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: tuple[Subscriber, ...] = ()  # replaced, never mutated: lock-free reads

    def subscribe(self, fn: Subscriber) -> Subscription:
        with self._lock:
            self._subscribers = (*self._subscribers, fn)
        return Subscription(self, fn)

    def _remove(self, fn: Subscriber) -> None:
        with self._lock:
            subs = list(self._subscribers)
            if fn in subs:
                subs.remove(fn)
            self._subscribers = tuple(subs)

    @property
    def active(self) -> bool:
        """Whether anyone listens (publishers may skip building an event nobody reads)."""
        return bool(self._subscribers)

    def publish(self, event: EngineEvent) -> None:
        for fn in self._subscribers:
            try:
                fn(event)
            except Exception:
                log.exception("event subscriber %r failed on %s", fn, type(event).__name__)
