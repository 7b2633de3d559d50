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
from types import MappingProxyType
from typing import Any

from opentelemetry import trace

from cuzk import __version__
from cuzk.engine.backend import ProofResult, ProverBackend
from cuzk.engine.counters import Counters
from cuzk.engine.events import (
    EventBus,
    JobAccepted,
    JournalWritten,
    KeyEvicted,
    PartitionPhaseEnded,
    Subscriber,
    Subscription,
    WorkersPaused,
)
from cuzk.engine.jobs import Job, Partition
from cuzk.engine.journal import JobRecord, Journal, JournalError, JournalRecorder, inputs_digest
from cuzk.engine.keys import KeyResidency
from cuzk.engine.memory import MemoryBudget, auto_budget
from cuzk.engine.pipeline import Pipeline
from cuzk.engine.settings import EngineSettings
from cuzk.engine.snapshot import BudgetView, EngineSnapshot, JobView, KeyView, WaiterView
from cuzk.engine.spans import SpanBook, extract_context, span_context_of, traceparent_of
from cuzk.errors import (
    CuzkError,
    InputError,
    RequestConflict,
    Unavailable,
    UnknownJob,
    UnknownProofKind,
)
from cuzk.protocol import (
    ACTIVE_PHASES,
    JOB_OUTCOMES,
    PRIORITY_RANK,
    RETRY_PHASES,
    RETRY_REASONS,
    CircuitInfo,
)

RECENT_JOBS = 50
"""Finished jobs a status snapshot lists after the unfinished ones (most recent first)."""

RECOVERY_OUTCOMES = ("resumed", "completed", "failed")
"""``cuzk_jobs_recovered_total`` outcomes: queued again; every partition was already journaled
(settled at once, nothing proven again); could not be resumed (its proof kind is gone)."""
MEMORY_WINDOW = 1000
"""With a journal, finished jobs beyond this many are served from the journal, not memory."""

log = logging.getLogger(__name__)


class EngineNotRunning(Unavailable):
    """Submit before start(), while draining, or after shutdown() (a 503)."""


