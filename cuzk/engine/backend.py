"""The seam between the engine and a prover: three steps plus key loading.

The engine never imports ``cuzk.prover`` directly; it talks to a :class:`ProverBackend` so its
concurrency can be tested with a scripted double and its scheduling reused on any prover.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


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


@dataclass(frozen=True)
class ProofResult:
    """snarkjs-shaped ``proof.json`` and ``public.json`` contents."""

    proof: dict
    public: list[str]


@dataclass(frozen=True)
class StepContext:
    """The partition a step belongs to, for a backend that runs steps elsewhere (a cluster):
    its worker's lease names the job and partition, its ledger uses the priority, and
    ``traceparent`` (of the step's span) carries the trace across processes."""

    job_id: str
    proof_kind: str
    partition: int
    priority: str
    traceparent: str | None


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
    """What the engine calls. Every method may be called from any engine thread.

    name: "cpu" or "cuda" (the build_info label).
    devices: device labels GPU workers run on: ["cpu"] or ["cuda:0", ...].
    """

    name: str
    devices: Sequence[str]

    def device_memory_bytes(self, device: str) -> int | None:
        """Total memory of a device, or None when it has none of its own (CPU)."""
        ...

    def key_bytes_hint(self, proof_kind: str) -> int:
        """Host bytes loading this key will take, known before loading (reserved first)."""
        ...

    def load_key(self, proof_kind: str) -> KeyHandle:
        """Load (and upload to every device) the proving key of a proof kind."""
        ...

    def unload_key(self, handle: KeyHandle) -> None:
        """Drop a key from every device; the engine drops its host reference."""
        ...

    def synthesize(self, key: KeyHandle, inputs: Mapping[str, Any]) -> Any:
        """CPU: witness and a/b/c evaluations. Bad inputs raise cuzk.errors.WitnessError."""
        ...

    def gpu_phase(self, key: KeyHandle, synthesis: Any, device: str) -> Any:
        """Device: H and the G1 MSMs."""
        ...

    def finalize(self, key: KeyHandle, synthesis: Any, gpu_output: Any) -> ProofResult:
        """CPU: G2 MSM, assembly, self-verification (raises cuzk.errors.ProofError)."""
        ...

    def release_abc(self, synthesis: Any) -> None:
        """Drop the a/b/c arrays once the GPU phase no longer needs them."""
        ...

    # Optional (a cluster executor, cuzk.cluster): ``device_ready(device, timeout) -> bool``,
    # True when a device can take work now (a GPU worker thread waits for it before taking a
    # partition, so nothing is taken from the priority queue for a device that is gone);
    # ``discard(synthesis)``, called once when the engine drops a synthesis (frees what it holds
    # elsewhere); ``nodes() -> list[NodeView]`` for the status; ``close()`` at shutdown.
    # Steps may raise :class:`PhaseLost`. A step's result may carry ``span_attributes`` (a
    # mapping) that the engine puts on the step's span (the node that ran it).
    # Optional: ``check_inputs(proof_kind, inputs)`` raising cuzk.errors.WitnessError, called by
    # submit before anything changes so bad inputs are refused rather than failing a job later.
    # Optional: ``device_pci_bus_id(device) -> str | None``, the PCI bus id of a CUDA device, so
    # telemetry can find that device in NVML (whose numbering differs from CUDA's).
    # Optional: ``key_device_bytes_hint(proof_kind) -> int``, the key's device bytes per device
    # known before loading, and ``upload_key(handle)``: with it, ``load_key`` is host-only (its
    # ``device_bytes`` computed) and the engine uploads only once those bytes are reserved.
