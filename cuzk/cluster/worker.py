"""What runs inside a worker actor process, with no Ray in it: the prover, resident keys, the
actor's leases and its own Prometheus endpoint.

Busy state lives here, where the work runs: a step is *running* exactly while its lease is
open in this process (``LeaseBook.lease``), and the actor's ``/metrics`` computes its gauges at
scrape time from those leases. The head never sets a worker's state; it asks.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from cuzk.cluster.actor_tracing import ActorTracer
from cuzk.engine.backend import KeyHandle, PartitionMemory, ProverBackend
from cuzk.engine.settings import EngineSettings

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ProverSpec:
    """How a worker actor builds its prover: ``real`` (``cuzk.prover.real_prover`` with the
    head's engine settings) or ``scripted`` (``cuzk.simulated_prover.ScriptedProver``, for the
    cluster's dry runs and tests), with ``scripted_delays`` (step -> seconds)."""

    kind: str
    settings: EngineSettings | None = None
    scripted_delays: Mapping[str, float] = field(default_factory=dict)
    scripted_estimates: Mapping[str, PartitionMemory] = field(default_factory=dict)
    # scripted only: a CPU worker's constructor returns once this file exists, so a test
    # decides when the CPU workers answer (a CPU worker process that starts slowly)
    scripted_cpu_start_gate: str | None = None

    def wait_cpu_start(self, bound_s: float = 600.0) -> None:
        """Hold a CPU worker's start until ``scripted_cpu_start_gate`` exists (at most
        ``bound_s``); at once for the real prover or without a gate."""
        gate = self.scripted_cpu_start_gate
        if self.kind != "scripted" or gate is None:
            return
        from pathlib import Path

        deadline = time.monotonic() + bound_s
        while not Path(gate).exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def build(self) -> ProverBackend:
        if self.kind == "scripted":
            from cuzk.simulated_prover import ScriptedKind, ScriptedProver

            scripted = ScriptedProver({k: ScriptedKind(estimate=e)
                                       for k, e in self.scripted_estimates.items()})
            for step, seconds in self.scripted_delays.items():
                scripted.delay(step, seconds)
            return scripted
        from cuzk.prover.real_prover import RealProver

        # An actor's phases are the head's ordered turns: no lane for a reserved worker.
        return RealProver(dataclasses.replace(self.settings or EngineSettings(),
                                              reserved_gpu_workers_per_device=0))


@dataclass
class _Lease:
    job_id: str
    partition: int
    started: float


class LeaseBook:
    """The steps open in this process: busy is "a lease is open", nothing else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[int, _Lease] = {}
        self._ids = itertools.count(1)
        self._busy_since: float | None = None
        self._busy_closed_s = 0.0
        self._done = 0

    @contextmanager
    def lease(self, job_id: str, partition: int) -> Iterator[None]:
        with self._lock:
            now = time.monotonic()
            lid = next(self._ids)
            self._open[lid] = _Lease(job_id, partition, now)
            if self._busy_since is None:
                self._busy_since = now
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._lock:
                end = time.monotonic()
                del self._open[lid]
                if ok:
                    self._done += 1
                if not self._open and self._busy_since is not None:
                    self._busy_closed_s += end - self._busy_since
                    self._busy_since = None

    def read(self) -> tuple[_Lease | None, float, int]:
        """(the newest open lease or None, busy seconds so far, steps completed), one read."""
        with self._lock:
            now = time.monotonic()
            lease = self._open[max(self._open)] if self._open else None
            inflight = 0.0 if self._busy_since is None else now - self._busy_since
            return lease, self._busy_closed_s + inflight, self._done


class DispatchOrder:
    """GPU phases run one at a time in the order the head dispatched them.

    The head numbers its calls to a GPU worker (``ticket`` = (head epoch, n)). Ray does not
    keep that order for an actor with concurrency groups: a call whose data is local overtakes
    one whose data is still being pulled from another node, and a prefetched normal partition
    could overtake a critical one. A call waits until the ones numbered before it have run, at
    most ``GAP_S`` after the worker fell free (a call lost on the way never arrives); a new head
    epoch starts afresh.
    """

    GAP_S = 2.0

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._epoch: str | None = None
        self._next = 0
        self._running = False
        self._free_since = 0.0
        self._inside = 0

    @property
    def inside(self) -> int:
        """Calls here now: the one running and those waiting their turn."""
        with self._cond:
            return self._inside

    @contextmanager
    def turn(self, ticket: tuple[str, int]) -> Iterator[None]:
        epoch, n = ticket
        with self._cond:
            self._inside += 1
            if epoch != self._epoch:
                self._epoch, self._next = epoch, n
                self._free_since = time.monotonic()
            while True:
                if self._running:
                    self._cond.wait()
                    continue
                if n <= self._next:
                    break
                left = self._free_since + self.GAP_S - time.monotonic()
                if left <= 0:
                    break  # the calls before it were lost on the way
                self._cond.wait(left)
            self._running = True
        try:
            yield
        finally:
            with self._cond:
                self._inside -= 1
                self._running = False
                self._free_since = time.monotonic()
                if self._epoch == epoch:
                    self._next = max(self._next, n + 1)
                self._cond.notify_all()


class _ActorCollector(Collector):
    """This actor's series, computed at scrape time from its leases (no stored state)."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state

    def collect(self) -> Iterable[Any]:
        st = self._state
        lease, busy_s, done = st.leases.read()
        role = st.role
        labels = ["worker", "device", "node"] if role == "gpu" else ["worker", "node"]
        values = [st.worker_id, st.device, st.node_id] if role == "gpu" else [
            st.worker_id, st.node_id]
        busy = GaugeMetricFamily(
            f"cuzk_{role}_worker_busy",
            f"1 while this {role} worker actor holds an open lease on a step", labels=labels)
        busy.add_metric(values, 1.0 if lease is not None else 0.0)
        secs = CounterMetricFamily(
            f"cuzk_{role}_worker_busy_seconds",
            f"Seconds this {role} worker actor held a lease", labels=labels)
        secs.add_metric(values, busy_s)
        age = GaugeMetricFamily(
            f"cuzk_{role}_worker_lease_age_seconds",
            "Age of the open lease; 0 when idle", labels=labels)
        age.add_metric(values, time.monotonic() - lease.started if lease else 0.0)
        steps = CounterMetricFamily(
            f"cuzk_{role}_worker_steps", "Steps this actor process completed", labels=labels)
        steps.add_metric(values, done)
        return [busy, secs, age, steps]


class WorkerState:
    """One worker actor's process-local state (the Ray actor classes wrap it)."""

    def __init__(self, worker_id: str, role: str, node_id: str, node_ip: str,
                 spec: ProverSpec) -> None:
        self.worker_id = worker_id
        self.role = role
        self.node_id = node_id
        self.prover = spec.build()
        self.device = self.prover.devices[0] if self.prover.devices else "cpu"
        self.leases = LeaseBook()
        self.keys: dict[str, KeyHandle] = {}
        self.key_loads = 0
        self.prior_warm_s: float | None = None  # set once warm_priors ends
        self.tracer = ActorTracer(worker_id, role, node_id)  # OTEL_* from the head
        self._keys_lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_ActorCollector(self))
        server, _thread = start_http_server(0, addr=node_ip, registry=self.registry)
        self._metrics_server = server
        self.metrics_url = f"http://{node_ip}:{server.server_port}/metrics"
        self.metrics_target = f"{node_ip}:{server.server_port}"

    def close(self) -> None:
        """Stop serving /metrics (an actor process just exits; tests that build one call
        this)."""
        self._metrics_server.shutdown()
        self._metrics_server.server_close()

    def key(self, proof_kind: str) -> KeyHandle:
        """The resident key, loaded on first use (kept for the life of the process)."""
        with self._keys_lock:
            handle = self.keys.get(proof_kind)
            if handle is None:
                handle = self.prover.load_key(proof_kind)
                upload = getattr(self.prover, "upload_key", None)
                if upload is not None:
                    upload(handle)
                self.keys[proof_kind] = handle
                self.key_loads += 1
            return handle

    def warm_priors(self, kinds: Iterable[str]) -> None:
        """Work out each kind's prior once at the actor's start (RealProver calibrates its
        kernel rates, about a second), so the head's ask is answered at once. It shares the
        CPU with a GPU phase only when the head sends one before it ends (an actor Ray
        restarted); ``prior_warm_s`` is what it took."""
        t0 = time.monotonic()
        for kind in kinds:
            try:
                self.prover.phase_prior(kind)
            except Exception as e:  # a key not there yet: the head's ask says so itself
                log.warning("%s: no prior for %s: %s", self.worker_id, kind, e)
        self.prior_warm_s = time.monotonic() - t0
        log.info("%s: priors worked out in %.2f s", self.worker_id, self.prior_warm_s)

    def evict(self, proof_kind: str) -> bool:
        with self._keys_lock:
            handle = self.keys.pop(proof_kind, None)
        if handle is None:
            return False
        self.prover.unload_key(handle)
        return True

    def snapshot(self) -> dict[str, Any]:
        lease, busy_s, done = self.leases.read()
        return {
            "id": self.worker_id,
            "kind": self.role,
            "node_id": self.node_id,
            "state": "proving" if lease is not None else "idle",
            "job_id": lease.job_id if lease else None,
            "partition": lease.partition if lease else None,
            "partitions_done": done,
            "busy_seconds": busy_s,
            "metrics_url": self.metrics_url,
            "keys": sorted(self.keys),
            "key_loads": self.key_loads,
            "prior_warm_s": self.prior_warm_s,
        }


