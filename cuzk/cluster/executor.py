"""The head side: a prover backend for :class:`cuzk.engine.Engine` that runs each step on a
Ray worker actor. It keeps no queue: the engine's priority queues decide what runs next, and
this class only decides where.

- GPU phases: the engine's GPU workers here are *slots* (``slot-0`` ...), each driven by
  ``PREFETCH_DEPTH`` engine threads. A slot is bound to one live GPU worker actor; an actor
  runs one phase at a time, so one partition runs and one waits there, and a critical
  partition waits for at most those two per GPU. A slot with no live actor takes nothing from
  the queue (``device_ready``).
- Synthesis: on a free CPU worker actor; the witness and a/b/c stay in that node's object
  store (two refs) and the a/b/c ref is dropped after the GPU phase; finalize runs on the node
  that holds the witness.
- Memory: one ledger per node (a :class:`MemoryBudget` sized from the node's object store):
  nothing is sent to a node without a reservation there.
- Failures: a lost actor or lost data is :class:`PhaseLost`; the engine runs the step again
  and counts it. Ray itself never re-runs work (``max_retries=0``, ``max_task_retries=0``).
- Membership: a thread follows ``ray.nodes()`` and places or drops actors as nodes come and go.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import (
    ActorUnschedulableError,
    GetTimeoutError,
    NodeDiedError,
    ObjectLostError,
    RayActorError,
    RayTaskError,
    TaskUnschedulableError,
    WorkerCrashedError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from cuzk.cluster import NAMESPACE, PREFETCH_DEPTH
from cuzk.cluster.actors import cpu_actor_class, gpu_actor_class
from cuzk.cluster.priors import PriorSource, RemotePriors
from cuzk.cluster.transfers import TransferLog
from cuzk.cluster.worker import ProverSpec
from cuzk.engine.backend import (
    STEP,
    KeyHandle,
    PartitionMemory,
    PhaseLost,
    PhasePrior,
    ProofResult,
    ProverBackend,
)
from cuzk.engine.memory import MemoryBudget, Reservation
from cuzk.engine.snapshot import ClusterWorkerView, NodeView
from cuzk.engine.witnesses import WitnessRef, WitnessShape
from cuzk.errors import CuzkError
from cuzk.protocol import ClusterWorkerKind, NodeRole

log = logging.getLogger(__name__)

SNAPSHOT_TIMEOUT_S = 1.0
"""A worker actor that does not answer its snapshot within this is ``unreachable``."""
LEDGER_CONSUMER = "partition_data"
RESTART_WAIT_S = 60.0
"""How long a GPU phase waits for a lost GPU worker to be restarted by Ray before it counts
as lost again (Ray restarts an actor on its node in about 1 s)."""


def short(node_id: str) -> str:
    return node_id[:12]


@dataclass
class _Actor:
    id: str
    kind: ClusterWorkerKind
    node_id: str
    handle: Any
    metrics_target: str = ""
    metrics_url: str = ""
    busy: int = 0  # cpu: 1 while a synthesis of ours is on it (slot accounting, not state)
    tickets: int = 0  # gpu: calls numbered in dispatch order (the actor keeps that order)


@dataclass
class _Node:
    id: str
    address: str
    ledger: MemoryBudget
    gpus: int
    cpus: int
    actors: list[_Actor] = field(default_factory=list)

    @property
    def role(self) -> NodeRole:
        return "gpu" if any(a.kind == "gpu" for a in self.actors) else "cpu"


@dataclass
class ClusterSynthesis:
    """A partition's synthesis as the head holds it: two refs and the ledger reservation on
    the node whose object store holds them."""

    node_id: str
    witness: Any
    abc: Any
    reservation: Reservation | None
    abc_bytes: int


@dataclass
class GpuResult:
    """The GPU phase's points, the W3C carrier of its ``cuzk.gpu`` span (finalize's link), the
    node it ran on, and its object's ref while a :class:`TransferLog` is set (else None)."""

    packed: Any
    carrier: dict[str, str]
    node_id: str = ""
    ref: Any = None


WORKER_LOST = (RayActorError, ActorUnschedulableError, NodeDiedError, WorkerCrashedError,
               TaskUnschedulableError)
"""The process (or its node) is gone, or cannot be placed because its node is gone."""


