"""Jobs and partitions whose phase is read from the phase scopes they hold open.

A partition's phase is the most recently opened scope still open (a handoff opens the next
scope before closing the current one, so there is never a gap); once no scope is open it is
the terminal outcome. Nothing stores "the current phase" as a field.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from cuzk.engine.backend import ProofResult
from cuzk.telemetry.tracing import SpanBook, TrackedSpan

PHASES = (
    "waiting_memory",
    "synthesizing",
    "queued_gpu",
    "proving",
    "finalizing",
    "done",
    "failed",
    "cancelled",
)
ACTIVE_PHASES = PHASES[:5]
PARTITION_OUTCOMES = ("done", "failed", "cancelled")
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")
JOB_OUTCOMES = ("succeeded", "failed", "cancelled")

PhaseListener = Callable[["Partition", str, float], None]


class PhaseScope:
    """One open phase of one partition; closing removes exactly this scope."""

    __slots__ = ("_closed", "partition", "phase", "span", "started")

    # ``span`` may be attached after opening (the finalize span starts when a finalizer
    # thread takes the partition, but the phase starts at the GPU hand-off).

    def __init__(self, partition: Partition, phase: str, span: TrackedSpan | None) -> None:
        self.partition = partition
        self.phase = phase
        self.span = span
        self.started = time.monotonic()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, error: BaseException | None = None) -> None:
        """Idempotent, so every cleanup path may call it."""
        self.partition._close_scope(self, error)

    def __enter__(self) -> PhaseScope:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.close(exc if isinstance(exc, Exception) else None)


class Partition:
    """One partition of a job, plus the resources its work item currently owns."""

    def __init__(
        self,
        job: Job,
        index: int,
        inputs: Mapping[str, Any],
        spans: SpanBook,
        on_phase_closed: PhaseListener | None,
    ) -> None:
        self.job = job
        self.index = index
        self.inputs = inputs
        self._spans = spans
        self._on_phase_closed = on_phase_closed
        self._scopes: list[PhaseScope] = []
        self._seconds: dict[str, float] = {}
        self.outcome: str | None = None
        self.error: str | None = None
        self.proof: ProofResult | None = None
        self.worker_id: str | None = None
        self.span: TrackedSpan | None = None
        self.gpu_span: TrackedSpan | None = None
        # Resources owned by whichever stage holds the work item (see pipeline.py).
        self.key: Any = None
        self.reservation: Any = None
        self.synthesis: Any = None
        self.gpu_output: Any = None

    @property
    def _lock(self) -> threading.RLock:
        return self.job._lock

    def open_phase(self, phase: str, span: TrackedSpan | None = None) -> PhaseScope:
        if phase not in ACTIVE_PHASES:
            raise ValueError(f"not an active phase: {phase}")
        scope = PhaseScope(self, phase, span)
        with self._lock:
            self._scopes.append(scope)
        return scope

    def _close_scope(self, scope: PhaseScope, error: BaseException | None) -> None:
        now = time.monotonic()
        with self._lock:
            if scope._closed:
                return
            scope._closed = True
            self._scopes.remove(scope)
            elapsed = now - scope.started
            self._seconds[scope.phase] = self._seconds.get(scope.phase, 0.0) + elapsed
        if scope.span is not None:
            self._spans.end(scope.span, error)
        if self._on_phase_closed is not None:
            self._on_phase_closed(self, scope.phase, elapsed)

    @property
    def phase(self) -> str:
        with self._lock:
            if self._scopes:
                return self._scopes[-1].phase
            return self.outcome or "waiting_memory"

    def open_scopes(self) -> list[PhaseScope]:
        with self._lock:
            return list(self._scopes)

    def phase_ms(self) -> dict[str, float]:
        """Milliseconds per phase, the in-flight part of open scopes included."""
        now = time.monotonic()
        with self._lock:
            out = dict(self._seconds)
            for s in self._scopes:
                out[s.phase] = out.get(s.phase, 0.0) + (now - s.started)
        return {k: round(v * 1000.0, 3) for k, v in out.items()}

    def settle(self, outcome: str, error: BaseException | str | None = None) -> bool:
        """Record the terminal outcome once, close leftover scopes, end the partition span."""
        if outcome not in PARTITION_OUTCOMES:
            raise ValueError(outcome)
        with self._lock:
            if self.outcome is not None:
                return False
            self.outcome = outcome
            if error is not None:
                self.error = str(error)
            leftovers = list(self._scopes)
        exc = error if isinstance(error, BaseException) and outcome == "failed" else None
        for scope in reversed(leftovers):
            scope.close(exc)
        if self.span is not None:
            self._spans.end(self.span, exc)
        return True

    def to_dict(self) -> dict:
        return {
            "index": self.index,
            "phase": self.phase,
            "phase_ms": self.phase_ms(),
            "worker": self.worker_id,
            "error": self.error,
        }


class Job:
    """A proof request: its partitions, outcome, span and timings."""

    def __init__(
        self,
        proof_kind: str,
        priority: str,
        request_id: str | None,
        attempt: int,
        seq: int,
        job_id: str | None = None,
        submitted_at: float | None = None,
    ) -> None:
        """``job_id``/``submitted_at`` are given when a job is restored from the journal."""
        self.id = job_id or uuid.uuid4().hex
        self.proof_kind = proof_kind
        self.priority = priority
        self.request_id = request_id
        self.attempt = attempt
        self.seq = seq
        self.partitions: list[Partition] = []
        self.span: TrackedSpan | None = None
        self.trace_id: str | None = None
        now = time.time()
        self.submitted_at = now if submitted_at is None else submitted_at
        self._t0 = time.monotonic() - (now - self.submitted_at)  # durations span restarts
        self.inputs_digest: str | None = None
        self.finished_at: float | None = None
        self._t_end: float | None = None
        self.outcome: str | None = None
        self.error: str | None = None
        self.error_exc: BaseException | None = None
        self.settled = threading.Event()  # set once every partition has settled too
        self._lock = threading.RLock()
        self._done = threading.Event()

    @property
    def state(self) -> str:
        with self._lock:
            if self.outcome is not None:
                return self.outcome
            for p in self.partitions:
                if p.phase != "waiting_memory":
                    return "running"
            return "queued"

    @property
    def terminal(self) -> bool:
        return self.outcome is not None

    def duration_s(self) -> float:
        end = self._t_end if self._t_end is not None else time.monotonic()
        return end - self._t0

    def conclude(self, outcome: str, error: str | None = None) -> bool:
        """Set the terminal outcome once; True for the caller that set it."""
        if outcome not in JOB_OUTCOMES:
            raise ValueError(outcome)
        with self._lock:
            if self.outcome is not None:
                return False
            self.outcome = outcome
            self.error = error
            self._t_end = time.monotonic()
            self.finished_at = time.time()
            return True

    def wait(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    def to_dict(self) -> dict:
        proofs = None
        if self.outcome == "succeeded":
            proofs = [
                {"proof": p.proof.proof, "public": p.proof.public}
                for p in self.partitions
                if p.proof is not None
            ]
        return {
            "id": self.id,
            "request_id": self.request_id,
            "proof_kind": self.proof_kind,
            "priority": self.priority,
            "state": self.state,
            "attempt": self.attempt,
            "trace_id": self.trace_id,
            "partitions": [p.to_dict() for p in self.partitions],
            "proofs": proofs,
            "error": self.error,
            "timings": {
                "submitted_at": self.submitted_at,
                "finished_at": self.finished_at,
                "duration_ms": round(self.duration_s() * 1000.0, 3),
            },
        }
