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
    ClusterWorkerKind,
    JobInfo,
    KeyInfo,
    MemoryBudgetInfo,
    MemoryInfo,
    NodeInfo,
    NodeRole,
    PartitionInfo,
    StatusInfo,
    WorkerInfo,
    WorkerState,
    job_state_of,
    phase_of,
    priority_of,
)


@dataclass(frozen=True, slots=True)
class PartitionView:
    index: int
    phase: str
    phase_ms: Mapping[str, float]
    worker: str | None
    error: str | None
    step: str | None = None

    def to_wire(self) -> PartitionInfo:
        return {
            "index": self.index,
            "phase": phase_of(self.phase),
            "phase_ms": dict(self.phase_ms),
            "worker": self.worker,
            "error": self.error,
            "step": self.step,
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
    deadline: float | None = None  # wall clock
    on_miss: str = "continue"
    predicted_finish: float | None = None  # wall clock; None once finished or not predicted
    deadline_missed: bool = False
    admitted_at_risk: bool = False

    @property
    def slack_s(self) -> float | None:
        """Deadline minus predicted finish; None without both."""
        if self.deadline is None or self.predicted_finish is None:
            return None
        return self.deadline - self.predicted_finish

    @property
    def at_risk(self) -> bool:
        slack = self.slack_s
        return self.admitted_at_risk or (slack is not None and slack < 0)

    def to_wire(self) -> JobInfo:
        return {
            "id": self.id,
            "request_id": self.request_id,
            "proof_kind": self.proof_kind,
            "priority": priority_of(self.priority),
            "state": job_state_of(self.state),
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
            "deadline": None if self.deadline is None else {
                "at": self.deadline,
                "predicted_finish": self.predicted_finish,
                "slack_s": None if self.slack_s is None else round(self.slack_s, 3),
                "at_risk": self.at_risk,
                "missed": self.deadline_missed,
                "on_miss": self.on_miss,  # type: ignore[typeddict-item]
            },
        }


@dataclass(frozen=True, slots=True)
class ClusterWorkerView:
    """A worker actor as its own snapshot answered (state ``unreachable`` when it did not)."""

    id: str
    kind: ClusterWorkerKind
    state: WorkerState
    job_id: str | None = None
    partition: int | None = None
    partitions_done: int | None = None
    metrics_url: str | None = None


@dataclass(frozen=True, slots=True)
class NodeView:
    """One cluster node: its workers and its memory ledger in the head."""

    id: str
    role: NodeRole
    address: str
    workers: tuple[ClusterWorkerView, ...]
    budget_bytes: int
    reserved_bytes: int

    def to_wire(self) -> NodeInfo:
        return {
            "id": self.id,
            "role": self.role,
            "address": self.address,
            "workers": [{
                "id": w.id, "kind": w.kind, "state": w.state,
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
    key_bytes: int = 0  # of nbytes, its kind's proving key (0: the key has a slot already)


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
                    "key_bytes": w.key_bytes,
                    "priority": (priority_of(PRIORITIES[w.priority_rank])
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
    msm_table_bytes: int = 0  # of host_bytes, the CPU MSMs' window tables (0: none built)

    def to_wire(self) -> KeyInfo:
        return {
            "proof_kind": self.proof_kind,
            "host_bytes": self.host_bytes,
            "msm_table_bytes": self.msm_table_bytes,
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
    request_parse: BudgetView  # the reserve submit bodies are parsed in, apart from ``memory``
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
    not_ready: str | None = None  # why /readyz answers 503 (a cluster with no GPU worker...)
    field_arith: str = "n/a"  # the prover's CPU MSM multiply (a prover without one: n/a)
    # Host bytes of every proving-key slot by (proof_kind, state: loading, resident,
    # evicting), read with ``memory`` in one step: they sum to its proving_key bytes.
    key_bytes: Mapping[tuple[str, str], int] = field(default_factory=dict)
    # Journaled proofs not served (proven again): (proof_kind, "checksum"|"verification") -> n.
    journal_proofs_rejected: Mapping[tuple[str, str], int] = field(default_factory=dict)
    journal_lost: bool = False  # the journal file was deleted or replaced under the server
    deadlines_missed: Mapping[str, int] = field(default_factory=dict)  # proof_kind -> n
    jobs_rejected: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (kind, reason)
    # Partitions that gave their synthesis thread or memory to a higher class (proof_kind).
    synthesis_preempted: Mapping[str, int] = field(default_factory=dict)
    # Predicted GPU-seconds of queued and running work, by priority (every priority listed).
    backlog_gpu_seconds: Mapping[str, float] = field(default_factory=dict)
    # Submit bodies the request parse reserve refused, by reason (busy, too_large).
    request_parse_refused: Mapping[str, int] = field(default_factory=dict)
    # proof_kind -> phase -> (seconds, source): the figures predictions use (predict.SOURCES).
    phase_estimates: Mapping[str, Mapping[str, tuple[float, str]]] = field(default_factory=dict)

    def min_slack_s(self) -> dict[str, float]:
        """Least slack among unfinished jobs with a predicted deadline, by priority; a
        priority with no such job is absent (not zero: nothing is at risk there)."""
        out: dict[str, float] = {}
        for j in self.jobs:
            slack = j.slack_s
            if j.finished_at is None and slack is not None:
                out[j.priority] = min(slack, out.get(j.priority, slack))
        return out

    def to_wire(self) -> StatusInfo:
        phases: dict[str, dict[str, int]] = {}
        for (kind, phase), n in self.partition_phases.items():
            phases.setdefault(kind, {})[phase] = n
        memory: MemoryInfo = {
            **self.memory.to_wire(),
            "devices": {name: b.to_wire() for name, b in self.device_memory.items()},
            "request_parse": self.request_parse.to_wire(),
            "request_parse_refused": dict(self.request_parse_refused),
        }
        return {
            "time": self.time,
            "uptime_s": round(self.uptime_s, 3),
            "version": self.version,
            "backend": self.backend,
            "field_arith": self.field_arith,
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
                "deadlines_missed": dict(self.deadlines_missed),
                "jobs_rejected": {f"{k}/{r}": n for (k, r), n in self.jobs_rejected.items()},
                "partition_retries": {
                    f"{phase}/{reason}": n
                    for (phase, reason), n in sorted(self.partition_retries.items())},
            },
            "backlog_gpu_seconds": {p: round(v, 6) for p, v in self.backlog_gpu_seconds.items()},
            "phase_estimates": {
                kind: {ph: {"seconds": round(v, 6), "source": src}  # type: ignore[typeddict-item]
                       for ph, (v, src) in phases.items()}
                for kind, phases in sorted(self.phase_estimates.items())},
            "nodes": [n.to_wire() for n in self.nodes],
            "not_ready": self.not_ready,
        }


def _by_worker_kind(table: Mapping[tuple[str, str, str], int]) -> dict[str, int]:
    return {f"{worker}/{kind}": n for (worker, _device, kind), n in table.items()}