def _lost(exc: BaseException) -> str | None:
    """``worker_lost``, ``data_lost`` or None (a real error of the step, not a loss)."""
    if isinstance(exc, RayTaskError):
        exc = exc.cause if isinstance(exc.cause, BaseException) else exc
        if isinstance(exc, RayTaskError):
            return None
    if isinstance(exc, ObjectLostError):
        return "data_lost"
    if isinstance(exc, WORKER_LOST):
        return "worker_lost"
    return None


_RAISED = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception): (.+)$")


def _refusal(exc: BaseException) -> str:
    """Why a node's worker would not start, in one line: the message of the exception its
    constructor raised (the last ``SomeError: message`` line of Ray's report, which wraps it in
    a traceback), else the report's first line."""
    text = str(_unwrap(exc)).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = [m.group(1) for line in lines if (m := _RAISED.match(line))]
    why = raised[-1] if raised else (lines[0] if lines else type(exc).__name__)
    return why[:500]


def _carrier() -> dict[str, str]:
    """The W3C carrier of the partition span the engine runs this step for: the actor's step
    span is its child (the engine records no step span of its own: ``remote_step_spans``)."""
    ctx = STEP.get()
    return {"traceparent": ctx.traceparent} if ctx and ctx.traceparent else {}


def _resolve_prior(ref: Any, timeout: float) -> PhasePrior | None:
    """A GPU worker's answer to ``phase_prior`` (Ray's GetTimeoutError is a TimeoutError)."""
    answer: PhasePrior | None = ray.get(ref, timeout=timeout)
    return answer


def _unwrap(exc: BaseException) -> BaseException:
    """A step's own exception (a WitnessError, a ProofError) as the in-process engine sees it."""
    if isinstance(exc, RayTaskError) and isinstance(exc.cause, BaseException):
        return exc.cause
    return exc


