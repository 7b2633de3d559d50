"""The seam between the engine and a prover: three steps plus key loading.

The engine never imports ``cuzk.prover`` directly; it talks to a :class:`ProverBackend` so its
concurrency can be tested with a scripted double and its scheduling reused on any prover.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cuzk.engine.witnesses import WitnessRef, WitnessShape


@dataclass(frozen=True)
class PartitionMemory:
    """What one partition reserves: ``partition_bytes`` of host memory before synthesis (its
    ``abc_bytes`` part freed right after the GPU phase, the rest after finalize), and
    ``device_bytes`` on the worker's device for the GPU phase (0 on the CPU backend)."""

    partition_bytes: int
    abc_bytes: int
    device_bytes: int


@dataclass
class KeyHandle:
    """A loaded proving key: the prover's own key object plus what the engine must account for.

    device_bytes is per device (the key is resident on every device the backend uses).
    sizes: circuit sizes for span attributes, ``cuzk.circuit.<name>`` (vars, public, ...).
    """

    proof_kind: str
    key: Any
    host_bytes: int
    device_bytes: int
    estimate: PartitionMemory
    sizes: Mapping[str, int] = field(default_factory=dict)
    msm_table_bytes: int = 0  # of host_bytes, the CPU MSMs' window tables (0: none)


@dataclass(frozen=True)
class PhasePrior:
    """A proof kind's phase durations before any is measured: ``seconds`` per predicted phase
    (``synthesizing``, ``proving``, ``finalizing``), worked out from what the key says (domain
    size, constraint and point counts) and this machine's measured rates; ``basis`` says how,
    in a few words, for the admission span and log. The engine marks every figure it seeds
    from one as a prior until the kind's own phases are measured."""

    seconds: Mapping[str, float]
    basis: str


@dataclass(frozen=True)
class ProofResult:
    """snarkjs-shaped ``proof.json`` and ``public.json`` contents."""

    proof: dict[str, Any]
    public: list[str]


@dataclass(frozen=True)
class StepContext:
    """The partition a step belongs to, for a backend that runs steps elsewhere (a cluster):
    its worker's lease names the job and partition, its ledger uses the priority, and
    ``traceparent`` carries the trace across processes: that of the step's span, or of the
    partition's span when the backend records step spans itself (``remote_step_spans``)."""

    job_id: str
    proof_kind: str
    partition: int
    priority: str
    traceparent: str | None
    # For a backend whose synthesis waits for a free remote worker
    # (``ProverBackend.synthesis_waits_for_worker``): ``worker_taken()`` once a worker holds
    # the partition (it reads ``synthesizing`` from then, ``queued_synthesis`` before), so
    # ``synthesizing`` means a worker holds it, as in one process. None: no such wait.
    worker_taken: Callable[[], None] | None = None
    # Called by such a backend once the remote worker has handed the result back and before
    # that worker takes other work: the partition reads ``queued_gpu`` (nested, not counted as
    # synthesis) until the engine moves it on, so a freed worker's next partition and this one
    # never both read ``synthesizing``. None: no such hand-back.
    worker_released: Callable[[], None] | None = None


STEP: ContextVar[StepContext | None] = ContextVar("cuzk_step", default=None)
"""Set by the engine around each ``synthesize``/``gpu_phase``/``finalize`` call."""


class PhaseLost(Exception):
    """A step's work was lost with the process or node running it, not through the job's fault.

    The engine runs it again (journal-safe: nothing was committed) and counts it in
    ``cuzk_partition_retries_total{phase,reason}``. ``redo``: ``"gpu"`` when the synthesis
    survived and only the GPU phase runs again, ``"synthesis"`` when the partition starts over.
    """

    def __init__(self, phase: str, reason: str, redo: str, message: str) -> None:
        super().__init__(message)
        self.phase = phase
        self.reason = reason
        self.redo = redo


