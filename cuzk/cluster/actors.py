"""The Ray actor classes: a GPU worker per GPU (detached, named, keys resident) and CPU workers
for synthesis and finalization. Each wraps a :class:`cuzk.cluster.worker.WorkerState`.

Concurrency groups keep ``snapshot`` answering while a step runs: the head reads busy state
from the actor itself (1 s timeout), never from its own bookkeeping.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

import ray

from cuzk.cluster import PREFETCH_DEPTH
from cuzk.cluster.actor_tracing import carrier_of, step_attributes
from cuzk.cluster.worker import (
    DispatchOrder,
    ProverSpec,
    WorkerState,
    join_synthesis,
    pack_points,
    split_synthesis,
    unpack_points,
)
from cuzk.errors import CuzkError


def _node() -> tuple[str, str]:
    ctx = ray.get_runtime_context()
    return ctx.get_node_id(), ray.util.get_node_ip_address()


class _WorkerActor:
    """What both actor classes answer in their ``control`` group: readiness, the snapshot the
    head's status reads, the process id (the kill tests), the scripted prover's delays."""

    state: WorkerState

    @ray.method(concurrency_group="control")
    def ready(self) -> dict[str, Any]:
        return self.state.snapshot()

    @ray.method(concurrency_group="control")
    def snapshot(self) -> dict[str, Any]:
        return self.state.snapshot()

    @ray.method(concurrency_group="control")
    def pid(self) -> int:
        return os.getpid()

    @ray.method(concurrency_group="control")
    def script_delay(self, step: str, seconds: float) -> None:
        """Scripted prover only (tests, the cluster bench): every ``step`` takes ``seconds``."""
        prover: Any = self.state.prover
        prover.delay(step, seconds)


class GpuWorkerActor(_WorkerActor):
    """One GPU: ``gpu_phase`` runs inside a lease; the keys stay loaded across calls (and are
    loaded again by the constructor's caller after a restart)."""

    def __init__(self, worker_id: str, spec: ProverSpec,
                 env: Mapping[str, str] | None = None) -> None:
        os.environ.update(env or {})  # the head's OTEL_* variables, before anything reads them
        node_id, ip = _node()
        settings = spec.settings
        if spec.kind == "real" and (settings is None or settings.backend != "cpu"):
            from cuzk.prover.real_prover import cuda_device_count

            if cuda_device_count() == 0:
                raise CuzkError(
                    f"node {node_id} ({ip}) reports GPUs to Ray but CUDA is unusable there "
                    f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); "
                    "fix the driver, or set engine.backend = \"cpu\" to let the CPU prover "
                    "play the GPU")
        self.state = WorkerState(worker_id, "gpu", node_id, ip, spec)
        self.order = DispatchOrder()
        # The head asks for priors at its start or a kind's first submit: calibrate now, off
        # the dispatch path, so that answer takes milliseconds (worker.WorkerState.warm_priors).
        # Not after Ray restarted this worker: the head asked already (once per kind), and a
        # calibration then would share the CPU with the GPU phases sent to it at once.
        if not ray.get_runtime_context().was_current_actor_reconstructed:
            kinds = tuple(settings.proof_kinds) if settings is not None else ()
            threading.Thread(target=self.state.warm_priors, args=(kinds,), daemon=True,
                             name="cuzk-prior-calibration").start()

    @ray.method(concurrency_group="control")
    def phase_prior(self, proof_kind: str) -> Any:
        """The kind's :class:`PhasePrior` at this machine's rates (None: cannot tell); waits
        for the calibration ``warm_priors`` started, if it is still running."""
        return self.state.prover.phase_prior(proof_kind)

    @ray.method(concurrency_group="control")
    def key_info(self, proof_kind: str) -> dict[str, Any]:
        """Load (or find resident) a key; what the head's ledgers need to know about it."""
        h = self.state.key(proof_kind)
        return {"host_bytes": h.host_bytes, "device_bytes": h.device_bytes,
                "estimate": h.estimate, "sizes": dict(h.sizes)}

    @ray.method(concurrency_group="control")
    def evict(self, proof_kind: str) -> bool:
        return self.state.evict(proof_kind)

    @ray.method(concurrency_group="gpu")
    def gpu_phase(self, proof_kind: str, job_id: str, partition: int, witness: Any,
                  abc: Any, ticket: tuple[str, int], carrier: Mapping[str, str]
                  ) -> tuple[Any, str, dict[str, str]]:
        """The GPU phase inside a lease and, within it, its ``cuzk.gpu`` span (so the busy
        gauge reads 1 whenever the span is open); returns the span's carrier for finalize."""
        st = self.state
        key = st.key(proof_kind)
        attrs = step_attributes(proof_kind, job_id, partition) | {"cuzk.device": st.device}
        with self.order.turn(ticket), st.leases.lease(job_id, partition), \
                st.tracer.step("cuzk.gpu", carrier, attrs) as span:
            out = st.prover.gpu_phase(key, join_synthesis(witness, abc), st.device)
        return pack_points(out), st.node_id, carrier_of(span)

    # ---- scripted prover controls (tests and the bench) --------------------------------------

    @ray.method(concurrency_group="control")
    def script_hold(self, match: str | None) -> None:
        prover: Any = self.state.prover
        self._gates = [*getattr(self, "_gates", []), prover.hold("gpu", match)]

    @ray.method(concurrency_group="control")
    def script_entered(self, timeout: float) -> bool:
        gates = getattr(self, "_gates", [])
        return bool(gates) and gates[-1].wait_entered(timeout)

    @ray.method(concurrency_group="control")
    def calls_inside(self) -> int:
        """GPU phases in this actor now, running or prefetched (at most ``PREFETCH_DEPTH``)."""
        return self.order.inside

    @ray.method(concurrency_group="control")
    def script_release(self) -> None:
        for gate in getattr(self, "_gates", []):
            gate.release()
        self._gates = []

    @ray.method(concurrency_group="control")
    def script_events(self) -> list[tuple[str, str, Any]]:
        prover: Any = self.state.prover
        return list(prover.events)



