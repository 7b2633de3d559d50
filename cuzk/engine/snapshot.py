"""The engine's one typed, immutable answer to "what is happening now" (``Engine.snapshot()``).

Every field is computed when the snapshot is taken, from what is open at that moment: worker
leases, partition phase scopes, memory reservations and waiters. The Prometheus collector,
``GET /v1/status`` and ``cuzk status`` all read it; ``to_wire()`` gives the JSON shapes of
``cuzk.protocol``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cuzk.protocol import (
    PRIORITIES,
    JobInfo,
    KeyInfo,
    MemoryBudgetInfo,
    MemoryInfo,
    NodeInfo,
    PartitionInfo,
    StatusInfo,
    WorkerInfo,
)


@dataclass(frozen=True, slots=True)
class PartitionView:
    index: int
    phase: str
    phase_ms: Mapping[str, float]
    worker: str | None
    error: str | None

    def to_wire(self) -> PartitionInfo:
        return {
            "index": self.index,
            "phase": self.phase,  # type: ignore[typeddict-item]
            "phase_ms": dict(self.phase_ms),
            "worker": self.worker,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class JobView:
    id: str
    request_id: str | None
    proof_kind: str
    priority: str
    state: str
    attempt: int
    trace_id: str | None
    partitions: tuple[PartitionView, ...]
    proofs: tuple[tuple[Mapping[str, Any], tuple[Any, ...]], ...] | None
    error: str | None
    submitted_at: float
    finished_at: float | None
    duration_s: float

    def to_wire(self) -> JobInfo:
        return {
            "id": self.id,
            "request_id": self.request_id,
            "proof_kind": self.proof_kind,
            "priority": self.priority,  # type: ignore[typeddict-item]
            "state": self.state,  # type: ignore[typeddict-item]
            "attempt": self.attempt,
            "trace_id": self.trace_id,
            "partitions": [p.to_wire() for p in self.partitions],
            "proofs": None if self.proofs is None else [
                {"proof": dict(proof), "public": list(public)} for proof, public in self.proofs
            ],
            "error": self.error,
            "timings": {
                "submitted_at": self.submitted_at,
                "finished_at": self.finished_at,
                "duration_ms": round(self.duration_s * 1000.0, 3),
            },
        }


@dataclass(frozen=True, slots=True)
class ClusterWorkerView:
    """A worker actor as its own snapshot answered (state ``unreachable`` when it did not)."""

    id: str
    kind: str  # "gpu" | "cpu"
    state: str  # cuzk.protocol.WorkerState
    job_id: str | None = None
    partition: int | None = None
    partitions_done: int | None = None
    metrics_url: str | None = None


@dataclass(frozen=True, slots=True)
class NodeView:
    """One cluster node: its workers and its memory ledger in the head."""

    id: str
    role: str  # cuzk.protocol.NodeRole
    address: str
    workers: tuple[ClusterWorkerView, ...]
    budget_bytes: int
    reserved_bytes: int

    def to_wire(self) -> NodeInfo:
        return {
            "id": self.id,
            "role": self.role,  # type: ignore[typeddict-item]
            "address": self.address,
            "workers": [{
                "id": w.id, "kind": w.kind,  # type: ignore[typeddict-item]
                "state": w.state,  # type: ignore[typeddict-item]
                "job_id": w.job_id, "partition": w.partition,
                "partitions_done": w.partitions_done, "metrics_url": w.metrics_url,
            } for w in self.workers],
            "reservations": {"budget_bytes": self.budget_bytes,
                             "reserved_bytes": self.reserved_bytes},
        }


@dataclass(frozen=True, slots=True)
class WorkerView:
    id: str
    device: str
    busy: bool
    paused: bool
    job_id: str | None
    proof_kind: str | None
    partition: int | None
    busy_seconds: float
    lease_age_s: float  # 0.0 when idle
    partitions_proven: int

    def to_wire(self) -> WorkerInfo:
        return {
            "id": self.id,
            "device": self.device,
            "state": "proving" if self.busy else "idle",
            "paused": self.paused,
            "job_id": self.job_id,
            "proof_kind": self.proof_kind,
            "partition": self.partition,
            "busy_seconds": round(self.busy_seconds, 6),
            "lease_age_seconds": round(self.lease_age_s, 6),
            "partitions_proven": self.partitions_proven,
        }


@dataclass(frozen=True, slots=True)
class WaiterView:
    consumer: str
    nbytes: int
    priority_rank: int
    job_id: str | None  # set when the waiter is a partition's reservation
    partition: int | None
    proof_kind: str | None


@dataclass(frozen=True, slots=True)
class BudgetView:
    name: str
    budget_bytes: int
    reserved_bytes: int
    reserved_by_consumer: Mapping[str, int]
    waiters: tuple[WaiterView, ...]
    evictions: int
    evicted_bytes: int

    def to_wire(self) -> MemoryBudgetInfo:
        return {
            "name": self.name,
            "budget_bytes": self.budget_bytes,
            "reserved_bytes": self.reserved_bytes,
            "free_bytes": self.budget_bytes - self.reserved_bytes,
            "reserved_by_consumer": dict(self.reserved_by_consumer),
            "waiters": [
                {
                    "consumer": w.consumer,
                    "bytes": w.nbytes,
                    "priority": (PRIORITIES[w.priority_rank]  # type: ignore[typeddict-item]
                                 if 0 <= w.priority_rank < len(PRIORITIES) else None),
                    "job_id": w.job_id,
                    "partition": w.partition,
                }
                for w in self.waiters
            ],
            "evictions": self.evictions,
            "evicted_bytes": self.evicted_bytes,
        }


@dataclass(frozen=True, slots=True)
class KeyView:
    proof_kind: str
    host_bytes: int
    device_bytes: Mapping[str, int]
    in_use: int
    idle_s: float
    loaded_at: float
    evict_requested: bool

    def to_wire(self) -> KeyInfo:
        return {
            "proof_kind": self.proof_kind,
            "host_bytes": self.host_bytes,
            "device_bytes": dict(self.device_bytes),
            "in_use": self.in_use,
            "idle_s": self.idle_s,
            "loaded_at": self.loaded_at,
            "evict_requested": self.evict_requested,
        }


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """Everything an operator can ask about, read at one moment.

    ``partition_phases`` and ``jobs_queued`` cover unfinished jobs and are pre-filled with
    zeros for every configured proof kind (and phase, and the kind's priority), so a series
    exists before its first event. ``memory.waiters`` and the ``waiting_memory`` counts come
    from the same read of the host budget, so they always agree.
    """

    time: float  # wall clock
    uptime_s: float
    version: str
    backend: str
    paused: bool
    queues: Mapping[str, int]
    workers: tuple[WorkerView, ...]
    jobs: tuple[JobView, ...]  # unfinished (arrival order), then recently finished
    partition_phases: Mapping[tuple[str, str], int]  # (proof_kind, phase) -> n
    jobs_queued: Mapping[tuple[str, str], int]  # (proof_kind, priority) -> n
    memory: BudgetView
    device_memory: Mapping[str, BudgetView]
    keys: tuple[KeyView, ...]
    jobs_submitted: Mapping[str, int]
    jobs_completed: Mapping[tuple[str, str], int]  # (proof_kind, outcome)
    worker_partitions: Mapping[tuple[str, str, str], int]  # (worker, device, proof_kind)
    spans_open: int  # engine spans not yet ended: 0 when idle (a leak check from outside)
    # Unfinished jobs found in the journal at start: (proof_kind, outcome) -> count.
    jobs_recovered: Mapping[tuple[str, str], int] = field(default_factory=dict)
    # Steps run again after a lost worker or lost data: (phase, reason) -> count.
    partition_retries: Mapping[tuple[str, str], int] = field(default_factory=dict)
    nodes: tuple[NodeView, ...] = ()  # cluster nodes; empty for the single-process engine

    def to_wire(self) -> StatusInfo:
        phases: dict[str, dict[str, int]] = {}
        for (kind, phase), n in self.partition_phases.items():
            phases.setdefault(kind, {})[phase] = n
        memory: MemoryInfo = {
            **self.memory.to_wire(),  # type: ignore[typeddict-item]
            "devices": {name: b.to_wire() for name, b in self.device_memory.items()},
        }
        return {
            "time": self.time,
            "uptime_s": round(self.uptime_s, 3),
            "version": self.version,
            "backend": self.backend,
            "paused": self.paused,
            "queues": {
                "pending": self.queues.get("pending", 0),
                "gpu": self.queues.get("gpu", 0),
                "finalize": self.queues.get("finalize", 0),
            },
            "workers": [w.to_wire() for w in self.workers],
            "partition_phases": phases,
            "jobs": [j.to_wire() for j in self.jobs],
            "memory": memory,
            "keys": [k.to_wire() for k in self.keys],
            "spans_open": self.spans_open,
            "counters": {
                "jobs_submitted": dict(self.jobs_submitted),
                "jobs_completed": {f"{k}/{s}": n for (k, s), n in self.jobs_completed.items()},
                "worker_partitions": _by_worker_kind(self.worker_partitions),
                "partition_retries": {
                    f"{phase}/{reason}": n
                    for (phase, reason), n in sorted(self.partition_retries.items())},
            },
            "nodes": [n.to_wire() for n in self.nodes],
        }


def _by_worker_kind(table: Mapping[tuple[str, str, str], int]) -> dict[str, int]:
    return {f"{worker}/{kind}": n for (worker, _device, kind), n in table.items()}
