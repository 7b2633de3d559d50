"""Jobs and partitions whose phase is read from the phase scopes they hold open.

A partition's phase is the most recently opened scope still open (a handoff opens the next
scope before closing the current one, so there is never a gap); once no scope is open it is
the terminal outcome. Nothing stores "the current phase" as a field. A scope may be *nested*
in the one below it (``waiting_memory`` inside ``synthesizing``): its time is not counted twice.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Collection
from typing import Any

from cuzk.engine.backend import ProofResult
from cuzk.engine.journal import PartitionInput
from cuzk.engine.snapshot import JobView, PartitionView
from cuzk.engine.spans import SpanBook, TrackedSpan
from cuzk.protocol import ACTIVE_PHASES, JOB_OUTCOMES, PARTITION_OUTCOMES, JobInfo

QUEUED_PHASES = frozenset({"queued_synthesis", "waiting_memory"})
"""A job none of whose partitions got further than these has not started (state ``queued``)."""

PhaseListener = Callable[["Partition", str, float], None]


class PhaseScope:
    """One open phase of one partition; closing removes exactly this scope."""

    __slots__ = ("_closed", "nested_s", "parent", "partition", "phase", "span", "started",
                 "step")

    # ``span`` may be attached after opening (the finalize span starts when a finalizer
    # thread takes the partition, but the phase starts at the GPU hand-off).

    def __init__(
        self,
        partition: Partition,
        phase: str,
        span: TrackedSpan | None,
        parent: PhaseScope | None = None,
    ) -> None:
        self.partition = partition
        self.phase = phase
        self.span = span
        self.parent = parent  # the scope this one is nested in, if any
        self.nested_s = 0.0  # time spent in scopes nested in this one (closed ones)
        self.started = time.monotonic()
        self.step: str | None = None  # the prover's step now running, reported in this scope
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
        inputs: PartitionInput,
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

    def open_phase(
        self, phase: str, span: TrackedSpan | None = None, nested: bool = False
    ) -> PhaseScope:
        """Open a phase scope; ``nested`` makes it a sub-phase of the scope open on top now."""
        if phase not in ACTIVE_PHASES:
            raise ValueError(f"not an active phase: {phase}")
        with self._lock:
            parent = self._scopes[-1] if nested and self._scopes else None
            scope = PhaseScope(self, phase, span, parent)
            self._scopes.append(scope)
        return scope

    def _close_scope(self, scope: PhaseScope, error: BaseException | None) -> None:
        # A nested scope never outlives its parent: one left open (a backend's hand-back mark,
        # see StepContext.worker_released) ends with it, before it.
        with self._lock:
            children = [s for s in self._scopes if s.parent is scope and not s._closed]
        for child in children:
            self._close_scope(child, None)
        now = time.monotonic()
        with self._lock:
            if scope._closed:
                return
            scope._closed = True
            self._scopes.remove(scope)
            total = now - scope.started
            elapsed = max(0.0, total - scope.nested_s)
            if scope.parent is not None:
                scope.parent.nested_s += total
            self._seconds[scope.phase] = self._seconds.get(scope.phase, 0.0) + elapsed
        if scope.span is not None:
            self._spans.end(scope.span, error)
        if self._on_phase_closed is not None:
            self._on_phase_closed(self, scope.phase, elapsed)

    @property
    def phase(self) -> str:
        """The phase scope opened last and still open; the outcome once none is."""
        with self._lock:
            if self._scopes:
                return self._scopes[-1].phase
            return self.outcome or "queued_synthesis"

    def report_step(self, name: str) -> None:
        """The prover's step now running (``cuzk.progress``), kept on the scope open on top:
        it ends with that scope, so a step is never shown in a phase it did not run in."""
        with self._lock:
            for scope in reversed(self._scopes):
                if scope.phase != "waiting_memory":
                    scope.step = name
                    return

    def read_step(self) -> str | None:
        """The step reported in the phase now open (None before any, or between phases)."""
        with self._lock:
            for scope in reversed(self._scopes):
                if scope.phase != "waiting_memory":
                    return scope.step
            return None

    def read_phase(self, memory_waiter: bool) -> str:
        """The phase for a snapshot that read the memory waiters itself.

        ``waiting_memory`` holds exactly when that read found this partition's reservation
        waiting (``memory_waiter``); otherwise the scope below the reservation call counts.
        """
        if memory_waiter:
            return "waiting_memory"
        with self._lock:
            for scope in reversed(self._scopes):
                if scope.phase != "waiting_memory":
                    return scope.phase
            return self.outcome or "queued_synthesis"

    def current(self) -> tuple[str, float]:
        """The phase this partition is in (memory waits count as ``synthesizing``) and the
        seconds since it entered it, for the finish predictions (cuzk.engine.predict)."""
        now = time.monotonic()
        with self._lock:
            for scope in reversed(self._scopes):
                if scope.phase != "waiting_memory":
                    return scope.phase, now - scope.started
            return self.outcome or "queued_synthesis", 0.0

    def open_scopes(self) -> list[PhaseScope]:
        with self._lock:
            return list(self._scopes)

    def phase_ms(self) -> dict[str, float]:
        """Milliseconds per phase, the in-flight part of open scopes included."""
        now = time.monotonic()
        with self._lock:
            out = dict(self._seconds)
            inner: dict[int, float] = {}  # in-flight time of open nested scopes, by parent
            for s in reversed(self._scopes):
                total = now - s.started
                own = max(0.0, total - s.nested_s - inner.get(id(s), 0.0))
                out[s.phase] = out.get(s.phase, 0.0) + own
                if s.parent is not None:
                    inner[id(s.parent)] = inner.get(id(s.parent), 0.0) + total
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

    def view(self, phase: str | None = None) -> PartitionView:
        return PartitionView(
            self.index, self.phase if phase is None else phase, self.phase_ms(),
            self.worker_id, self.error, self.read_step())


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
        deadline: float | None = None,
        on_miss: str = "continue",
    ) -> None:
        """``job_id``/``submitted_at`` are given when a job is restored from the journal;
        ``deadline``: wall-clock seconds, or None; ``on_miss``: its kind's miss policy."""
        self.id = job_id or uuid.uuid4().hex
        self.proof_kind = proof_kind
        self.priority = priority
        self.request_id = request_id
        self.attempt = attempt
        self.seq = seq
        self.deadline = deadline
        self.on_miss = on_miss
        self.deadline_missed = False  # set once (``mark_missed``), counted once
        self.admitted_at_risk = False  # admitted although predicted to miss
        self.partitions: list[Partition] = []
        self.span: TrackedSpan | None = None
        self.trace_id: str | None = None
        self.trace_sampled = False  # only a sampled trace id may be an exemplar
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
            return _state(self.outcome, [p.phase for p in self.partitions])

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

    def mark_missed(self) -> bool:
        """Record that the deadline was missed; True for the one caller that recorded it."""
        with self._lock:
            if self.deadline is None or self.deadline_missed:
                return False
            self.deadline_missed = True
            return True

    def wait(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    def view(
        self, memory_waiters: Collection[int] = (), predicted_finish: float | None = None
    ) -> JobView:
        """This job read now; ``memory_waiters``: ids of partitions whose reservation a
        snapshot found waiting (see ``Partition.read_phase``); ``predicted_finish``: the
        engine's prediction (wall clock) for an unfinished job."""
        with self._lock:
            outcome, error, finished_at = self.outcome, self.error, self.finished_at
            parts = [p.view(p.read_phase(id(p) in memory_waiters)) for p in self.partitions]
        proofs = None
        if outcome == "succeeded":
            proofs = tuple(
                (p.proof.proof, tuple(p.proof.public))
                for p in self.partitions
                if p.proof is not None
            )
        return JobView(
            id=self.id,
            request_id=self.request_id,
            proof_kind=self.proof_kind,
            priority=self.priority,
            state=_state(outcome, [p.phase for p in parts]),
            attempt=self.attempt,
            trace_id=self.trace_id,
            partitions=tuple(parts),
            proofs=proofs,
            error=error,
            submitted_at=self.submitted_at,
            finished_at=finished_at,
            duration_s=self.duration_s(),
            deadline=self.deadline,
            on_miss=self.on_miss,
            predicted_finish=None if outcome is not None else predicted_finish,
            deadline_missed=self.deadline_missed,
            admitted_at_risk=self.admitted_at_risk and outcome is None,
        )

    def to_dict(self) -> JobInfo:
        """The job in its wire shape (``cuzk.protocol.JobInfo``)."""
        return self.view().to_wire()


def _state(outcome: str | None, phases: list[str]) -> str:
    if outcome is not None:
        return outcome
    return "queued" if all(ph in QUEUED_PHASES for ph in phases) else "running"