class CpuWorkerActor(_WorkerActor):
    """One synthesis slot; also finalizes (a group of its own, so it never waits behind a
    synthesis for the witness it already holds)."""

    def __init__(self, worker_id: str, spec: ProverSpec,
                 env: Mapping[str, str] | None = None) -> None:
        os.environ.update(env or {})  # the head's OTEL_* variables, before anything reads them
        spec.wait_cpu_start()  # scripted only: a test holds the start
        node_id, ip = _node()
        self.state = WorkerState(worker_id, "cpu", node_id, ip, spec)

    @ray.method(concurrency_group="work")
    def synthesize(self, proof_kind: str, job_id: str, partition: int,
                   inputs: Mapping[str, Any], carrier: Mapping[str, str]
                   ) -> tuple[Any, Any, str]:
        st = self.state
        key = st.key(proof_kind)
        with st.leases.lease(job_id, partition), st.tracer.step(
                "cuzk.synthesis", carrier, step_attributes(proof_kind, job_id, partition)):
            synthesis = st.prover.synthesize(key, inputs)
        witness, abc = split_synthesis(synthesis)
        return witness, abc, st.node_id

    @ray.method(concurrency_group="finalize")
    def finalize(self, proof_kind: str, job_id: str, partition: int, witness: Any,
                 gpu_output: Any, carrier: Mapping[str, str], gpu_carrier: Mapping[str, str]
                 ) -> tuple[Any, str]:
        """``cuzk.finalize`` is linked to the partition's ``cuzk.gpu`` span, as in one process."""
        st = self.state
        key = st.key(proof_kind)
        with st.tracer.step("cuzk.finalize", carrier,
                            step_attributes(proof_kind, job_id, partition), link=gpu_carrier):
            result = st.prover.finalize(key, witness, unpack_points(gpu_output))
        return (result.proof, list(result.public)), st.node_id



GPU_GROUPS = {"gpu": PREFETCH_DEPTH, "control": 2}
CPU_GROUPS = {"work": 1, "finalize": 1, "control": 2}


def gpu_actor_class() -> Any:
    """``GpuWorkerActor`` as a Ray actor class: Ray restarts the process (keys reload on first
    use); Ray never re-runs a call (cuzk retries, counted)."""
    return ray.remote(num_gpus=1, num_cpus=0, max_restarts=-1, max_task_retries=0,
                      concurrency_groups=GPU_GROUPS)(GpuWorkerActor)


def cpu_actor_class() -> Any:
    return ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0,
                      concurrency_groups=CPU_GROUPS)(CpuWorkerActor)
