"""The engine facade the API and CLI call (docs/interfaces.md, "Engine").

It validates requests before anything changes, keeps the job table (idempotent on
``request_id``) and wires the pipeline. It reports through two doors only (docs/design.md
section 5): typed events to subscribers (``subscribe``) and one immutable snapshot computed
from open leases, scopes and reservations when asked (``snapshot``). It speaks the
OpenTelemetry API only; metrics and the SDK belong to the application (``cuzk.telemetry``).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace

from cuzk import __version__
from cuzk.engine.backend import ProverBackend
from cuzk.engine.counters import Counters
from cuzk.engine.events import (
    EventBus,
    JobAccepted,
    KeyEvicted,
    PartitionPhaseEnded,
    Subscriber,
    Subscription,
    WorkersPaused,
)
from cuzk.engine.jobs import Job, Partition
from cuzk.engine.keys import KeyResidency
from cuzk.engine.memory import MemoryBudget, auto_budget
from cuzk.engine.pipeline import Pipeline
from cuzk.engine.settings import EngineSettings
from cuzk.engine.snapshot import BudgetView, EngineSnapshot, JobView, KeyView, WaiterView
from cuzk.engine.spans import SpanBook, extract_context
from cuzk.errors import CuzkError, InputError, UnknownJob, UnknownProofKind
from cuzk.protocol import ACTIVE_PHASES, JOB_OUTCOMES, PRIORITY_RANK, CircuitInfo

RECENT_JOBS = 50
"""Finished jobs a status snapshot lists after the unfinished ones (most recent first)."""

log = logging.getLogger(__name__)


class EngineNotRunning(CuzkError):
    """Submit before start() or after shutdown()."""


def _settings_of(config: Any) -> EngineSettings:
    if isinstance(config, EngineSettings):
        return config
    if hasattr(config, "engine_settings"):
        return config.engine_settings()
    if config is None:
        return EngineSettings()
    raise TypeError(f"Engine needs EngineSettings (or a config with engine_settings()), "
                    f"not {type(config).__name__}")


class Engine:
    """A proving engine. ``Engine(settings, prover=None)``; None means the real prover.

    ``tracer_provider``: spans go there (``cuzk serve`` passes the SDK provider it built from
    the ``OTEL_*`` environment; tests one with an in-memory exporter). Without one the engine
    uses the OpenTelemetry API's global provider, which records nothing unless an application
    installed one. ``settings.tracing_enabled = False`` records no spans at all.
    """

    def __init__(
        self,
        config: EngineSettings | Any = None,
        prover: ProverBackend | None = None,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.settings = _settings_of(config)
        s = self.settings
        if prover is None:
            from cuzk.engine.real_prover import RealProver

            prover = RealProver(s)
        self.prover = prover
        self.tracer_provider = tracer_provider
        self.spans = SpanBook(tracer_provider, enabled=s.tracing_enabled)
        self.events = EventBus()
        self.counters = Counters()
        for kind in s.proof_kinds:
            self.counters.ensure("jobs_submitted", kind)
            for outcome in JOB_OUTCOMES:
                self.counters.ensure("jobs_completed", (kind, outcome))

        host_total = s.memory_budget_bytes or auto_budget(s.memory_safety_margin_bytes)
        self.host_budget = MemoryBudget(host_total, "host")
        self.device_budgets: dict[str, MemoryBudget] = {}
        for device in prover.devices:
            if device == "cpu":
                continue
            total = s.device_memory_budget_bytes
            if total is None:
                known = prover.device_memory_bytes(device)
                if known:
                    total = max(known - s.device_memory_safety_margin_bytes, known // 2)
            if total:
                # One lock for all budgets: a partition's grant spans host and devices.
                self.device_budgets[device] = MemoryBudget(total, device, self.host_budget.lock)
        self.keys = KeyResidency(prover, self.host_budget, self.device_budgets)
        self.keys.on_evicted = self._evicted

        self.pipeline = Pipeline(
            s, prover, self.spans, self.events, self.counters, self.host_budget,
            self.device_budgets, self.keys, self._job_settled)
        for w in self.pipeline.workers:
            for kind in s.proof_kinds:
                self.counters.ensure("worker_partitions", (w.id, w.device, kind))

        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._active: dict[str, Job] = {}
        self._finished: OrderedDict[str, Job] = OrderedDict()
        self._by_request: dict[str, Job] = {}
        self._seq = itertools.count()
        self._running = False
        self._stopped = False
        self._started_at: float | None = None

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Engine:
        with self._lock:
            if self._running or self._stopped:
                return self
            self._running = True
            self._started_at = time.monotonic()
        self.pipeline.start()
        return self

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, cancel unfinished jobs, let in-flight steps clean up, drop keys."""
        with self._lock:
            if self._stopped:
                return
            self._running = False
            self._stopped = True
            active = list(self._active.values())
        for job in active:
            self.pipeline.finish_job(job, "cancelled", "engine shut down")
        self.pipeline.stop(timeout)
        self.keys.evict_all()

    @property
    def running(self) -> bool:
        """Started and not shut down: accepting jobs (what ``/readyz`` reports)."""
        with self._lock:
            return self._running

    def subscribe(self, fn: Subscriber) -> Subscription:
        """Receive every engine event (``cuzk.engine.events``) from now on."""
        return self.events.subscribe(fn)

    def __enter__(self) -> Engine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ---- jobs --------------------------------------------------------------------------------

    def submit(
        self,
        proof_kind: str,
        inputs: Sequence[Mapping[str, Any]],
        request_id: str | None = None,
        priority: str | None = None,
        trace_context: Any = None,
    ) -> Job:
        """Accept a job (validated before anything changes). A repeated ``request_id`` returns
        the same job unless that one failed or was cancelled, which starts a new attempt."""
        kind = self.settings.proof_kinds.get(proof_kind)
        if kind is None:
            known = ", ".join(sorted(self.settings.proof_kinds)) or "none"
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r} (known: {known})")
        if priority is None:
            priority = kind.priority
        elif priority not in PRIORITY_RANK:
            raise InputError(
                f"priority must be one of {', '.join(PRIORITY_RANK)}, not {priority!r}")
        if isinstance(inputs, Mapping | str | bytes) or not isinstance(inputs, Sequence):
            raise InputError("inputs must be a list with one object per partition")
        if len(inputs) != kind.partitions:
            raise InputError(
                f"proof kind {proof_kind!r} takes {kind.partitions} partition input(s), "
                f"got {len(inputs)}")
        for i, item in enumerate(inputs):
            if not isinstance(item, Mapping):
                raise InputError(f"inputs[{i}] must be an object, not {type(item).__name__}")
        if request_id is not None and (not isinstance(request_id, str) or not request_id):
            raise InputError("request_id must be a non-empty string")
        self._check_memory(proof_kind)
        check = getattr(self.prover, "check_inputs", None)
        if check is not None:  # bad signals are the caller's error (422), not a failed job later
            check(proof_kind, inputs)
        parent = extract_context(trace_context)

        with self._lock:
            if not self._running:
                raise EngineNotRunning("the engine is not running")
            attempt = 1
            if request_id is not None and (prev := self._by_request.get(request_id)):
                if prev.proof_kind != proof_kind:
                    raise InputError(
                        f"request_id {request_id!r} was already used for proof kind "
                        f"{prev.proof_kind!r}")
                if prev.outcome not in ("failed", "cancelled"):
                    return prev
                attempt = prev.attempt + 1
            job = Job(proof_kind, priority, request_id, attempt, next(self._seq))
            self._create_spans(job, inputs, parent)
            self._jobs[job.id] = job
            self._active[job.id] = job
            if request_id is not None:
                self._by_request[request_id] = job
            self.counters.inc("jobs_submitted", proof_kind)
            if self.events.active:
                self.events.publish(JobAccepted(
                    job.id, proof_kind, priority, request_id, attempt,
                    tuple(inputs), job.submitted_at, job.trace_id, job.trace_sampled))
            self.pipeline.enqueue(job)
        return job

    def _check_memory(self, proof_kind: str) -> None:
        """Refuse (PartitionTooLarge, HTTP 507) a kind whose partition can never fit: its key
        plus its working memory exceed a whole budget. Figures the prover cannot give before
        loading are checked at admission instead."""
        try:
            self.keys.need(proof_kind)
        except Exception:  # no hint (missing key file, ...): the load will say what is wrong
            log.debug("no memory figures for %s before loading", proof_kind, exc_info=True)
            return
        self.keys.check_fits(proof_kind)

    def _create_spans(self, job: Job, inputs: Sequence[Mapping[str, Any]], parent: Any) -> None:
        attrs = {
            "cuzk.job.id": job.id,
            "cuzk.proof_kind": job.proof_kind,
            "cuzk.priority": job.priority,
            "cuzk.job.partitions": len(inputs),
            "cuzk.job.attempt": job.attempt,
        }
        if job.request_id is not None:
            attrs["cuzk.request.id"] = job.request_id
        job.span = self.spans.start("cuzk.job", parent, attrs)
        job.trace_id = job.span.trace_id
        job.trace_sampled = job.span.sampled
        for i, item in enumerate(inputs):
            p = Partition(job, i, item, self.spans, self._phase_closed)
            p.span = self.spans.start("cuzk.partition", job.span, {
                "cuzk.job.id": job.id,
                "cuzk.proof_kind": job.proof_kind,
                "cuzk.partition.index": i,
                "cuzk.priority": job.priority,
            })
            job.partitions.append(p)

    def _phase_closed(self, p: Partition, phase: str, seconds: float) -> None:
        if self.events.active:
            job = p.job
            self.events.publish(PartitionPhaseEnded(
                job.id, job.proof_kind, p.index, phase, seconds, job.trace_id,
                job.trace_sampled))

    def _evicted(self, proof_kind: str, to_make_room: bool) -> None:
        if self.events.active:
            self.events.publish(KeyEvicted(proof_kind, to_make_room))

    def _job_settled(self, job: Job) -> None:
        """Every partition settled and the job concluded: end its span, retire it."""
        with self._lock:
            if self._active.pop(job.id, None) is None:
                return
            self._finished[job.id] = job
            while len(self._finished) > self.settings.job_retention:
                _, old = self._finished.popitem(last=False)
                self._jobs.pop(old.id, None)
                if old.request_id is not None and self._by_request.get(old.request_id) is old:
                    del self._by_request[old.request_id]
        if job.span is not None:
            self.spans.end(job.span, job.error_exc)
        job.settled.set()

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise UnknownJob(f"no job with id {job_id!r}")
        return job

    def wait(self, job_id: str, timeout: float | None = None) -> Job:
        """Block until the job is terminal or ``timeout`` passes; returns it either way."""
        job = self.get(job_id)
        job.wait(timeout)
        return job

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        self.pipeline.finish_job(job, "cancelled", "cancelled by request")
        return job

    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    # ---- keys and workers --------------------------------------------------------------------

    def circuits(self) -> list[CircuitInfo]:
        resident = {rk.proof_kind: rk for rk in self.keys.resident()}
        out: list[CircuitInfo] = []
        for name, kind in self.settings.proof_kinds.items():
            rk = resident.get(name)
            out.append({
                "proof_kind": name,
                "partitions": kind.partitions,
                "priority": kind.priority,  # type: ignore[typeddict-item]
                "resident": rk is not None,
                "sizes": dict(rk.handle.sizes) if rk else None,
                "key_host_bytes": rk.host_bytes if rk else None,
            })
        return out

    def preload(self, proof_kind: str) -> dict:
        kind = self.settings.proof_kinds.get(proof_kind)
        if kind is None:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        rk = self.keys.preload(proof_kind, kind.priority)
        return {"proof_kind": proof_kind, "resident": True, "host_bytes": rk.host_bytes}

    def verification_key(self, proof_kind: str) -> dict:
        """The snarkjs-format verification key of the key this engine proves ``proof_kind``
        with (from the prover backend; a backend without keys raises CuzkError)."""
        if proof_kind not in self.settings.proof_kinds:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        export = getattr(self.prover, "verification_key", None)
        if export is None:
            raise CuzkError(f"the {type(self.prover).__name__} prover has no verification keys")
        return export(proof_kind)

    def evict(self, proof_kind: str) -> dict:
        if proof_kind not in self.settings.proof_kinds:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        return {"proof_kind": proof_kind, "result": self.keys.evict(proof_kind)}

    def pause_workers(self) -> None:
        self.pipeline.gpu_queue.pause()
        self.events.publish(WorkersPaused(True))

    def resume_workers(self) -> None:
        self.pipeline.gpu_queue.resume()
        self.events.publish(WorkersPaused(False))

    @property
    def workers(self) -> list:
        return list(self.pipeline.workers)

    # ---- reads -------------------------------------------------------------------------------

    def snapshot(self, recent_jobs: int = RECENT_JOBS) -> EngineSnapshot:
        """Everything an operator can ask about, computed now from open leases, scopes and
        reservations. ``recent_jobs``: finished jobs listed after the unfinished ones."""
        s = self.settings
        now = time.time()
        with self._lock:
            live = list(self._active.values())
            finished = list(reversed(self._finished.values()))[:max(0, recent_jobs)]
            started = self._started_at
        paused = self.pipeline.gpu_queue.paused
        workers = tuple(w.view(paused) for w in self.pipeline.workers)
        phases: dict[tuple[str, str], int] = {}
        queued: dict[tuple[str, str], int] = {}
        for name, kind in s.proof_kinds.items():
            queued[(name, kind.priority)] = 0
            for phase in ACTIVE_PHASES:
                phases[(name, phase)] = 0
        # One read of the host budget gives its waiters and the partitions among them: the
        # waiting_memory counts are those partitions, so they agree with the waiters always.
        host, waiting = _read_budget(self.host_budget)
        for w in host.waiters:
            if w.proof_kind is not None:
                k = (w.proof_kind, "waiting_memory")
                phases[k] = phases.get(k, 0) + 1
        live.sort(key=lambda j: j.seq)
        views: list[JobView] = []
        for job in live:
            view = job.view(waiting)
            views.append(view)
            if view.state == "queued":
                key = (job.proof_kind, job.priority)
                queued[key] = queued.get(key, 0) + 1
            for p in view.partitions:
                if p.phase in ACTIVE_PHASES and p.phase != "waiting_memory":
                    k2 = (job.proof_kind, p.phase)
                    phases[k2] = phases.get(k2, 0) + 1
        views += [job.view() for job in finished]
        keys = [KeyView(**k) for k in self.keys.snapshot()]
        return EngineSnapshot(
            time=now,
            uptime_s=0.0 if started is None else time.monotonic() - started,
            version=__version__,
            backend=self.prover.name,
            paused=paused,
            queues={
                "pending": len(self.pipeline.pending),
                "gpu": len(self.pipeline.gpu_queue),
                "finalize": len(self.pipeline.fin_queue),
            },
            workers=workers,
            jobs=tuple(views),
            partition_phases=phases,
            jobs_queued=queued,
            memory=host,
            device_memory={d: _read_budget(b)[0] for d, b in self.device_budgets.items()},
            keys=tuple(keys),
            jobs_submitted=self.counters.get("jobs_submitted"),  # type: ignore[arg-type]
            jobs_completed=self.counters.get("jobs_completed"),  # type: ignore[arg-type]
            worker_partitions=self.counters.get("worker_partitions"),  # type: ignore[arg-type]
            spans_open=len(self.spans.open_spans()),
        )

    def status(self) -> dict:
        """The status snapshot in its wire shape (``cuzk.protocol.StatusInfo``)."""
        return self.snapshot().to_wire()  # type: ignore[return-value]

    def quiescent(self) -> bool:
        """Nothing in flight: no live job, lease, reservation besides keys, or open job span."""
        with self._lock:
            if self._active:
                return False
        if any(w.busy for w in self.pipeline.workers):
            return False
        return all(r.consumer == "proving_key" for r in self.host_budget.live())


def _read_budget(budget: MemoryBudget) -> tuple[BudgetView, set[int]]:
    """One locked read of a budget, and the ids of the partitions among its waiters."""
    snap = budget.snapshot()
    waiters = []
    waiting: set[int] = set()
    for w in snap["waiters"]:
        tag = w.get("tag")
        if isinstance(tag, Partition):
            waiting.add(id(tag))
            waiters.append(WaiterView(w["consumer"], w["bytes"], w["priority_rank"], tag.job.id,
                                      tag.index, tag.job.proof_kind))
        else:
            waiters.append(WaiterView(w["consumer"], w["bytes"], w["priority_rank"], None, None,
                                      None))
    view = BudgetView(
        name=snap["name"],
        budget_bytes=snap["budget_bytes"],
        reserved_bytes=snap["reserved_bytes"],
        reserved_by_consumer=snap["reserved_by_consumer"],
        waiters=tuple(waiters),
        evictions=snap["evictions"],
        evicted_bytes=snap["evicted_bytes"],
    )
    return view, waiting
