"""A simulated prover: the steps of a Groth16 prover, with no proving, timed by a script.

``ScriptedProver`` is a ``ProverBackend`` whose steps sleep, hold or fail as scripted. It is a
product feature, not a test double: ``cuzk bench engine --prover scripted`` and ``cuzk bench
deadlines`` measure the engine alone with it, and the cluster's dry runs (``cuzk bench
cluster``, ``ProverSpec("scripted")``) run Ray workers over it. Holding a step on a gate
(``hold``) lets a caller force exact interleavings; the tests use that too. Partition inputs
identify a partition: ``{"tag": "P"}``. Nothing in the engine imports this module, and it
imports nothing of ``cuzk.prover``, so an engine over it loads no numba or wasm runtime.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cuzk.engine.backend import (
    InProcessDevices,
    KeyHandle,
    PartitionMemory,
    PhasePrior,
    ProofResult,
)
from cuzk.engine.witnesses import WitnessRef, WitnessShape
from cuzk.errors import CuzkError

STEPS = ("load_key", "unload_key", "synthesize", "gpu", "finalize")
Match = Callable[[Mapping[str, Any]], bool] | str | None
Delay = float | Callable[[Mapping[str, Any]], float]


@dataclass
class ScriptedKind:
    host_bytes: int = 1_000
    device_bytes: int = 0
    estimate: PartitionMemory = field(default_factory=lambda: PartitionMemory(100, 60, 10))
    hint_partition: bool = True  # partition_memory_hint answers before loading
    loaded_host_bytes: int | None = None  # the loaded key's true size when the hint was wrong
    sizes: dict[str, int] = field(
        default_factory=lambda: {"vars": 9, "public": 1, "domain_size": 16, "coefficients": 20})
    prior: Mapping[str, float] | None = None  # phase -> seconds phase_prior answers (None: none)


class Gate:
    """Holds one matching step until released; ``entered`` is set when the step arrives."""

    def __init__(self, step: str, match: Match) -> None:
        self.step = step
        self.match = match
        self.entered = threading.Event()
        self._open = threading.Event()
        self.inputs: Mapping[str, Any] | None = None

    def release(self) -> None:
        self._open.set()

    def wait_entered(self, timeout: float = 10.0) -> bool:
        return self.entered.wait(timeout)


@dataclass
class ScriptedSynthesis:
    kind: str
    inputs: Mapping[str, Any]
    abc_released: bool = False


def _matches(match: Match, inputs: Mapping[str, Any]) -> bool:
    if match is None:
        return True
    if isinstance(match, str):
        return inputs.get("tag") == match
    return bool(match(inputs))


class ScriptedProver(InProcessDevices):
    """Deterministic prover double. Register holds/failures/delays before submitting."""

    def __init__(
        self,
        kinds: Mapping[str, ScriptedKind] | None = None,
        devices: Sequence[str] = ("cpu",),
        name: str = "cpu",
        device_memory: int | None = None,
    ) -> None:
        self.kinds = dict(kinds or {})
        self.devices = list(devices)
        self.name = name
        self.field_arith = "n/a"  # scripted steps do no field arithmetic
        self.remote_step_spans = False  # the engine records the step spans
        self.synthesis_waits_for_worker = False  # the engine's own thread synthesizes
        self._device_memory = device_memory
        self._lock = threading.Lock()
        self._gates: list[Gate] = []
        self._failures: list[tuple[str, Match, BaseException]] = []
        self._delays: dict[str, Delay] = {}
        self.calls: dict[str, int] = dict.fromkeys(STEPS, 0)
        self.unloads = 0
        self.loaded: dict[int, int] = {}  # id(handle.key) -> times unloaded (0: loaded)
        self.misuse: list[str] = []  # a step given an unloaded key, or a key unloaded twice
        self.events: list[tuple[str, str, Any]] = []  # (step, "start"|"end", tag)
        self._gpu_calls = 0
        self._in_gpu: dict[str, int] = {}  # thread name -> id of the gpu call it is inside
        self.gpu_step_ms: float | None = None  # reported by gpu_steps when set

    # ---- scripting ---------------------------------------------------------------------------

    def hold(self, step: str, match: Match = None) -> Gate:
        """Hold the next call of ``step`` whose inputs match, until ``gate.release()``."""
        assert step in STEPS
        gate = Gate(step, match)
        with self._lock:
            self._gates.append(gate)
        return gate

    def fail(self, step: str, match: Match, exc: BaseException) -> None:
        """Make the next matching call of ``step`` raise ``exc``."""
        with self._lock:
            self._failures.append((step, match, exc))

    def delay(self, step: str, seconds: Delay) -> None:
        with self._lock:
            self._delays[step] = seconds

    def in_gpu(self) -> dict[str, int]:
        """Ground truth for tests: which threads are inside a gpu_phase call (call id)."""
        with self._lock:
            return dict(self._in_gpu)

    def _run(self, step: str, inputs: Mapping[str, Any]) -> None:
        with self._lock:
            self.calls[step] += 1
            if step == "gpu":
                self._gpu_calls += 1
                self._in_gpu[threading.current_thread().name] = self._gpu_calls
            gate = next((g for g in self._gates if _matches(g.match, inputs)
                         and g.step == step), None)
            if gate is not None:
                self._gates.remove(gate)
            failure = next((f for f in self._failures if f[0] == step
                            and _matches(f[1], inputs)), None)
            if failure is not None:
                self._failures.remove(failure)
            delay = self._delays.get(step)
            self.events.append((step, "start", inputs.get("tag")))
        try:
            if gate is not None:
                gate.inputs = inputs
                gate.entered.set()
                gate._open.wait()
            if delay is not None:
                seconds = delay(inputs) if callable(delay) else delay
                if seconds > 0:
                    time.sleep(seconds)
            if failure is not None:
                raise failure[2]
        finally:
            with self._lock:
                if step == "gpu":
                    self._in_gpu.pop(threading.current_thread().name, None)
                self.events.append((step, "end", inputs.get("tag")))

    # ---- ProverBackend -----------------------------------------------------------------------

    def device_memory_bytes(self, device: str) -> int | None:
        return None if device == "cpu" else self._device_memory

    def device_pci_bus_id(self, device: str) -> str | None:
        return None

    def key_device_bytes_hint(self, proof_kind: str) -> int:
        """0: the scripted key's device bytes are known only once loaded."""
        return 0

    def check_inputs(self, proof_kind: str, inputs: Sequence[Mapping[str, Any]]) -> None:
        """Scripted partitions take any inputs."""

    def verification_key(self, proof_kind: str) -> dict[str, Any]:
        raise CuzkError("the scripted prover has no verification keys")


    def input_elements(self, proof_kind: str) -> int | None:
        return None  # scripted partitions take any inputs

    def witness_shape(self, proof_kind: str) -> WitnessShape | None:
        return None  # scripted partitions have no circuit to check a witness against

    def verify_proof(
        self, proof_kind: str, proof: Mapping[str, Any], public: Sequence[str]
    ) -> bool | None:
        return None  # scripted proofs are not Groth16 proofs: only the row checksum applies

    def upload_key(self, handle: KeyHandle) -> None:
        """Scripted keys live nowhere: loading is all there is."""

    def _kind(self, proof_kind: str) -> ScriptedKind:
        return self.kinds.setdefault(proof_kind, ScriptedKind())

    def runtime_host_bytes(self) -> int:
        return 0  # nothing of its own beside the scripted keys

    def key_bytes_hint(self, proof_kind: str) -> int:
        return self._kind(proof_kind).host_bytes

    def phase_prior(self, proof_kind: str) -> PhasePrior | None:
        """The kind's scripted ``prior`` (None: the kind has none)."""
        prior = self._kind(proof_kind).prior
        return None if prior is None else PhasePrior(dict(prior), "scripted")

    def partition_memory_hint(self, proof_kind: str) -> PartitionMemory | None:
        """What a partition will reserve, known before loading (None: only after loading)."""
        k = self._kind(proof_kind)
        return k.estimate if k.hint_partition else None

    def load_key(self, proof_kind: str) -> KeyHandle:
        self._run("load_key", {"tag": proof_kind})
        k = self._kind(proof_kind)
        handle = KeyHandle(proof_kind, object(), k.loaded_host_bytes or k.host_bytes,
                           k.device_bytes, k.estimate, dict(k.sizes))
        with self._lock:
            self.loaded[id(handle.key)] = 0
        return handle

    def unload_key(self, handle: KeyHandle) -> None:
        self._run("unload_key", {"tag": handle.proof_kind})
        with self._lock:
            self.unloads += 1
            n = self.loaded.get(id(handle.key), 0)
            if n:
                self.misuse.append(f"{handle.proof_kind} key unloaded {n + 1} times")
            self.loaded[id(handle.key)] = n + 1

    def _check_key(self, step: str, key: KeyHandle) -> None:
        with self._lock:
            if self.loaded.get(id(key.key), 0):
                self.misuse.append(f"{step} used the {key.proof_kind} key after it was unloaded")

    def live_keys(self) -> int:
        """Keys loaded and not unloaded (a leak if it stays above the resident count)."""
        with self._lock:
            return sum(1 for n in self.loaded.values() if n == 0)

    def synthesize(
        self, key: KeyHandle, inputs: Mapping[str, Any] | WitnessRef
    ) -> ScriptedSynthesis:
        if isinstance(inputs, WitnessRef):  # witness_shape is None: submit refuses them
            raise CuzkError("the scripted prover takes no witnesses")
        self._check_key("synthesize", key)
        self._run("synthesize", inputs)
        self._check_key("synthesize", key)
        return ScriptedSynthesis(key.proof_kind, inputs)

    def gpu_phase(self, key: KeyHandle, synthesis: ScriptedSynthesis, device: str) -> dict:
        self._check_key("gpu", key)
        self._run("gpu", synthesis.inputs)
        self._check_key("gpu", key)
        return {"device": device}

    def gpu_steps(self, gpu_output: Any) -> Mapping[str, float]:
        """One step, "scripted", when ``gpu_step_ms`` is set; else none measured."""
        ms = self.gpu_step_ms
        return {} if ms is None else {"scripted": ms}

    def finalize(
        self, key: KeyHandle, synthesis: ScriptedSynthesis, gpu_output: Any
    ) -> ProofResult:
        self._check_key("finalize", key)
        self._run("finalize", synthesis.inputs)
        self._check_key("finalize", key)
        tag = str(synthesis.inputs.get("tag", ""))
        return ProofResult(proof={"protocol": "groth16", "curve": "bls12381", "tag": tag},
                           public=[tag])

    def release_abc(self, synthesis: ScriptedSynthesis) -> None:
        synthesis.abc_released = True

