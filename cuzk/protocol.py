"""The wire protocol, spelled once: the names and the JSON shapes of the HTTP API.

Clients send and receive these strings (``priority`` in ``POST /v1/proofs``, the CLI's
``--priority``, each job's ``state`` and each partition's ``phase``, the ``phase`` and
``status`` labels of the metrics), so changing one is a protocol change. The engine builds its
answers in these shapes, the API serves them, the OpenAPI document is generated from them
(``cuzk.api.openapi``) and the CLI reads them. Only the standard library is imported here, so a
client pays nothing for it.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, get_args

from typing_extensions import TypedDict  # pydantic reads TypedDicts from here on Python 3.11

# ---- names ------------------------------------------------------------------------------

Priority = Literal["critical", "high", "normal", "low"]
"""Most urgent first; the scheduler serves a lower rank first."""
PRIORITIES: tuple[str, ...] = get_args(Priority)
PRIORITY_RANK: dict[str, int] = {name: rank for rank, name in enumerate(PRIORITIES)}
DEFAULT_PRIORITY: Priority = "normal"

ActivePhase = Literal[
    "queued_synthesis",
    "waiting_memory",
    "synthesizing",
    "queued_gpu",
    "proving",
    "finalizing",
]
"""A partition's phase while it is in flight, in pipeline order (docs/design.md section 2).

``queued_synthesis``: in the queue for a synthesis thread. ``waiting_memory``: its memory
reservation is waiting, and only then. ``synthesizing``: a synthesis thread holds it (proving
key, reservation, witness, a/b/c). ``queued_gpu``: waiting for a GPU worker. ``proving``: a GPU
worker's lease on it is open. ``finalizing``: handed to the finalizer pool.
"""
PartitionOutcome = Literal["done", "failed", "cancelled"]
Phase = Literal[ActivePhase, PartitionOutcome]
ACTIVE_PHASES: tuple[str, ...] = get_args(ActivePhase)
PARTITION_OUTCOMES: tuple[str, ...] = get_args(PartitionOutcome)
PARTITION_PHASES: tuple[str, ...] = ACTIVE_PHASES + PARTITION_OUTCOMES

JobOutcome = Literal["succeeded", "failed", "cancelled"]
JobState = Literal["queued", "running", JobOutcome]
"""``queued``: accepted, no partition has reached a synthesis thread; ``running``; an outcome."""
JOB_OUTCOMES: tuple[str, ...] = get_args(JobOutcome)
JOB_STATES: tuple[str, ...] = ("queued", "running", *JOB_OUTCOMES)
TERMINAL_STATES: frozenset[str] = frozenset(JOB_OUTCOMES)

WorkerState = Literal["idle", "proving", "unreachable"]
"""A GPU worker is ``proving`` exactly while it holds an open lease. ``unreachable``: a cluster
worker actor that did not answer its snapshot in time (never reported as ``idle``)."""
WORKER_STATES: tuple[str, ...] = get_args(WorkerState)

RetryPhase = Literal["synthesis", "gpu", "finalize"]
RETRY_PHASES: tuple[str, ...] = get_args(RetryPhase)
RetryReason = Literal["worker_lost", "data_lost"]
"""Why a partition's step ran again (``cuzk_partition_retries_total``): the process running it
died or stopped answering (``worker_lost``), or the data it needed went with a node
(``data_lost``: it starts again from synthesis)."""
RETRY_REASONS: tuple[str, ...] = get_args(RetryReason)

NodeRole = Literal["gpu", "cpu"]
"""A cluster node's role: ``gpu`` when it hosts GPU worker actors, else ``cpu`` (synthesis and
finalization only)."""
NODE_ROLES: tuple[str, ...] = get_args(NodeRole)
ClusterWorkerKind = Literal["gpu", "cpu"]

KeyEvictResult = Literal["evicted", "deferred", "not_resident"]

# ---- shapes -----------------------------------------------------------------------------
# Each body is a TypedDict (no import cost for a client). ``__pydantic_config__`` is read only
# where the OpenAPI document is generated: a shape lists every field it may carry (``closed``),
# field docstrings become descriptions.
_CLOSED = {"extra": "forbid", "use_attribute_docstrings": True}
_OPEN = {"extra": "allow", "use_attribute_docstrings": True}

# ---- requests ---------------------------------------------------------------------------


class SubmitRequest(TypedDict):
    """``POST /v1/proofs``."""

    __pydantic_config__ = _CLOSED

    proof_kind: str
    inputs: list[dict[str, Any]]
    """One object of circuit input signals per partition; as many as the kind's partitions."""
    request_id: NotRequired[str]
    """Idempotency key: a repeat returns the same job (a new attempt after failure)."""
    priority: NotRequired[Priority]
    """Defaults to the proof kind's configured priority."""