# ---- what crosses the object store -------------------------------------------------------


def split_synthesis(synthesis: Any) -> tuple[Any, Any]:
    """(witness part, a/b/c part): two objects, so a/b/c are freed after the GPU phase while
    the witness waits for finalize. A synthesis without a/b/c fields travels whole."""
    obj: Any = synthesis  # any prover's synthesis: checked by shape, not by type
    shaped = dataclasses.is_dataclass(obj) and all(hasattr(obj, n) for n in ("a", "b", "c"))
    if shaped:
        abc = (obj.a, obj.b, obj.c)
        return dataclasses.replace(obj, a=None, b=None, c=None), abc
    return synthesis, None


def join_synthesis(witness_part: Any, abc: Any) -> Any:
    if abc is None:
        return witness_part
    a, b, c = abc
    return dataclasses.replace(witness_part, a=a, b=b, c=c)


def pack_points(output: Any) -> Any:
    """A dataclass holding curve points (not picklable): each point as compressed bytes tagged
    with its group (G1 or G2: ``GpuOutput.b2`` is a G2 point, or None when finalize computes
    it), its other fields (``GpuOutput.steps_ms``) as they are, so ``unpack_points`` restores
    it; anything else travels as it is."""
    obj: Any = output
    instance = dataclasses.is_dataclass(obj) and not isinstance(obj, type)
    if instance:
        from py_arkworks_bls12381 import G1Point, G2Point

        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        if any(isinstance(v, (G1Point, G2Point)) for v in fields.values()):
            packed = {k: ("g2" if isinstance(v, G2Point) else "g1", bytes(v.to_compressed_bytes()))
                      if isinstance(v, (G1Point, G2Point)) else ("raw", v)
                      for k, v in fields.items()}
            return ("points", type(obj).__module__, type(obj).__qualname__, packed)
    return output


def unpack_points(packed: Any) -> Any:
    if isinstance(packed, tuple) and len(packed) == 4 and packed[0] == "points":
        import importlib

        from py_arkworks_bls12381 import G1Point, G2Point

        _, module, qualname, fields = packed
        cls = getattr(importlib.import_module(module), qualname)
        groups: dict[str, Any] = {"g1": G1Point, "g2": G2Point}
        return cls(**{k: v[1] if v[0] == "raw" else groups[v[0]].from_compressed_bytes(v[1])
                      for k, v in fields.items()})
    return packed
