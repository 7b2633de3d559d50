"""The wire protocol, spelled once: the names and the JSON shapes of the HTTP API.

Clients send and receive these strings (``priority`` in ``POST /v1/proofs``, the CLI's
``--priority``, each job's ``state`` and each partition's ``phase``, the ``phase`` and
``status`` labels of the metrics), so changing one is a protocol change. The engine builds its
answers in these shapes, the API serves them, the OpenAPI document is generated from them
(``cuzk.api.openapi``) and the CLI reads them. Only the standard library (and typing_extensions)
is imported here, so a client pays nothing for it; the requests, which the server validates
with pydantic, are declared beside it in ``cuzk.protocol_requests``.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeVar, get_args

from typing_extensions import TypedDict, TypeIs  # pydantic reads TypedDicts from here on 3.11

# ---- names ------------------------------------------------------------------------------

Priority = Literal["critical", "high", "normal", "low"]
"""Most urgent first; the scheduler serves a lower rank first."""
PRIORITIES: tuple[str, ...] = get_args(Priority)
PRIORITY_RANK: dict[str, int] = {name: rank for rank, name in enumerate(PRIORITIES)}
DEFAULT_PRIORITY: Priority = "normal"

ActivePhase = Literal[
    "queued_synthesis",
    "waiting_memory",
    "loading_key",
    "synthesizing",
    "queued_gpu",
    "proving",
    "finalizing",
]
"""A partition's phase while it is in flight, in pipeline order (docs/design.md section 2).

``queued_synthesis``: in the queue for a synthesis thread (on a cluster head, also while its
thread waits for a free CPU worker: ``synthesizing`` means a worker holds it).
``waiting_memory``: its memory reservation is waiting, and only then. ``loading_key``: granted,
while its kind's proving key loads (read from disk, checked, uploaded), by its own thread or
another partition's.
``synthesizing``: a synthesis thread holds it (proving key, reservation, witness, a/b/c).
``queued_gpu``: waiting for a GPU worker. ``proving``: a GPU worker's lease on it is open.
``finalizing``: handed to the finalizer pool.
"""
PartitionOutcome = Literal["done", "failed", "cancelled"]
Phase = Literal[ActivePhase, PartitionOutcome]
ACTIVE_PHASES: tuple[str, ...] = get_args(ActivePhase)
PARTITION_OUTCOMES: tuple[str, ...] = get_args(PartitionOutcome)
PARTITION_PHASES: tuple[str, ...] = ACTIVE_PHASES + PARTITION_OUTCOMES
PredictedPhase = Literal["synthesizing", "proving", "finalizing"]
PREDICTED_PHASES: tuple[str, ...] = get_args(PredictedPhase)
"""The phases whose measured durations predict a finish (``phase_seconds`` keys): work on a
synthesis thread (without its memory wait), on a GPU worker, on a finalizer."""

JobOutcome = Literal["succeeded", "failed", "cancelled", "deadline_exceeded"]
JobState = Literal["queued", "running", JobOutcome]
"""``queued``: accepted, no partition has reached a synthesis thread; ``running``; an outcome.
``deadline_exceeded``: the job's deadline passed under the ``cancel`` miss policy; its
unstarted partitions were dropped (a job of a ``continue`` kind finishes instead and is marked
``deadline_missed``)."""
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


def _is_priority(name: str) -> TypeIs[Priority]:
    return name in PRIORITIES


def _is_phase(name: str) -> TypeIs[Phase]:
    return name in PARTITION_PHASES


def _is_job_state(name: str) -> TypeIs[JobState]:
    return name in JOB_STATES


def priority_of(name: str) -> Priority:
    """``name`` as a wire priority (ValueError for a name the protocol has not)."""
    if not _is_priority(name):
        raise ValueError(f"{name!r} is not a priority ({', '.join(PRIORITIES)})")
    return name


def phase_of(name: str) -> Phase:
    """``name`` as a wire partition phase (ValueError for a name the protocol has not)."""
    if not _is_phase(name):
        raise ValueError(f"{name!r} is not a partition phase")
    return name


def job_state_of(name: str) -> JobState:
    """``name`` as a wire job state (ValueError for a name the protocol has not)."""
    if not _is_job_state(name):
        raise ValueError(f"{name!r} is not a job state")
    return name


DeadlineMissPolicy = Literal["cancel", "continue"]
"""What happens to a job whose deadline passes: ``cancel`` drops its unstarted partitions and
ends it ``deadline_exceeded`` (a partition already on a GPU is never interrupted);
``continue`` lets it finish (counted as a miss)."""
DEADLINE_MISS_POLICIES: tuple[str, ...] = get_args(DeadlineMissPolicy)
DeadlineAdmission = Literal["reject", "accept"]
"""A submit whose deadline cannot be met even at the front of its priority class: ``reject``
answers 503 with a :class:`DeadlineRejection` body; ``accept`` takes it, flagged at risk."""
DEADLINE_ADMISSIONS: tuple[str, ...] = get_args(DeadlineAdmission)
RejectReason = Literal["deadline", "memory", "unavailable"]
"""``cuzk_jobs_rejected_total`` reasons for a well-formed submit of a known proof kind that the
server refused: its deadline cannot be met (503); a partition larger than the memory budget
(507); the engine is draining or its journal cannot be written (503). Bad input (400/409/422)
is the client's error and, like every bad request, changes nothing, counters included."""
REJECT_REASONS: tuple[str, ...] = get_args(RejectReason)
ParseRefusal = Literal["busy", "too_large"]
"""Why a submit body was not parsed (``cuzk_memory_request_parse_refused_total``): the request
parse reserve had no room for it now (``busy``: 503, retry) or its parsing needs more than the
whole reserve (``too_large``: 413)."""
PARSE_REFUSALS: tuple[str, ...] = get_args(ParseRefusal)
DEADLINE_REJECTED_STATUS = 503
"""The status of a submit refused because its deadline cannot be met (``DeadlineRejection``
body, no ``Retry-After``: a later retry here would be later still; send it elsewhere)."""