# ---- jobs -------------------------------------------------------------------------------


class PartitionInfo(TypedDict):
    __pydantic_config__ = _CLOSED
    index: int
    phase: Phase
    phase_ms: dict[str, float]
    """Milliseconds spent in each phase so far, the current one included."""
    worker: str | None
    """The GPU worker that proved it (or is proving it)."""
    error: str | None


class ProofEntry(TypedDict):
    __pydantic_config__ = _CLOSED
    proof: dict[str, Any]
    """snarkjs ``proof.json``."""
    public: list[Any]
    """snarkjs ``public.json``."""


class JobTimings(TypedDict):
    __pydantic_config__ = _CLOSED
    submitted_at: float
    """Wall-clock seconds (Unix time)."""
    finished_at: float | None
    duration_ms: float
    """From submit to the outcome (to now while the job runs)."""


class JobInfo(TypedDict):
    """A job, as ``POST /v1/proofs``, ``GET/DELETE /v1/proofs/{id}`` and the status return it."""

    __pydantic_config__ = _CLOSED

    id: str
    request_id: str | None
    proof_kind: str
    priority: Priority
    state: JobState
    attempt: int
    trace_id: str | None
    partitions: list[PartitionInfo]
    proofs: list[ProofEntry] | None
    """Per partition, once the job succeeded."""
    error: str | None
    timings: JobTimings


# ---- status -----------------------------------------------------------------------------


class WorkerInfo(TypedDict):
    __pydantic_config__ = _CLOSED
    id: str
    device: str
    state: WorkerState
    paused: bool
    """Operators paused the workers: this one takes no new partition."""
    job_id: str | None
    proof_kind: str | None
    partition: int | None
    busy_seconds: float
    """Seconds it held a lease since start, the open lease included; never decreases."""
    lease_age_seconds: float
    """Age of its open lease, 0 when idle."""
    partitions_proven: int


class ClusterWorkerInfo(TypedDict):
    """One worker actor of a cluster node, as its own snapshot reported it (or did not)."""

    __pydantic_config__ = _CLOSED
    id: str
    kind: ClusterWorkerKind
    state: WorkerState
    """From the actor's open leases; ``unreachable`` when it did not answer within 1 s."""
    job_id: str | None
    partition: int | None
    partitions_done: int | None
    """Steps this actor process completed since it started; None when unreachable."""
    metrics_url: str | None


class NodeReservations(TypedDict):
    __pydantic_config__ = _CLOSED
    budget_bytes: int
    """This node's ledger in the head (sized from its object store)."""
    reserved_bytes: int


class NodeInfo(TypedDict):
    """A node of the cluster (``cuzk serve --cluster``)."""

    __pydantic_config__ = _CLOSED
    id: str
    role: NodeRole
    address: str
    workers: list[ClusterWorkerInfo]
    reservations: NodeReservations


class MemoryWaiterInfo(TypedDict):
    __pydantic_config__ = _CLOSED
    consumer: str
    bytes: int
    priority: Priority | None
    job_id: str | None
    partition: int | None


class MemoryBudgetInfo(TypedDict):
    __pydantic_config__ = _CLOSED
    name: str
    budget_bytes: int
    reserved_bytes: int
    free_bytes: int
    reserved_by_consumer: dict[str, int]
    waiters: list[MemoryWaiterInfo]
    evictions: int
    evicted_bytes: int


class MemoryInfo(MemoryBudgetInfo):
    __pydantic_config__ = _CLOSED
    devices: dict[str, MemoryBudgetInfo]
    """One budget per GPU device (CUDA backend), by device name."""