@runtime_checkable
class ProverBackend(Protocol):
    """What the engine calls, every capability declared (no method is looked up by name).
    Every method may be called from any engine thread.

    A prover that has nothing to say for a capability answers the neutral value its docstring
    names (``None``, ``0``, a no-op), never leaves the method out.
    """

    @property
    def name(self) -> str:
        """The backend's name, "cpu" or "cuda" (the build_info label)."""
        ...

    @property
    def devices(self) -> Sequence[str]:
        """Device labels GPU workers run on: ["cpu"] or ["cuda:0", ...]."""
        ...

    @property
    def remote_step_spans(self) -> bool:
        """True when each step records its own span (``cuzk.synthesis``, ``cuzk.gpu``,
        ``cuzk.finalize``) in the process that runs it, as a child of
        ``StepContext.traceparent`` (a cluster's worker actors); the engine then records none
        of the three, so no step is recorded twice. False: the engine records them here."""
        ...

    @property
    def synthesis_waits_for_worker(self) -> bool:
        """True when ``synthesize`` first waits for a free remote worker (a cluster's CPU
        workers): the engine then shows the partition ``queued_synthesis`` (nested in
        ``synthesizing``) from its admission until the backend calls
        ``StepContext.worker_taken``, so ``synthesizing`` means a worker holds it. False: the
        engine's own thread synthesizes."""
        ...

    @property
    def field_arith(self) -> str:
        """The CPU MSMs' field multiply ("mulx-adx", "portable", ...); "n/a" for a prover
        without CPU MSMs of its own."""
        ...

    def device_memory_bytes(self, device: str) -> int | None:
        """Total memory of a device, or None when it has none of its own (CPU)."""
        ...

    def device_pci_bus_id(self, device: str) -> str | None:
        """The PCI bus id of a CUDA device, so telemetry finds that device in NVML (whose
        numbering differs from CUDA's); None when unknown or not a CUDA device."""
        ...

    def key_bytes_hint(self, proof_kind: str) -> int:
        """Host bytes loading this key will take, known before loading (reserved first)."""
        ...

    def runtime_host_bytes(self) -> int:
        """Host bytes the prover holds once per process whatever its kinds (a runtime its
        circuits run in), which the engine reserves for the process's life (0: none)."""
        ...

    def key_device_bytes_hint(self, proof_kind: str) -> int:
        """The key's device bytes per device, known before loading (0: known only after
        :meth:`load_key`, or no device)."""
        ...

    def partition_memory_hint(self, proof_kind: str) -> PartitionMemory | None:
        """What one partition will reserve, known before loading (None: only after)."""
        ...

    def phase_prior(self, proof_kind: str) -> PhasePrior | None:
        """The kind's phase durations before it is proven here (:class:`PhasePrior`), so
        admission can predict the first job; None when this prover cannot tell (the engine
        then predicts the kind only once its phases are measured or configured)."""
        ...

    def check_inputs(self, proof_kind: str, inputs: Sequence[Mapping[str, Any]]) -> None:
        """Raise cuzk.errors.WitnessError for inputs the kind can never take, called by submit
        before anything changes so bad inputs are refused rather than failing a job later
        (a no-op for a prover that cannot tell)."""
        ...

    def verification_key(self, proof_kind: str) -> dict[str, Any]:
        """The snarkjs-format verification key of the kind's proving key (raises
        cuzk.errors.CuzkError when the prover has no keys)."""
        ...

    def load_key(self, proof_kind: str) -> KeyHandle:
        """Load and check the proving key on the host; ``device_bytes`` of the handle is what
        :meth:`upload_key` will take per device."""
        ...

    def upload_key(self, handle: KeyHandle) -> None:
        """Upload a loaded key to every device, called only once its device bytes are reserved
        (a no-op for a prover that keeps keys on the host)."""
        ...

    def unload_key(self, handle: KeyHandle) -> None:
        """Drop a key from every device; the engine drops its host reference."""
        ...

    def synthesize(self, key: KeyHandle, inputs: Mapping[str, Any] | WitnessRef) -> Any:
        """CPU: witness and a/b/c evaluations. Bad inputs raise cuzk.errors.WitnessError.
        Given a :class:`WitnessRef` (a witness submitted ready-made), no witness generator
        runs: its bytes are read, checked and used as they are; a witness that does not
        satisfy the constraints raises WitnessError."""
        ...

    def gpu_phase(self, key: KeyHandle, synthesis: Any, device: str) -> Any:
        """Device: H and the MSMs (all five on a CUDA device)."""
        ...

    def gpu_steps(self, gpu_output: Any) -> Mapping[str, float]:
        """Milliseconds of each device step of a GPU phase (H, each MSM), which the engine puts
        on the partition's GPU span so a trace shows where the lease went; empty when this
        prover does not measure them."""
        ...

    def finalize(self, key: KeyHandle, synthesis: Any, gpu_output: Any) -> ProofResult:
        """CPU: assembly and self-verification, and B2 when the GPU phase did not compute it
        (raises cuzk.errors.ProofError)."""
        ...

    def release_abc(self, synthesis: Any) -> None:
        """Drop the a/b/c arrays once the GPU phase no longer needs them."""
        ...

    def input_elements(self, proof_kind: str) -> int | None:
        """Field elements one partition's inputs hold (the front end bounds a submit's body by
        it before parsing); None when this prover cannot tell."""
        ...

    def witness_shape(self, proof_kind: str) -> WitnessShape | None:
        """What a witness of the kind must be (field, variable and public signal counts, from
        its circuit), checked at submit; None when this prover cannot take witnesses."""
        ...

    def verify_proof(
        self, proof_kind: str, proof: Mapping[str, Any], public: Sequence[str]
    ) -> bool | None:
        """Groth16 verification with the kind's verification key: the engine re-verifies
        journaled proofs with it before serving them after a restart. None: this prover cannot
        verify (then only the journal's row checksum is checked)."""
        ...

    def device_ready(self, device: str, timeout: float) -> bool:
        """True when ``device`` can take work now; a GPU worker thread waits on it before
        taking a partition, so nothing leaves the priority queue for a device that is gone
        (a local device is always ready: True at once)."""
        ...

    def discard(self, synthesis: Any) -> None:
        """Called once when the engine drops a synthesis: free what it holds elsewhere (a
        cluster's object refs; a no-op in one process)."""
        ...

    def nodes(self) -> Sequence[Any]:
        """The cluster's nodes (``cuzk.engine.snapshot.NodeView``) for the status; empty for a
        prover in this process."""
        ...

    def gpu_unavailable(self) -> str | None:
        """Why no GPU phase can start now (a cluster with no GPU worker: none joined, or each
        was refused, and why), else None: readiness and deadline admission ask, so that work
        with a deadline is never promised to a GPU that is not there. None in one process."""
        ...

    def close(self) -> None:
        """Release what the prover holds outside this process, at shutdown (a no-op here).

        Steps may raise :class:`PhaseLost`."""
        ...


class InProcessDevices:
    """The cluster-facing part of the seam for a prover whose devices and data live in this
    process (the real prover, the simulated one): its devices are always there, nothing is
    held elsewhere, there are no nodes, nothing to close. A cluster executor answers them
    itself."""

    def device_ready(self, device: str, timeout: float) -> bool:
        return True

    def discard(self, synthesis: Any) -> None:
        """Nothing is held outside this process."""

    def nodes(self) -> list[Any]:
        return []

    def gpu_unavailable(self) -> str | None:
        return None

    def close(self) -> None:
        """Nothing outside this process to let go of."""