# ---- shapes -----------------------------------------------------------------------------
# Each body is a TypedDict (no import cost for a client). ``__pydantic_config__`` is read only
# where the OpenAPI document is generated: a shape lists every field it may carry (``closed``),
# field docstrings become descriptions.
_CLOSED = {"extra": "forbid", "use_attribute_docstrings": True}
_OPEN = {"extra": "allow", "use_attribute_docstrings": True}
_CONFIG = "__pydantic_config__"  # set after the class body: a TypedDict body holds fields only
_Shape = TypeVar("_Shape")


def _closed(shape: type[_Shape]) -> type[_Shape]:
    """A shape that lists every field it may carry."""
    setattr(shape, _CONFIG, _CLOSED)
    return shape


def _open(shape: type[_Shape]) -> type[_Shape]:
    """A shape that may carry fields beyond those listed."""
    setattr(shape, _CONFIG, _OPEN)
    return shape


# ---- requests ---------------------------------------------------------------------------
WITNESS_SUBMIT_PATH = "/v1/proofs/witness"
"""``POST``: a job proven from witnesses made elsewhere (a native generator), not inputs. The
body is the partitions' .wtns files back to back, in partition order (each file is
self-delimiting); the query carries what ``SubmitRequest`` carries beside ``inputs``
(``WitnessSubmitQuery``). Answered like ``POST /v1/proofs``."""
WITNESS_MEDIA_TYPE = "application/octet-stream"
"""The only Content-Type ``WITNESS_SUBMIT_PATH`` takes (415 otherwise)."""

# What a client sends (``SubmitRequest``, the proof long-poll's query) is declared in
# ``cuzk.protocol_requests``: pydantic validates requests with those shapes, and a client that
# imports this module does not pay for pydantic.


# ---- jobs -------------------------------------------------------------------------------


@_closed
class PartitionInfo(TypedDict):
    index: int
    phase: Phase
    phase_ms: dict[str, float]
    """Milliseconds spent in each phase so far, the current one included."""
    worker: str | None
    """The GPU worker that proved it (or is proving it)."""
    error: str | None
    step: str | None
    """The prover's step now running within the phase ("witness", "H", "MSM B1 done, 2/5",
    ...), where the prover reports steps (not on a cluster's remote workers); None between."""