def _traceparent(trace_context: Any) -> str | None:
    """The client's ``traceparent`` (journaled so a recovered job stays in the client's trace)."""
    if isinstance(trace_context, str):
        return trace_context
    if isinstance(trace_context, Mapping):
        for k, v in trace_context.items():
            if str(k).lower() == "traceparent":
                return str(v)
        return None
    if trace_context is None:
        return None
    try:
        ctx = extract_context(trace_context)
    except TypeError:
        return None
    return traceparent_of(trace.get_current_span(ctx))


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
        self.journal: Journal | None = None
        if s.journal_path is not None:  # raises JournalError saying why it cannot be used
            self.journal = Journal.open(
                s.journal_path, retention_jobs=s.job_retention, retention_s=s.job_retention_s,
                on_write=self._journal_written)
            JournalRecorder(self.journal).subscribe(self.events)
        for kind in s.proof_kinds:
            for outcome in RECOVERY_OUTCOMES:
                self.counters.ensure("jobs_recovered", (kind, outcome))
        for phase in RETRY_PHASES:
            for reason in RETRY_REASONS:
                self.counters.ensure("partition_retries", (phase, reason))

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
        self._submit_lock = threading.Lock()  # one submit at a time: check, journal, enqueue
        self._running = False
        self._draining = False
        self._stopped = False
        self._started_at: float | None = None
        self.drained = threading.Event()  # set when a drain has finished (long-polls answer)
        self._drain_deadline = 0.0
        self._probe_at = 0.0

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Engine:
        """Recover the journal's unfinished jobs (queued in priority order), then run."""
        with self._lock:
            if self._running or self._stopped:
                return self
            self._running = True
            self._started_at = time.monotonic()
        if self.journal is not None:
            self._recover(self.journal)
        self.pipeline.start()
        return self

    def drain(self, timeout: float) -> bool:
        """Refuse new submits; let partitions in flight finish (journaled) within ``timeout``.

        Partitions not started stay journaled and resume at the next start (without a
        journal they are cancelled at shutdown). True when nothing was left in flight.
        """
        with self._lock:
            self._draining = True
            self._drain_deadline = time.monotonic() + timeout
        try:
            return self.pipeline.drain(timeout)
        finally:
            self.drained.set()

    @property
    def draining(self) -> bool:
        return self._draining

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop accepting, let in-flight steps clean up, drop keys, close the journal.

        Without a journal unfinished jobs are cancelled; with one they are left unfinished
        there (their spans end marked interrupted) and resume at the next start.
        """
        with self._lock:
            if self._stopped:
                return
            self._running = False
            self._stopped = True
            active = list(self._active.values())
        if self.journal is None:
            for job in active:
                self.pipeline.finish_job(job, "cancelled", "engine shut down")
        else:
            self.pipeline.draining = True  # nothing new starts while the queues close
        self.pipeline.stop(timeout)
        if self.journal is not None:
            with self._lock:
                left = list(self._active.values())
            for job in left:
                self._interrupt(job)
            self.journal.close()
        self.keys.evict_all()
        close = getattr(self.prover, "close", None)
        if close is not None:  # a cluster executor lets go of its actors and connection
            close()
        self.drained.set()

    def _interrupt(self, job: Job) -> None:
        """End the spans of a job left unfinished at shutdown; the journal still holds it."""
        reason = "interrupted by shutdown; resumes at the next start"
        for p in job.partitions:
            if p.outcome is None:
                p.settle("cancelled", reason)
        if job.span is not None:
            job.span.set_attribute("cuzk.job.interrupted", True)
            self.spans.end(job.span)

    def readiness(self) -> str | None:
        """None when ready for work, else why not (``/readyz``)."""
        with self._lock:
            running, draining, stopped = self._running, self._draining, self._stopped
        if stopped:
            return "shut down"
        if draining:
            return "draining: finishing partitions in flight before exit"
        if not running:
            return "not started"
        journal = self.journal
        if journal is not None and journal.last_error is not None:
            now = time.monotonic()
            if now - self._probe_at >= 1.0:  # re-check at most once a second
                self._probe_at = now
                journal.probe()
            if journal.last_error is not None:
                return str(journal.last_error)
        return None

    @property
    def running(self) -> bool:
        """Started, not draining or shut down, journal writable: what ``/readyz`` reports."""
        return self.readiness() is None

    def recovered(self) -> dict[tuple[str, str], int]:
        """Jobs recovered from the journal at start, by (proof kind, outcome)."""
        return self.counters.get("jobs_recovered")  # type: ignore[return-value]

    def _journal_written(self, seconds: float) -> None:
        if self.events.active:
            self.events.publish(JournalWritten(seconds))

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
        digest = inputs_digest(inputs)
        self._check_running()
        if request_id is not None and (prev := self._previous(request_id)) is not None:
            self._check_same_body(prev, proof_kind, priority, digest)
            if prev.outcome not in ("failed", "cancelled"):
                return prev  # a replay: nothing else runs
        self._check_memory(proof_kind)
        check = getattr(self.prover, "check_inputs", None)
        if check is not None:  # bad signals are the caller's error (422), not a failed job later
            check(proof_kind, inputs)
        parent = extract_context(trace_context)

        with self._submit_lock:
            self._check_running()
            attempt = 1
            if request_id is not None and (prev := self._previous(request_id)) is not None:
                self._check_same_body(prev, proof_kind, priority, digest)
                if prev.outcome not in ("failed", "cancelled"):
                    return prev
                attempt = prev.attempt + 1
            job = Job(proof_kind, priority, request_id, attempt, next(self._seq))
            job.inputs_digest = digest
            self._create_spans(job, inputs, parent)
            if self.journal is not None:  # durable before anyone hears of it (the 202)
                try:
                    self.journal.record_accepted(JobRecord(
                        job.id, request_id, proof_kind, priority, list(inputs), digest,
                        _traceparent(trace_context), traceparent_of(job.span), attempt, job.seq,
                        job.submitted_at))
                except JournalError as e:
                    self._discard(job, e)
                    raise
            with self._lock:
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

    def _check_running(self) -> None:
        if self._draining or self._stopped:
            left = max(0.0, self._drain_deadline - time.monotonic())
            raise EngineNotRunning(
                "the server is shutting down and accepts no new jobs; retry against another "
                "instance or after the restart", retry_after=max(1.0, left))
        if not self._running:
            raise EngineNotRunning("the engine is not running")

    def _previous(self, request_id: str) -> Job | None:
        """The job a request id names: in memory, else (after a restart) in the journal."""
        with self._lock:
            prev = self._by_request.get(request_id)
        if prev is None and self.journal is not None and not self.journal.closed:
            rec = self.journal.latest_for_request(request_id)
            if rec is not None:
                prev = self._restore(rec)
        return prev

    @staticmethod
    def _check_same_body(prev: Job, proof_kind: str, priority: str, digest: str) -> None:
        """The 409: a request id names one request (kind, priority and inputs)."""
        differs = [
            what for what, same in (
                (f"proof kind {proof_kind!r} (was {prev.proof_kind!r})",
                 proof_kind == prev.proof_kind),
                (f"priority {priority!r} (was {prev.priority!r})", priority == prev.priority),
                ("inputs", prev.inputs_digest is None or digest == prev.inputs_digest),
            ) if not same
        ]
        if differs:
            raise RequestConflict(
                f"request_id {prev.request_id!r} already names job {prev.id} "
                f"(state {prev.state}); this request differs in {', '.join(differs)}. Use a new "
                "request_id for a different request", prev.id)

    def _discard(self, job: Job, error: BaseException) -> None:
        """A job that was never accepted (the journal refused it): end its spans."""
        for p in job.partitions:
            p.settle("cancelled", "not accepted")
        if job.span is not None:
            self.spans.end(job.span, error)

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

    def _create_spans(
        self,
        job: Job,
        inputs: Sequence[Mapping[str, Any]],
        parent: Any,
        links: Sequence[Any] = (),
        proven: Mapping[int, tuple[dict, list[str]]] | None = None,
    ) -> None:
        """The job span and one span per partition to prove (``proven`` ones are settled)."""
        attrs = {
            "cuzk.job.id": job.id,
            "cuzk.proof_kind": job.proof_kind,
            "cuzk.priority": job.priority,
            "cuzk.job.partitions": len(inputs),
            "cuzk.job.attempt": job.attempt,
        }
        if job.request_id is not None:
            attrs["cuzk.request.id"] = job.request_id
        if links:
            attrs["cuzk.job.recovered"] = True
            attrs["cuzk.job.recovered_partitions"] = len(proven or {})
        job.span = self.spans.start("cuzk.job", parent, attrs, links=links)
        job.trace_id = job.span.trace_id
        job.trace_sampled = job.span.sampled
        for i, item in enumerate(inputs):
            p = Partition(job, i, item, self.spans, self._phase_closed)
            job.partitions.append(p)
            if proven and i in proven:
                proof, public = proven[i]
                p.proof = ProofResult(proof, public)
                p.settle("done")
                continue
            p.span = self.spans.start("cuzk.partition", job.span, {
                "cuzk.job.id": job.id,
                "cuzk.proof_kind": job.proof_kind,
                "cuzk.partition.index": i,
                "cuzk.priority": job.priority,
            })

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
        self._prune_finished()
        if job.span is not None:
            self.spans.end(job.span, job.error_exc)
        job.settled.set()

    def _prune_finished(self) -> None:
        """Drop finished jobs past retention (count and age), as the journal does; with a
        journal, memory keeps only the newest MEMORY_WINDOW (older ones are read from it)."""
        s = self.settings
        keep = min(s.job_retention, MEMORY_WINDOW) if self.journal else s.job_retention
        oldest = time.time() - s.job_retention_s
        with self._lock:
            while self._finished:
                old = next(iter(self._finished.values()))
                if len(self._finished) <= keep and (old.finished_at or 0.0) >= oldest:
                    break
                self._finished.popitem(last=False)
                self._jobs.pop(old.id, None)
                if old.request_id is not None and self._by_request.get(old.request_id) is old:
                    del self._by_request[old.request_id]

    def get(self, job_id: str) -> Job:
        self._prune_finished()
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None and self.journal is not None and not self.journal.closed:
            rec = self.journal.find(job_id)
            if rec is not None:
                job = self._restore(rec)
        if job is None:
            raise UnknownJob(f"no job with id {job_id!r}")
        return job

    # ---- the journal -------------------------------------------------------------------------

    def _restore(self, rec: JobRecord) -> Job:
        """A journaled job as a Job object (finished ones are served like in-memory ones)."""
        job = Job(rec.proof_kind, rec.priority, rec.request_id, rec.attempt, rec.seq,
                  job_id=rec.id, submitted_at=rec.submitted_at)
        job.inputs_digest = rec.inputs_digest
        original = span_context_of(rec.span_context)
        if original is not None:
            job.trace_id = format(original.trace_id, "032x")
        for i, item in enumerate(rec.inputs):
            p = Partition(job, i, item, self.spans, None)
            if i in rec.proofs:
                p.proof = ProofResult(*rec.proofs[i])
                p.outcome = "done"
            elif rec.finished:
                p.outcome = "cancelled"
            job.partitions.append(p)
        if rec.finished:
            job.conclude(rec.state, rec.error)
            job.finished_at = rec.finished_at
            job._t_end = job._t0 + ((rec.finished_at or rec.submitted_at) - rec.submitted_at)
            job._done.set()
            job.settled.set()
        return job

    def _recover(self, journal: Journal) -> None:
        """Queue the journal's unfinished jobs again; only unproven partitions are proven."""
        self._seq = itertools.count(journal.max_seq() + 1)
        for rec in journal.unfinished():
            kind = self.settings.proof_kinds.get(rec.proof_kind)
            if kind is None or len(rec.inputs) != kind.partitions:
                why = (f"not resumed after a restart: proof kind {rec.proof_kind!r} is no longer "
                       "configured" if kind is None else
                       f"not resumed after a restart: proof kind {rec.proof_kind!r} now takes "
                       f"{kind.partitions} partitions, the job has {len(rec.inputs)}")
                journal.record_settled(rec.id, "failed", why)
                self.counters.inc("jobs_recovered", (rec.proof_kind, "failed"))
                log.warning("job %s %s", rec.id, why)
                continue
            job = Job(rec.proof_kind, rec.priority, rec.request_id, rec.attempt, rec.seq,
                      job_id=rec.id, submitted_at=rec.submitted_at)
            job.inputs_digest = rec.inputs_digest
            original = span_context_of(rec.span_context)
            # The client's trace when it sent one, else the original job's: the trace goes on.
            parent = extract_context(rec.traceparent) if rec.traceparent else None
            if parent is None and original is not None:
                parent = trace.set_span_in_context(trace.NonRecordingSpan(original))
            self._create_spans(job, rec.inputs, parent, links=[original] if original else [],
                               proven=rec.proofs)
            with self._lock:
                self._jobs[job.id] = job
                self._active[job.id] = job
                if job.request_id is not None:
                    self._by_request[job.request_id] = job
            if all(p.outcome == "done" for p in job.partitions):
                self.counters.inc("jobs_recovered", (job.proof_kind, "completed"))
                self.pipeline.finish_job(job, "succeeded")
            else:
                self.counters.inc("jobs_recovered", (job.proof_kind, "resumed"))
                self.pipeline.enqueue(job)

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
        read_nodes = getattr(self.prover, "nodes", None)  # a cluster executor's nodes
        nodes = tuple(read_nodes()) if read_nodes is not None else ()
        return EngineSnapshot(
            time=now,
            uptime_s=0.0 if started is None else time.monotonic() - started,
            version=__version__,
            backend=self.prover.name,
            paused=paused,
            queues=MappingProxyType({
                "pending": len(self.pipeline.pending),
                "gpu": len(self.pipeline.gpu_queue),
                "finalize": len(self.pipeline.fin_queue),
            }),
            workers=workers,
            jobs=tuple(views),
            partition_phases=MappingProxyType(phases),
            jobs_queued=MappingProxyType(queued),
            memory=host,
            device_memory=MappingProxyType(
                {d: _read_budget(b)[0] for d, b in self.device_budgets.items()}),
            keys=tuple(keys),
            jobs_submitted=_frozen(self.counters.get("jobs_submitted")),
            jobs_completed=_frozen(self.counters.get("jobs_completed")),
            jobs_recovered=_frozen(self.counters.get("jobs_recovered")),
            worker_partitions=_frozen(self.counters.get("worker_partitions")),
            spans_open=len(self.spans.open_spans()),
            partition_retries=_frozen(self.counters.get("partition_retries")),
            nodes=nodes,
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


def _frozen(table: Mapping[Any, int]) -> Mapping[Any, int]:
    """A read-only view of a fresh copy (a snapshot never changes after it is taken)."""
    return MappingProxyType(dict(table))


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
        reserved_by_consumer=MappingProxyType(dict(snap["reserved_by_consumer"])),
        waiters=tuple(waiters),
        evictions=snap["evictions"],
        evicted_bytes=snap["evicted_bytes"],
    )
    return view, waiting