class KeyInfo(TypedDict):
    __pydantic_config__ = _CLOSED
    proof_kind: str
    host_bytes: int
    device_bytes: dict[str, int]
    in_use: int
    idle_s: float
    loaded_at: float
    evict_requested: bool


class QueueDepths(TypedDict):
    __pydantic_config__ = _CLOSED
    pending: int
    """Partitions waiting for a synthesis thread."""
    gpu: int
    finalize: int


class CounterTotals(TypedDict):
    __pydantic_config__ = _CLOSED
    jobs_submitted: dict[str, int]
    """By proof kind."""
    jobs_completed: dict[str, int]
    """By ``<proof kind>/<outcome>``."""
    worker_partitions: dict[str, int]
    """By ``<worker>/<proof kind>``."""
    partition_retries: dict[str, int]
    """Steps run again after their worker or data was lost, by ``<phase>/<reason>``."""


class StatusInfo(TypedDict):
    """``GET /v1/status``: one snapshot, computed from open leases and scopes when asked."""

    __pydantic_config__ = _CLOSED

    time: float
    uptime_s: float
    version: str
    backend: str
    paused: bool
    queues: QueueDepths
    workers: list[WorkerInfo]
    partition_phases: dict[str, dict[str, int]]
    """Unfinished partitions: proof kind -> phase -> count (the ``cuzk_partitions`` gauge)."""
    jobs: list[JobInfo]
    """Every unfinished job, then the most recently finished ones."""
    memory: MemoryInfo
    keys: list[KeyInfo]
    spans_open: int
    """Engine spans not yet ended: 0 when idle (a leak check from outside)."""
    counters: CounterTotals
    nodes: list[NodeInfo]
    """Cluster nodes (``cuzk serve --cluster``); empty for the single-process engine."""


# ---- circuits, keys, workers, health ----------------------------------------------------


class CircuitInfo(TypedDict):
    __pydantic_config__ = _CLOSED
    proof_kind: str
    partitions: int
    priority: Priority
    resident: bool
    sizes: dict[str, int] | None
    key_host_bytes: int | None


class CircuitList(TypedDict):
    __pydantic_config__ = _CLOSED
    circuits: list[CircuitInfo]


class KeyPreloadInfo(CircuitInfo):
    __pydantic_config__ = _CLOSED
    host_bytes: int


class KeyEvictInfo(CircuitInfo):
    __pydantic_config__ = _CLOSED
    result: KeyEvictResult


class WorkersPausedInfo(TypedDict):
    __pydantic_config__ = _CLOSED
    workers_paused: bool


class Health(TypedDict):
    __pydantic_config__ = _CLOSED
    status: Literal["ok"]
    version: str


class Readiness(TypedDict):
    __pydantic_config__ = _CLOSED
    status: Literal["ready", "not ready"]
    reason: NotRequired[str]
    """Why not ready: not started, draining, the journal cannot be written."""


class VerificationKey(TypedDict):
    """snarkjs's ``verification_key.json`` (what ``snarkjs zkey export verificationkey``
    writes, ``vk_alphabeta_12`` included), for ``snarkjs groth16 verify``."""

    __pydantic_config__ = _OPEN
    protocol: Literal["groth16"]
    curve: str
    nPublic: int
    vk_alpha_1: list[Any]
    vk_beta_2: list[Any]
    vk_gamma_2: list[Any]
    vk_delta_2: list[Any]
    vk_alphabeta_12: list[Any]
    IC: list[Any]


SampleInput = dict[str, Any]
"""A proof kind's example input signals for one partition."""


class Error(TypedDict):
    __pydantic_config__ = _CLOSED
    error: str
    """What is wrong, for a human."""


class ServerFault(TypedDict):
    """A server-side fault. When a server-side file (proving key, circuit) is at fault,
    ``file`` names it, ``section`` the part of it that is wrong (when known) and ``problem``
    says what is wrong; ``error`` repeats all of it for a human."""

    __pydantic_config__ = _CLOSED
    error: str
    file: NotRequired[str]
    section: NotRequired[str]
    problem: NotRequired[str]