@_closed
class ProofEntry(TypedDict):
    proof: dict[str, Any]
    """snarkjs ``proof.json``."""
    public: list[Any]
    """snarkjs ``public.json``."""


@_closed
class JobTimings(TypedDict):
    submitted_at: float
    """Wall-clock seconds (Unix time)."""
    finished_at: float | None
    duration_ms: float
    """From submit to the outcome (to now while the job runs)."""


@_closed
class JobDeadline(TypedDict):
    """A job's deadline and how it stands against it."""

    at: float
    """The deadline, wall-clock seconds (Unix time)."""
    predicted_finish: float | None
    """When the engine predicts the job will finish (Unix time), from measured phase
    durations and the work ahead of it; null while no duration of its kind is known, and once
    the job is finished."""
    slack_s: float | None
    """Deadline minus predicted finish (negative: predicted late); null when not predicted."""
    at_risk: bool
    """Predicted to miss (``slack_s`` < 0), or admitted although infeasible."""
    missed: bool
    """The job finished after its deadline (any outcome), or was cut at it."""
    on_miss: DeadlineMissPolicy


@_closed
class DeadlineRejection(TypedDict):
    """The 503 body of a submit refused because its deadline cannot be met."""

    error: str
    reason: Literal["deadline"]
    proof_kind: str
    deadline: str
    """RFC 3339, as requested (or the kind's default)."""
    predicted_finish: str
    """RFC 3339: the earliest finish the engine predicts, even at the front of its class."""
    slack_s: float
    """Negative: how late it would be."""


@_closed
class JobInfo(TypedDict):
    """A job, as ``POST /v1/proofs``, ``GET/DELETE /v1/proofs/{id}`` and the status return it."""

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
    deadline: JobDeadline | None
    """Present (not null) for a job with a deadline."""


# ---- status -----------------------------------------------------------------------------


@_closed
class WorkerInfo(TypedDict):
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


@_closed
class ClusterWorkerInfo(TypedDict):
    """One worker actor of a cluster node, as its own snapshot reported it (or did not)."""

    id: str
    kind: ClusterWorkerKind
    state: WorkerState
    """From the actor's open leases; ``unreachable`` when it did not answer within 1 s."""
    job_id: str | None
    partition: int | None
    partitions_done: int | None
    """Steps this actor process completed since it started; None when unreachable."""
    metrics_url: str | None


@_closed
class NodeReservations(TypedDict):
    budget_bytes: int
    """This node's ledger in the head (sized from its object store)."""
    reserved_bytes: int


@_closed
class NodeInfo(TypedDict):
    """A node of the cluster (``cuzk serve --cluster``)."""

    id: str
    role: NodeRole
    address: str
    workers: list[ClusterWorkerInfo]
    reservations: NodeReservations


@_closed
class MemoryWaiterInfo(TypedDict):
    consumer: str
    bytes: int
    """What the waiter needs now: its working memory, plus its kind's proving key when that
    key has no slot (neither resident nor loading)."""
    key_bytes: int
    """Of ``bytes``, the proving key's: 0 once its kind's key is resident or loading."""
    priority: Priority | None
    job_id: str | None
    partition: int | None


@_closed
class MemoryBudgetInfo(TypedDict):
    name: str
    budget_bytes: int
    reserved_bytes: int
    free_bytes: int
    reserved_by_consumer: dict[str, int]
    waiters: list[MemoryWaiterInfo]
    evictions: int
    evicted_bytes: int


@_closed
class MemoryInfo(MemoryBudgetInfo):
    devices: dict[str, MemoryBudgetInfo]
    """One budget per GPU device (CUDA backend), by device name."""
    request_parse: MemoryBudgetInfo
    """The reserve submit bodies are parsed in (``engine.request_parse_reserve_bytes``), apart
    from the host budget so proving never refuses a submit's parsing."""
    request_parse_refused: dict[str, int]
    """Submit bodies the reserve refused since start, by reason (``busy``, ``too_large``)."""


