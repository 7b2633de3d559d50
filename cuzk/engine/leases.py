"""GPU workers whose busy state is the set of leases they hold open (docs/design.md section 2).

``with worker.lease(job, partition) as span:`` is the only way a worker becomes busy; leaving
the block removes that lease and no other. There is no "set idle" anywhere: a finalizer that
completes later has no handle on the worker at all, which is what makes the upstream
stale-finalizer bug impossible here.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cuzk.engine.jobs import Job, Partition
from cuzk.engine.snapshot import WorkerView
from cuzk.engine.spans import SpanBook, TrackedSpan


@dataclass
class Lease:
    id: int
    job: Job
    partition: Partition
    started: float
    span: TrackedSpan | None = None


class GpuWorker:
    """A GPU worker: id ``gpu-0`` on device ``cuda:0`` (``cpu-0`` on the CPU backend); a
    reserved one (``gpu-r0``) takes only critical and high partitions."""

    def __init__(
        self, worker_id: str, device: str, spans: SpanBook, record_intervals: bool = False,
        reserved: bool = False,
    ) -> None:
        self.id = worker_id
        self.device = device
        self.reserved = reserved  # takes only critical and high work (cuzk.engine.scheduling)
        self._spans = spans
        self._lock = threading.Lock()
        self._leases: dict[int, Lease] = {}
        self._ids = itertools.count(1)
        self._busy_since: float | None = None
        self._busy_closed_s = 0.0
        self._proven = 0
        self.intervals: list[tuple[float, float]] | None = [] if record_intervals else None

    @contextmanager
    def lease(self, job: Job, partition: Partition) -> Iterator[TrackedSpan]:
        """Hold the worker busy for one partition's GPU phase; yields the ``cuzk.gpu`` span.

        The lease is registered first and removed last, so span bookkeeping counts as busy
        time (it is part of the GPU phase) rather than as a gap between partitions.
        """
        # Clock reads happen under the lock so concurrent reads of busy seconds never see a
        # start later than their own "now" (which would make the counter step back).
        with self._lock:
            now = time.monotonic()
            lease = Lease(next(self._ids), job, partition, now)
            self._leases[lease.id] = lease
            if self._busy_since is None:
                self._busy_since = now
        error: BaseException | None = None
        scope = None
        try:
            span = self._spans.start_step("cuzk.gpu", partition.span, {
                "cuzk.job.id": job.id,
                "cuzk.proof_kind": job.proof_kind,
                "cuzk.partition.index": partition.index,
                "cuzk.worker.id": self.id,
                "cuzk.device": self.device,
                "cuzk.priority": job.priority,
            })
            lease.span = span
            scope = partition.open_phase("proving", span)
            partition.gpu_span = span
            partition.worker_id = self.id
            yield span
        except BaseException as exc:
            error = exc
            raise
        finally:
            if scope is not None:
                scope.close(error if isinstance(error, Exception) else None)
            with self._lock:
                end = time.monotonic()
                del self._leases[lease.id]
                if error is None:
                    self._proven += 1
                if not self._leases and self._busy_since is not None:
                    self._busy_closed_s += end - self._busy_since
                    if self.intervals is not None:
                        self.intervals.append((self._busy_since, end))
                    self._busy_since = None

    # ---- reads: everything below is computed from the open leases --------------------------

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._leases)

    def current(self) -> Lease | None:
        """The most recently opened lease still open."""
        with self._lock:
            if not self._leases:
                return None
            return self._leases[max(self._leases)]

    def open_leases(self) -> list[Lease]:
        with self._lock:
            return list(self._leases.values())

    def busy_seconds(self) -> float:
        """Closed busy time plus the in-flight part; never decreases."""
        with self._lock:
            now = time.monotonic()
            inflight = 0.0 if self._busy_since is None else now - self._busy_since
            return self._busy_closed_s + inflight

    def sample(self) -> tuple[bool, float, Lease | None]:
        """(busy, busy_seconds, current lease) read atomically."""
        with self._lock:
            now = time.monotonic()
            lease = self._leases[max(self._leases)] if self._leases else None
            inflight = 0.0 if self._busy_since is None else now - self._busy_since
            return lease is not None, self._busy_closed_s + inflight, lease

    @property
    def partitions_proven(self) -> int:
        with self._lock:
            return self._proven

    def view(self, paused: bool) -> WorkerView:
        """This worker read now: busy, current lease and its age, all from one locked read."""
        with self._lock:
            now = time.monotonic()
            lease = self._leases[max(self._leases)] if self._leases else None
            inflight = 0.0 if self._busy_since is None else now - self._busy_since
            seconds = self._busy_closed_s + inflight
            proven = self._proven
        return WorkerView(
            id=self.id,
            device=self.device,
            busy=lease is not None,
            paused=paused,
            job_id=lease.job.id if lease else None,
            proof_kind=lease.job.proof_kind if lease else None,
            partition=lease.partition.index if lease else None,
            busy_seconds=seconds,
            lease_age_s=now - lease.started if lease else 0.0,
            partitions_proven=proven,
        )