class ClusterExecutor:
    """The engine's prover backend on a Ray cluster (``cuzk serve --cluster ADDRESS``).

    ``spec``: how actors build their prover; ``local``: a prover in the head for what needs no
    worker (input checks, verification keys). ``gpu_slots``: GPU workers the head drives (the
    engine's threads are fixed at start); None: the GPUs Ray reports now, at least 1.
    """

    name = "cluster"
    field_arith = "n/a"  # the CPU MSMs run in the worker actors, each reporting its own
    remote_step_spans = True  # each actor records its step's span (cuzk.cluster.actor_tracing)
    synthesis_waits_for_worker = True  # for a free CPU worker (StepContext.worker_taken)

    def __init__(self, spec: ProverSpec, local: ProverBackend, gpu_slots: int | None = None,
                 poll_s: float = 1.0, prefix: str = "",
                 actor_env: Mapping[str, str] | None = None) -> None:
        self.spec = spec
        # the head's OTEL_* variables, set in every actor process (actor_tracing.actor_env)
        # Handed to each actor's constructor, not as a Ray runtime_env: an actor with a
        # runtime_env needs a worker process started for it through Ray's runtime-env agent
        # (3.8-7.1 s to answer here at load 10-17, against 1.9-5.5 s on a plain worker), and
        # placing the CPU workers is most of a restarted head's time to ready.
        self._actor_env = dict(actor_env or {})
        self.local = local
        self.poll_s = poll_s
        self.prefix = prefix  # names of detached actors: several heads on one cluster (tests)
        self._lock = threading.Condition()
        self._nodes: dict[str, _Node] = {}
        self._refused: dict[str, str] = {}
        self._epoch = uuid.uuid4().hex  # this head's dispatch numbering
        self._suspect: set[str] = set()  # GPU workers lost mid-call, not yet answering again
        # node -> its CPU workers created and not yet answering (with their ``ready`` refs)
        self._placing: dict[str, list[tuple[_Actor, Any]]] = {}
        self._cpu_failures: dict[str, int] = {}  # node -> CPU workers failed in a row
        self._cpu_retry_at: dict[str, float] = {}  # node -> no new CPU worker before (monotonic)
        # GPU workers found by name (from before a head restart) -> the keys they held then
        self._adopted: dict[str, tuple[str, ...]] = {}
        self._stopped = threading.Event()
        self.membership_changes: list[tuple[float, str, str]] = []  # (time, "join"|"leave", id)
        # Audit hook, called in the engine thread of the step (``STEP`` names its partition):
        # (step, id of the node it runs on, bytes reserved for it on that node's ledger).
        self.on_dispatch: Callable[[str, str, int], None] | None = None
        # Bench hook: each partition's objects, to read where Ray holds copies (None: off)
        self.transfers: TransferLog | None = None
        self.priors = RemotePriors(self._prior_source, _resolve_prior)  # asked of GPU workers
        total_gpus = int(ray.cluster_resources().get("GPU", 0))
        n = gpu_slots if gpu_slots is not None else max(1, total_gpus)
        self.devices = [f"slot-{i}" for i in range(n)]
        self._slots: dict[str, _Actor | None] = dict.fromkeys(self.devices)
        self._sync_membership()
        self._thread = threading.Thread(target=self._follow, name="cuzk-cluster-membership",
                                        daemon=True)
        self._thread.start()

    # ---- membership --------------------------------------------------------------------------

    def _follow(self) -> None:
        while not self._tick():
            try:
                self._sync_membership()
            except Exception:  # the cluster may be briefly unreachable; try again next tick
                log.exception("reading cluster membership failed")

    def _tick(self) -> bool:
        """Wait ``poll_s``, or less when a CPU worker being placed answers (it is entered at
        once, not at the next tick); True once closed."""
        with self._lock:
            refs = [ref for placing in self._placing.values() for _, ref in placing]
        if refs:
            with contextlib.suppress(Exception):
                ray.wait(refs, num_returns=1, timeout=self.poll_s)
            return self._stopped.is_set()
        return self._stopped.wait(self.poll_s)

    def cpu_slots(self) -> int:
        """CPU workers that answered and are entered (those still starting are not)."""
        with self._lock:
            return sum(1 for n in self._nodes.values() for a in n.actors if a.kind == "cpu")

    def cpu_capacity(self) -> int:
        """CPU workers the joined nodes are meant to have, answering or still starting: what
        the head sizes its synthesis threads by (a restarted head listens before its new CPU
        workers answer)."""
        with self._lock:
            return sum(n.cpus for n in self._nodes.values())

    def wait_for_cpu_workers(self, timeout: float) -> bool:
        """Block until every joined node has all its CPU workers answering (tests and the
        bench, which read them at once; serving never waits); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while any(sum(1 for a in n.actors if a.kind == "cpu") < n.cpus
                      for n in self._nodes.values()):
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped.is_set():
                    return False
                self._lock.wait(min(left, 0.1))
        return True

    def _sync_membership(self) -> None:
        alive = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
        with self._lock:
            gone = [nid for nid in self._nodes if nid not in alive]
            for nid in [nid for nid in self._refused if nid not in alive]:
                del self._refused[nid]  # a refused node that left is no reason any more
        for nid in gone:
            self._drop_node(nid)
        with self._lock:
            joined = [(nid, info) for nid, info in alive.items()
                      if nid not in self._nodes and nid not in self._refused]
        # every new node's actors are created before any is waited for: their processes
        # start together (a head starting on a cluster of N nodes waits once, not N times)
        placed = [self._place_actors(nid, info) for nid, info in joined]
        for args in placed:
            self._add_node(*args)
        self._top_up()
        self._bind_slots()

    def _place_actors(self, nid: str, info: Mapping[str, Any]
                      ) -> tuple[str, _Node, list[_Actor], set[str]]:
        """Create (or find by name) a joining node's actors without waiting for them:
        (node id, node, its actors, names of the GPU workers found from an earlier head)."""
        res = info.get("Resources", {})
        store = int(res.get("object_store_memory", 0))
        node = _Node(nid, str(info.get("NodeManagerAddress", "")),
                     MemoryBudget(max(store, 1), f"node:{short(nid)}"),
                     int(res.get("GPU", 0)), int(res.get("CPU", 0)))
        pin = NodeAffinitySchedulingStrategy(nid, soft=False)
        gpu_cls, cpu_cls = gpu_actor_class(), cpu_actor_class()
        pending: list[_Actor] = []
        found: set[str] = set()
        for i in range(node.gpus):
            name = f"{self.prefix}gpu-{short(nid)}-{i}"
            try:  # a detached worker from before a head restart: keys still resident
                handle = ray.get_actor(name, namespace=NAMESPACE)
                found.add(name)
            except ValueError:
                handle = gpu_cls.options(
                    name=name, namespace=NAMESPACE, lifetime="detached",
                    scheduling_strategy=pin).remote(name, self.spec, self._actor_env)
            pending.append(_Actor(name, "gpu", nid, handle))
        for i in range(node.cpus):
            name = f"{self.prefix}cpu-{short(nid)}-{i}"
            handle = cpu_cls.options(scheduling_strategy=pin).remote(name, self.spec,
                                                                     self._actor_env)
            pending.append(_Actor(name, "cpu", nid, handle))
        return nid, node, pending, found

    def _add_node(self, nid: str, node: _Node, pending: list[_Actor], found: set[str]) -> None:
        """Wait until a joining node's GPU workers answer, then enter the node (or refuse it).

        Its CPU workers are not waited for: each is entered when it answers (``_top_up``). A
        new CPU worker process took 10-25 s to start on a loaded 2-core machine, and waiting
        for them was most of a restarted head's time to ready, while only a GPU worker is what
        readiness promises; a partition waits in ``_take_cpu`` until one answers."""
        gpus = [a for a in pending if a.kind == "gpu"]
        cpus = [a for a in pending if a.kind == "cpu"]
        for actor in gpus:
            try:
                info_ = ray.get(actor.handle.ready.remote(), timeout=120)
            except Exception as exc:
                why = _refusal(exc)
                log.error("cluster node %s refused: %s", nid, why)
                with self._lock:
                    self._refused[nid] = why
                for a in pending:
                    ray.kill(a.handle, no_restart=True)
                return
            actor.metrics_url = info_["metrics_url"]
            actor.metrics_target = actor.metrics_url.removeprefix("http://").removesuffix(
                "/metrics")
            if actor.id in found:
                with self._lock:
                    self._adopted[actor.id] = tuple(info_["keys"])
                log.info("found GPU worker %s from an earlier head with keys %s resident "
                         "(%d key loads in its life)", actor.id,
                         ", ".join(info_["keys"]) or "(none)", info_["key_loads"])
        node.actors = gpus
        with self._lock:
            self._nodes[nid] = node
            self._placing[nid] = [(a, a.handle.ready.remote()) for a in cpus]
            self.membership_changes.append((time.time(), "join", nid))
            self._lock.notify_all()
        log.info("cluster node %s joined: %d GPU worker(s), %d CPU worker(s) starting, ledger "
                 "%d bytes", nid, node.gpus, node.cpus, node.ledger.total)

    def _drop_node(self, nid: str) -> None:
        with self._lock:
            node = self._nodes.pop(nid, None)
            if node is None:
                return
            for slot, actor in self._slots.items():
                if actor is not None and actor.node_id == nid:
                    self._slots[slot] = None
            self.membership_changes.append((time.time(), "leave", nid))
            starting = [a for a, _ in self._placing.pop(nid, [])]
            self._cpu_failures.pop(nid, None)
            self._cpu_retry_at.pop(nid, None)
            self._lock.notify_all()
        for a in [*node.actors, *starting]:  # detached GPU workers pinned to a dead node:
            with contextlib.suppress(Exception):  # free their names
                ray.kill(a.handle, no_restart=True)
        log.warning("cluster node %s left; its work runs again elsewhere", nid)

    def _bind_slots(self) -> None:
        with self._lock:
            bound = {id(a) for a in self._slots.values() if a is not None}
            free = [a for n in self._nodes.values() for a in n.actors
                    if a.kind == "gpu" and id(a) not in bound]
            for slot, actor in self._slots.items():
                if actor is None and free:
                    self._slots[slot] = free.pop(0)
            self._lock.notify_all()
            if free:
                log.warning("%d GPU worker(s) beyond cluster.gpu_slots=%d stay unused",
                            len(free), len(self._slots))

    def gpu_unavailable(self) -> str | None:
        """None while a slot has a GPU worker; else "no GPU worker: " and why (each refused
        node with its reason, or that no node with a GPU has joined)."""
        with self._lock:
            if any(a is not None for a in self._slots.values()):
                return None
            refused = sorted(self._refused.items())
            joined = len(self._nodes)
        if refused:
            return "no GPU worker: " + "; ".join(
                f"node {short(nid)} refused: {why}" for nid, why in refused)
        return (f"no GPU worker: no node with a usable GPU has joined the cluster ({joined} "
                "node(s) joined); start one with `ray start --address=HEAD:PORT` on a GPU host")

    # ---- what the engine's threads wait for -------------------------------------------------

    def device_ready(self, device: str, timeout: float) -> bool:
        """True when ``device`` (a slot) has a GPU worker that answers: after a worker was lost,
        nothing is sent to it until Ray has restarted it (a call sent while it restarts fails
        at once, and would be a retry for nothing)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while (actor := self._slots.get(device)) is None:
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped.is_set():
                    return False
                self._lock.wait(left)
            suspect = actor.id in self._suspect
        return not suspect or self._answers(actor, device, max(0.1, deadline - time.monotonic()))

    def _answers(self, actor: _Actor, device: str, timeout: float) -> bool:
        """Wait (up to ``timeout``) until a GPU worker lost mid-call answers again; True at
        once for one that was not lost."""
        with self._lock:
            if actor.id not in self._suspect:
                return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self._stopped.is_set():
            with self._lock:
                if self._slots.get(device) is not actor:
                    return False  # its node left; the slot waits for another worker
            try:
                ray.get(actor.handle.ready.remote(), timeout=1.0)
            except Exception:
                time.sleep(0.05)
                continue
            with self._lock:
                self._suspect.discard(actor.id)
            return True
        return False

    def _any_gpu(self, timeout: float = 120.0) -> _Actor:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for actor in self._slots.values():
                    if actor is not None:
                        return actor
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped.is_set():
                    raise CuzkError("no GPU worker in the cluster (is a GPU node connected?)")
                self._lock.wait(left)

    def _take_cpu(self, nbytes: int, priority: str) -> tuple[_Actor, Reservation | None]:
        """A free CPU worker and a reservation of ``nbytes`` on its node's ledger.

        On a GPU node, synthesis leaves room for ``PREFETCH_DEPTH`` partitions per GPU pulled
        in from other nodes: otherwise partitions synthesized there could fill its ledger while
        waiting for its GPU, and the GPU phase of a partition from elsewhere could never get
        its reservation there (a deadlock seen in the ledger test).
        """
        while True:
            with self._lock:
                if self._stopped.is_set():
                    raise CuzkError("the cluster executor is closed")
                fits = [a for n in self._nodes.values() for a in n.actors
                        if a.kind == "cpu" and not a.busy and n.ledger.total
                        - n.ledger.reserved - nbytes >= self._headroom(n, nbytes)]
                if fits:
                    fits.sort(key=lambda a: -self._free_bytes(a.node_id))
                    actor = fits[0]
                    actor.busy = 1
                    ledger = self._nodes[actor.node_id].ledger
                else:
                    if self._nodes and all(nbytes > n.ledger.total
                                           for n in self._nodes.values()):
                        largest = max(n.ledger.total for n in self._nodes.values())
                        raise CuzkError(
                            f"a partition needs {nbytes} bytes of object store but the "
                            f"largest node has {largest}; give the nodes more "
                            "object_store_memory")
                    self._lock.wait(0.05)  # ledgers change without telling this lock: poll
                    continue
            try:
                res = ledger.reserve(nbytes, LEDGER_CONSUMER, priority, timeout=0) if nbytes \
                    else None
                return actor, res
            except TimeoutError:
                self._free_cpu(actor)
            except Exception:
                self._free_cpu(actor)
                raise

    @staticmethod
    def _headroom(node: _Node, nbytes: int) -> int:
        gpus = sum(1 for a in node.actors if a.kind == "gpu")
        return PREFETCH_DEPTH * gpus * nbytes

    def _free_bytes(self, nid: str) -> int:
        node = self._nodes.get(nid)
        return 0 if node is None else node.ledger.total - node.ledger.reserved

    def _free_cpu(self, actor: _Actor) -> None:
        with self._lock:
            actor.busy = 0
            self._lock.notify_all()

    def _retire_cpu(self, actor: _Actor) -> None:
        """A CPU worker that died (Ray does not restart them): never pick it again; the
        membership thread places a new one if its node is still alive."""
        with self._lock:
            node = self._nodes.get(actor.node_id)
            if node is not None and actor in node.actors:
                node.actors.remove(actor)
        with contextlib.suppress(Exception):
            ray.kill(actor.handle, no_restart=True)

    def _top_up(self) -> None:
        """Enter each CPU worker being placed that answered, and place a new one for each a
        live node lacks (at start, or lost). Never waits: a worker being placed is checked
        again at the next tick (a node that is dying but not yet reported dead would otherwise
        hold the membership thread up)."""
        cpu_cls = cpu_actor_class()
        with self._lock:
            placing = [(nid, actor, ref) for nid, items in self._placing.items()
                       for actor, ref in items]
        refs = [ref for _, _, ref in placing]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        answered = set(done)
        for nid, actor, ref in placing:
            if ref not in answered:
                continue
            try:
                info = ray.get(ref)
            except Exception as exc:
                log.warning("could not place CPU worker %s on node %s: %s", actor.id, nid,
                            _refusal(exc))
                info = None
            with self._lock:
                if nid in self._placing:
                    self._placing[nid] = [it for it in self._placing[nid] if it[1] is not ref]
                node = self._nodes.get(nid)
                if info is None:  # try again later, not at every tick (a constructor that
                    failures = self._cpu_failures.get(nid, 0) + 1  # raises would spin)
                    self._cpu_failures[nid] = failures
                    self._cpu_retry_at[nid] = time.monotonic() + min(2.0 ** failures, 60.0)
                    continue
                if node is None:
                    continue
                self._cpu_failures.pop(nid, None)
                actor.metrics_url = info["metrics_url"]
                actor.metrics_target = actor.metrics_url.removeprefix(
                    "http://").removesuffix("/metrics")
                node.actors.append(actor)
                have = sum(1 for a in node.actors if a.kind == "cpu")
                self._lock.notify_all()
            log.info("cluster node %s: CPU worker %s answered (%d of %d)", nid, actor.id,
                     have, node.cpus)
        now = time.monotonic()
        with self._lock:
            short_of = [(n.id, n.cpus - sum(1 for a in n.actors if a.kind == "cpu")
                         - len(self._placing.get(n.id, ())))
                        for n in self._nodes.values()
                        if self._cpu_retry_at.get(n.id, 0.0) <= now]
        for nid, missing in short_of:
            for _ in range(missing):
                name = f"{self.prefix}cpu-{short(nid)}-{uuid.uuid4().hex[:6]}"
                handle = cpu_cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                    nid, soft=False)).remote(name, self.spec, self._actor_env)
                with self._lock:
                    self._placing.setdefault(nid, []).append(
                        (_Actor(name, "cpu", nid, handle), handle.ready.remote()))

    def _cpu_on(self, nid: str) -> _Actor | None:
        with self._lock:
            node = self._nodes.get(nid)
            if node is None:
                return None
            return next((a for a in node.actors if a.kind == "cpu"), None)

    # ---- ProverBackend -----------------------------------------------------------------------

    def device_memory_bytes(self, device: str) -> int | None:
        return None  # device memory is the GPU worker's own business, per node

    def key_bytes_hint(self, proof_kind: str) -> int:
        return 0  # keys live in the worker actors, not in the head

    def runtime_host_bytes(self) -> int:
        return self.local.runtime_host_bytes()  # the head checks inputs with the generators

    def device_pci_bus_id(self, device: str) -> str | None:
        return None  # a slot is a GPU worker actor on some node, not a device of this host

    def key_device_bytes_hint(self, proof_kind: str) -> int:
        return 0  # device memory is the GPU worker's own business

    def partition_memory_hint(self, proof_kind: str) -> PartitionMemory | None:
        return None  # known once a GPU worker reports the key (load_key)

    def phase_prior(self, proof_kind: str) -> PhasePrior | None:
        """A GPU worker's prior for the kind (its machine's rates; the head's own say nothing
        of the nodes), asked once per kind and never waited on for long
        (``cuzk.cluster.priors``); None until one answers."""
        return self.priors.get(proof_kind)

    def _prior_source(self) -> PriorSource | None:
        """A GPU worker bound to a slot and not lost mid-call, to ask for a prior."""
        with self._lock:
            actor = next((a for a in self._slots.values()
                          if a is not None and a.id not in self._suspect), None)
        if actor is None:
            return None
        return PriorSource(actor.id, actor.node_id, actor.handle.phase_prior.remote)

    def upload_key(self, handle: KeyHandle) -> None:
        pass  # the GPU worker actors load and keep their own keys

    def input_elements(self, proof_kind: str) -> int | None:
        return self.local.input_elements(proof_kind)

    def witness_shape(self, proof_kind: str) -> WitnessShape | None:
        return None  # the CPU workers synthesize from inputs; they cannot read the head's disk

    def verify_proof(
        self, proof_kind: str, proof: Mapping[str, Any], public: Sequence[str]
    ) -> bool | None:
        return self.local.verify_proof(proof_kind, proof, public)

    def check_inputs(self, proof_kind: str, inputs: Sequence[Mapping[str, Any]]) -> None:
        self.local.check_inputs(proof_kind, inputs)

    def verification_key(self, proof_kind: str) -> dict[str, Any]:
        return self.local.verification_key(proof_kind)

    def load_key(self, proof_kind: str) -> KeyHandle:
        actor = self._any_gpu()
        info = ray.get(actor.handle.key_info.remote(proof_kind))
        est: PartitionMemory = info["estimate"]
        return KeyHandle(proof_kind, proof_kind, 0, 0, est, info["sizes"])

    def unload_key(self, handle: KeyHandle) -> None:
        pass  # keys stay resident in the GPU workers (evicted there by their own process)

    def synthesize(
        self, key: KeyHandle, inputs: Mapping[str, Any] | WitnessRef
    ) -> ClusterSynthesis:
        if isinstance(inputs, WitnessRef):  # witness_shape is None: submit refuses them
            raise CuzkError("a cluster's workers take no witnesses")
        ctx = STEP.get()
        job_id, index, prio = (ctx.job_id, ctx.partition, ctx.priority) if ctx else ("", -1,
                                                                                     "normal")
        # Waiting for a free CPU worker (or room on its node) is not synthesis: the partition
        # reads queued_synthesis until a worker takes it (its lease opens there at once).
        actor, res = self._take_cpu(key.estimate.partition_bytes, prio)
        try:
            if ctx is not None and ctx.worker_taken is not None:
                ctx.worker_taken()
            if self.on_dispatch is not None:
                self.on_dispatch("synthesis", actor.node_id, res.held if res else 0)
            wit, abc, node_ref = actor.handle.synthesize.options(num_returns=3).remote(
                key.proof_kind, job_id, index, dict(inputs), _carrier())
            try:
                node_id = ray.get(node_ref)
            except Exception as exc:
                reason = _lost(exc)
                if reason is None:
                    raise _unwrap(exc) from None
                self._retire_cpu(actor)
                raise PhaseLost("synthesis", reason, "synthesis",
                                f"synthesis on {actor.id} lost: {reason}") from exc
            if ctx is not None and ctx.worker_released is not None:
                ctx.worker_released()  # before the worker is free for another partition
        except BaseException:
            if res is not None:
                res.close()
            raise
        finally:
            self._free_cpu(actor)
        return ClusterSynthesis(node_id, wit, abc, res, key.estimate.abc_bytes)

    def gpu_phase(self, key: KeyHandle, synthesis: ClusterSynthesis, device: str) -> GpuResult:
        ctx = STEP.get()
        job_id, index, prio = (ctx.job_id, ctx.partition, ctx.priority) if ctx else ("", -1,
                                                                                     "normal")
        with self._lock:
            actor = self._slots.get(device)
            node = self._nodes.get(actor.node_id) if actor is not None else None
        if actor is None or node is None:
            raise PhaseLost("gpu", "worker_lost", "gpu", f"{device} has no live GPU worker")
        if not self._answers(actor, device, RESTART_WAIT_S):
            raise PhaseLost("gpu", "worker_lost", "gpu",
                            f"{actor.id} did not come back within {RESTART_WAIT_S} s")
        res = None
        if node.id != synthesis.node_id and key.estimate.partition_bytes:
            # the witness and a/b/c are pulled into this node's object store for the phase
            res = node.ledger.reserve(key.estimate.partition_bytes, LEDGER_CONSUMER, prio)
        try:
            if self.on_dispatch is not None:
                self.on_dispatch("gpu", node.id, res.held if res else 0)
            with self._lock:
                ticket = (self._epoch, actor.tickets)
                actor.tickets += 1
            ref = actor.handle.gpu_phase.remote(key.proof_kind, job_id, index,
                                                synthesis.witness, synthesis.abc, ticket,
                                                _carrier())
            packed, _node_id, gpu_carrier = ray.get(ref)
        except Exception as exc:
            reason = _lost(exc)
            if reason is None:
                raise _unwrap(exc) from None
            redo = "gpu" if reason == "worker_lost" else "synthesis"
            if reason == "worker_lost":
                with self._lock:
                    self._suspect.add(actor.id)
            raise PhaseLost("gpu", reason, redo, f"GPU phase on {actor.id} lost: {reason} "
                            f"({type(exc).__name__}: {str(exc)[:300]})"
                            ) from exc
        finally:
            if res is not None:
                res.close()
        if self.transfers is None:
            return GpuResult(packed, gpu_carrier, node.id)
        self.transfers.track(job_id, index, "abc", synthesis.abc, synthesis.node_id,
                             sent_to=(node.id,))
        return GpuResult(packed, gpu_carrier, node.id, ref)

    def gpu_steps(self, gpu_output: Any) -> Mapping[str, float]:
        """Not measured across the cluster yet: the worker's GPU span carries the phase."""
        return {}

    def release_abc(self, synthesis: ClusterSynthesis) -> None:
        synthesis.abc = None  # the last reference: Ray frees a/b/c on every node
        if synthesis.reservation is not None and not synthesis.reservation.closed:
            synthesis.reservation.release(min(synthesis.abc_bytes, synthesis.reservation.held))

    def finalize(self, key: KeyHandle, synthesis: ClusterSynthesis,
                 gpu_output: GpuResult) -> ProofResult:
        actor = self._cpu_on(synthesis.node_id)
        if actor is None:
            raise PhaseLost("finalize", "data_lost", "synthesis",
                            f"node {synthesis.node_id} holding the witness is gone")
        ctx = STEP.get()
        job_id, index = (ctx.job_id, ctx.partition) if ctx else ("", -1)
        try:
            ref = actor.handle.finalize.remote(
                key.proof_kind, job_id, index, synthesis.witness, gpu_output.packed, _carrier(),
                gpu_output.carrier)
            (proof, public), _node_id = ray.get(ref)
        except Exception as exc:
            reason = _lost(exc)
            if reason is None:
                raise _unwrap(exc) from None
            if reason == "worker_lost":
                self._retire_cpu(actor)
            raise PhaseLost("finalize", reason, "synthesis",
                            f"finalize on {actor.id} lost: {reason}") from exc
        if self.transfers is not None:
            log_ = self.transfers
            log_.track(job_id, index, "witness", synthesis.witness, synthesis.node_id,
                       sent_to=(gpu_output.node_id, actor.node_id))
            if gpu_output.ref is not None:  # its points went back out as a value to finalize
                log_.track(job_id, index, "gpu_output", gpu_output.ref, gpu_output.node_id,
                           resent_to=(actor.node_id,))
            log_.track(job_id, index, "proof", ref, actor.node_id)
        return ProofResult(proof, public)

    def discard(self, synthesis: Any) -> None:
        if isinstance(synthesis, ClusterSynthesis):
            synthesis.witness = synthesis.abc = None
            if synthesis.reservation is not None:
                synthesis.reservation.close()

    # ---- reads -------------------------------------------------------------------------------

    def actors(self) -> list[_Actor]:
        with self._lock:
            return [a for n in self._nodes.values() for a in n.actors]

    def resident_keys(self) -> list[str]:
        """Proof kinds whose key a GPU worker found by name at start (a worker that outlived
        an earlier head) already held: the head enters them as resident without a load."""
        with self._lock:
            return sorted({k for keys in self._adopted.values() for k in keys})

    def gpu_actor(self, device: str) -> Any:
        with self._lock:
            actor = self._slots.get(device)
            return None if actor is None else actor.handle

    def ledgers(self) -> dict[str, MemoryBudget]:
        with self._lock:
            return {nid: n.ledger for nid, n in self._nodes.items()}

    def nodes(self) -> list[NodeView]:
        """Every node with its workers as each actor answers now (1 s), and its ledger."""
        with self._lock:
            nodes = list(self._nodes.values())
        asked = [(a, a.handle.snapshot.remote()) for n in nodes for a in n.actors]
        ray.wait([r for _, r in asked], num_returns=len(asked), timeout=SNAPSHOT_TIMEOUT_S)
        answers: dict[int, dict[str, Any]] = {}
        for actor, ref in asked:
            # no answer in time: unreachable, never idle
            with contextlib.suppress(GetTimeoutError, RayActorError, RayTaskError):
                answers[id(actor)] = ray.get(ref, timeout=0)
        out = []
        for n in nodes:
            workers = []
            for a in n.actors:
                snap = answers.get(id(a))
                if snap is None:
                    workers.append(ClusterWorkerView(a.id, a.kind, "unreachable",
                                                     metrics_url=a.metrics_url))
                else:
                    a.metrics_url = snap["metrics_url"]  # a restarted actor serves a new port
                    a.metrics_target = a.metrics_url.removeprefix("http://").removesuffix(
                        "/metrics")
                    workers.append(ClusterWorkerView(
                        a.id, a.kind, snap["state"], snap["job_id"], snap["partition"],
                        snap["partitions_done"], a.metrics_url))
            out.append(NodeView(n.id, n.role, n.address, tuple(workers), n.ledger.total,
                                n.ledger.reserved))
        return out

    def close(self) -> None:
        """Stop following the cluster; CPU workers still starting are killed (the ones that
        answered are the caller's to keep or kill, through ``actors``)."""
        self._stopped.set()
        with self._lock:
            self._lock.notify_all()
        self._thread.join(5)
        with self._lock:
            starting = [a for items in self._placing.values() for a, _ in items]
            self._placing.clear()
        for a in starting:
            with contextlib.suppress(Exception):
                ray.kill(a.handle, no_restart=True)