@_closed
class KeyInfo(TypedDict):
    proof_kind: str
    host_bytes: int
    msm_table_bytes: int
    """Of host_bytes, the CPU MSMs' precomputed window tables; 0 when the key has none
    (``[prover] msm_precompute``)."""
    device_bytes: dict[str, int]
    in_use: int
    idle_s: float
    loaded_at: float
    evict_requested: bool


EstimateSource = Literal["measured", "journal", "configured", "prior"]


@_closed
class PhaseEstimate(TypedDict):
    """One figure the predictions use: seconds of a partition phase of a kind."""

    seconds: float
    source: EstimateSource
    """``measured`` in this process; anything else is a prior until then: ``journal`` (the
    last run's measurement), ``configured`` (``phase_seconds``), ``prior`` (the prover's, from
    the key's sizes at this machine's measured rates)."""


@_closed
class QueueDepths(TypedDict):
    pending: int
    """Partitions waiting for a synthesis thread."""
    gpu: int
    finalize: int


@_closed
class CounterTotals(TypedDict):
    jobs_submitted: dict[str, int]
    """By proof kind."""
    jobs_completed: dict[str, int]
    """By ``<proof kind>/<outcome>``."""
    worker_partitions: dict[str, int]
    """By ``<worker>/<proof kind>``."""
    deadlines_missed: dict[str, int]
    """By proof kind: jobs that finished after (or were cut at) their deadline."""
    jobs_rejected: dict[str, int]
    """By ``<proof kind>/<reason>``."""
    partition_retries: dict[str, int]
    """Steps run again after their worker or data was lost, by ``<phase>/<reason>``."""


@_closed
class StatusInfo(TypedDict):
    """``GET /v1/status``: one snapshot, computed from open leases and scopes when asked."""

    time: float
    uptime_s: float
    version: str
    backend: str
    field_arith: str
    """The CPU MSMs' field multiply: bmi2-adx, portable, arkworks (no native MSM), or n/a."""
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
    backlog_gpu_seconds: dict[str, float]
    """Predicted GPU-seconds of queued and running work, by priority (the autoscaling
    signal); only work whose kind has a figure counts (``phase_estimates``: measured, or a
    prior, so a kind never proven here counts from its first job)."""
    phase_estimates: dict[str, dict[str, PhaseEstimate]]
    """Proof kind -> phase (synthesizing, proving, finalizing) -> the figure predictions use."""
    nodes: list[NodeInfo]
    """Cluster nodes (``cuzk serve --cluster``); empty for the single-process engine."""
    not_ready: str | None
    """Why ``/readyz`` answers 503 now (draining, journal unwritable, a cluster with no GPU
    worker and why); null when ready."""


# ---- circuits, keys, workers, health ----------------------------------------------------


@_closed
class CircuitInfo(TypedDict):
    proof_kind: str
    partitions: int
    priority: Priority
    resident: bool
    sizes: dict[str, int] | None
    key_host_bytes: int | None


@_closed
class CircuitList(TypedDict):
    circuits: list[CircuitInfo]


@_closed
class KeyPreloadInfo(CircuitInfo):
    host_bytes: int


@_closed
class KeyEvictInfo(CircuitInfo):
    result: KeyEvictResult


@_closed
class WorkersPausedInfo(TypedDict):
    workers_paused: bool


@_closed
class Health(TypedDict):
    status: Literal["ok"]
    version: str


@_closed
class Readiness(TypedDict):
    status: Literal["ready", "not ready"]
    reason: NotRequired[str]
    """Why not ready: not started, draining, the journal cannot be written."""


@_open
class VerificationKey(TypedDict):
    """snarkjs's ``verification_key.json`` (what ``snarkjs zkey export verificationkey``
    writes, ``vk_alphabeta_12`` included), for ``snarkjs groth16 verify``."""

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


@_closed
class Error(TypedDict):
    error: str
    """What is wrong, for a human."""


@_closed
class ServerFault(TypedDict):
    """A server-side fault. When a server-side file (proving key, circuit) is at fault,
    ``file`` names it, ``section`` the part of it that is wrong (when known) and ``problem``
    says what is wrong; ``error`` repeats all of it for a human."""

    error: str
    file: NotRequired[str]
    section: NotRequired[str]
    problem: NotRequired[str]
