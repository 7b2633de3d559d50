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
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from opentelemetry import trace

from cuzk import __version__
from cuzk.engine.backend import ProofResult, ProverBackend
from cuzk.engine.counters import Counters
from cuzk.engine.deadlines import DeadlineWatch
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
from cuzk.engine.journal import (
    JobRecord,
    Journal,
    JournalError,
    JournalRecorder,
    PartitionInput,
    inputs_digest,
)
from cuzk.engine.keys import KeyResidency
from cuzk.engine.leases import GpuWorker
from cuzk.engine.memory import RUNTIME_CONSUMER, MemoryBudget, Reservation
from cuzk.engine.pipeline import Pipeline
from cuzk.engine.predict import Item, PhaseEstimates, Priors, predict, seed_from
from cuzk.engine.recovery import JournalRecovery, ensure_recovery_counters
from cuzk.engine.scheduling import ARRIVAL
from cuzk.engine.settings import EngineSettings
from cuzk.engine.snapshot import BudgetView, EngineSnapshot, JobView, KeyView, WaiterView
from cuzk.engine.spans import SpanBook, extract_context, span_context_of, traceparent_of
from cuzk.engine.witnesses import (
    WitnessRef,
    WitnessShape,
    WitnessStore,
    check_witnesses,
    witness_digest,
)
from cuzk.errors import (
    DeadlineInfeasible,
    InputError,
    MemoryRequestTooLarge,
    RequestConflict,
    RequestTooLarge,
    Unavailable,
    UnknownJob,
    UnknownProofKind,
    WitnessesNotTaken,
)
from cuzk.protocol import (
    ACTIVE_PHASES,
    JOB_OUTCOMES,
    PARSE_REFUSALS,
    PRIORITIES,
    PRIORITY_RANK,
    REJECT_REASONS,
    RETRY_PHASES,
    RETRY_REASONS,
    CircuitInfo,
    StatusInfo,
    priority_of,
)
from cuzk.settings_schema import duration_text

RECENT_JOBS = 50
"""Finished jobs a status snapshot lists after the unfinished ones (most recent first)."""

GPU_WAIT_RETRY_S = 5.0
"""Retry-After of a deadline job refused while no GPU worker is there (a node joins in
seconds once its processes start)."""
FIGURES = "phase_seconds"
"""The journal's name for the phase-duration estimates kept for the next start."""
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


def _rfc3339(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def _settings_of(config: Any) -> EngineSettings:
    if isinstance(config, EngineSettings):
        return config
    if hasattr(config, "engine_settings"):
        settings = config.engine_settings()
        if isinstance(settings, EngineSettings):
            return settings
    if config is None:
        return EngineSettings()
    raise TypeError(f"Engine needs EngineSettings (or a config with engine_settings()), "
                    f"not {type(config).__name__}")


class Engine:
    """A proving engine over the prover it is given: ``Engine(settings, prover)``.

    The engine never builds a prover itself (``cuzk serve`` injects
    ``cuzk.prover.real_prover.RealProver``; tests a scripted one), so constructing one loads no
    numba, wasmtime or ``cuzk.prover``.

    ``tracer_provider``: spans go there (``cuzk serve`` passes the SDK provider it built from
    the ``OTEL_*`` environment; tests one with an in-memory exporter). Without one the engine
    uses the OpenTelemetry API's global provider, which records nothing unless an application
    installed one. ``settings.tracing_enabled = False`` records no spans at all.
    """

    def __init__(
        self,
        config: EngineSettings | Any,
        prover: ProverBackend,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.settings = _settings_of(config)
        s = self.settings
        self.prover = prover
        self.tracer_provider = tracer_provider
        self.spans = SpanBook(tracer_provider, enabled=s.tracing_enabled,
                              remote_steps=prover.remote_step_spans)
        self.events = EventBus()
        self.counters = Counters()
        for kind in s.proof_kinds:
            self.counters.ensure("jobs_submitted", kind)
            self.counters.ensure("deadlines_missed", kind)
            self.counters.ensure("synthesis_preempted", kind)
            for outcome in JOB_OUTCOMES:
                self.counters.ensure("jobs_completed", (kind, outcome))
            for reason in REJECT_REASONS:
                self.counters.ensure("jobs_rejected", (kind, reason))
        self.estimates = PhaseEstimates()

        self.host_budget = MemoryBudget(s.host_budget_bytes(), "host")
        # Apart from the host budget (and its lock): proving never refuses a submit's parsing.
        self.parse_budget = MemoryBudget(s.request_parse_reserve_bytes, "request_parse")
        for reason in PARSE_REFUSALS:
            self.counters.ensure("request_parse_refused", reason)
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
        runtime = prover.runtime_host_bytes()  # held for the process's life
        self._runtime = self.host_budget.hold_for_life(runtime, RUNTIME_CONSUMER) if runtime \
            else None
        self.keys.on_evicted = self._evicted
        self.journal: Journal | None = None
        if s.journal_path is not None:  # raises JournalError saying why it cannot be used
            self.journal = Journal.open(
                s.journal_path, retention_jobs=s.job_retention, retention_s=s.job_retention_s,
                on_write=self._journal_written)
            JournalRecorder(self.journal).subscribe(self.events)
            seed_from(self.estimates, self.journal.figures(FIGURES))  # the last run's, first
        for name, pk in s.proof_kinds.items():
            for phase, seconds in pk.phase_seconds:
                self.estimates.seed(name, phase, seconds)
        self.priors = Priors(self.estimates, prover.phase_prior)  # below both, asked at start
        self.deadlines = DeadlineWatch(self._deadline_passed)
        ensure_recovery_counters(self.counters, s.proof_kinds)
        # Witnesses submitted ready-made wait on disk beside the journal (durable with it).
        self.witnesses = WitnessStore(
            None if s.journal_path is None
            else s.journal_path.with_name(s.journal_path.name + ".witness"))
        self.recovery: JournalRecovery | None = None
        if self.journal is not None:
            self.recovery = JournalRecovery(self.journal, s, prover, self.counters, self.spans,
                                            live=self._live, adopt=self._adopt)
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
        if self.recovery is not None:
            self._seq = itertools.count(self.recovery.recover())
        with self._lock:
            keep = {j.id for j in self._active.values()
                    if any(isinstance(p.inputs, WitnessRef) for p in j.partitions)}
        swept = self.witnesses.sweep(keep)
        if swept:
            log.info("removed %d witness file(s) no unfinished job needs from %s", swept,
                     self.witnesses.directory)
        self.pipeline.start()
        self.deadlines.start()
        threading.Thread(target=self._seed_priors, name="cuzk-priors", daemon=True).start()
        return self

    def _seed_priors(self) -> None:
        """Every kind's prior, off the start path (a submit asks for its own kind first)."""
        for kind in self.settings.proof_kinds:
            self.priors.ensure(kind)

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
        self.deadlines.stop()
        self.pipeline.stop(timeout)
        if self.journal is not None:
            with self._lock:
                left = list(self._active.values())
            for job in left:
                self._interrupt(job)
            try:
                self.journal.save_figures(FIGURES, self.estimates.figures())
            except JournalError as e:
                log.warning("phase-duration figures not kept for the next start: %s", e)
            self.journal.close()
        self.keys.evict_all()
        self.prover.close()  # a cluster executor lets go of its actors and connection
        self.witnesses.close()
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
        if journal is not None and not journal.closed and (fault := journal.fault()):
            return str(fault)  # lost or corrupt: nothing clears it but a restart
        if journal is not None and journal.last_error is not None:
            now = time.monotonic()
            if now - self._probe_at >= 1.0:  # re-check at most once a second
                self._probe_at = now
                journal.probe()
            if journal.last_error is not None:
                return str(journal.last_error)
        return self.prover.gpu_unavailable()  # a cluster with no GPU worker (yet)

    @property
    def running(self) -> bool:
        """Started, not draining or shut down, journal writable: what ``/readyz`` reports."""
        return self.readiness() is None

    def recovered(self) -> dict[tuple[str, str], int]:
        """Jobs recovered from the journal at start, by (proof kind, outcome)."""
        return {(str(k[0]), str(k[1])): n for k, n in self.counters.get("jobs_recovered").items()
                if isinstance(k, tuple)}

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
        deadline: float | None = None,
        *,
        witness_body: Path | None = None,
    ) -> Job:
        """Accept a job (validated before anything changes). A repeated ``request_id`` returns
        the same job unless that one failed or was cancelled, which starts a new attempt.

        ``deadline``: wall-clock seconds by which the proofs are needed; None gives the kind's
        default relative deadline (if it has one). Raises DeadlineInfeasible (503) when the
        deadline cannot be met and the kind's ``deadline_admission`` is ``reject``.

        ``witness_body``: a file holding one .wtns per partition, back to back (made with
        ``witnesses.staging()``), to prove from instead of ``inputs`` (which must then be
        empty); checked against the kind's circuit, then kept under the job's id until it
        settles."""
        kind = self.settings.proof_kinds.get(proof_kind)
        if kind is None:
            known = ", ".join(sorted(self.settings.proof_kinds)) or "none"
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r} (known: {known})")
        try:
            return self._submit(proof_kind, inputs, request_id, priority, trace_context,
                                deadline, witness_body)
        except DeadlineInfeasible:
            self.counters.inc("jobs_rejected", (proof_kind, "deadline"))
            raise
        except MemoryRequestTooLarge:
            self.counters.inc("jobs_rejected", (proof_kind, "memory"))
            raise
        except Unavailable:
            self.counters.inc("jobs_rejected", (proof_kind, "unavailable"))
            raise

    def _submit(
        self,
        proof_kind: str,
        inputs: Sequence[Mapping[str, Any]],
        request_id: str | None,
        priority: str | None,
        trace_context: Any,
        deadline: float | None,
        witness_body: Path | None = None,
    ) -> Job:
        kind = self.settings.proof_kinds[proof_kind]
        if deadline is not None:
            if isinstance(deadline, bool) or not isinstance(deadline, int | float) \
                    or not math.isfinite(deadline):
                raise InputError(f"deadline must be a time, not {deadline!r}")
            if deadline <= time.time():
                raise InputError(
                    f"deadline {_rfc3339(deadline)} has already passed (server time "
                    f"{_rfc3339(time.time())})")
            horizon = self.settings.deadline_horizon
            if deadline > time.time() + horizon:
                # Not formatted: a deadline past the year 9999 has no datetime.
                raise InputError(
                    f"deadline is more than the allowed horizon of {duration_text(horizon)}"
                    f" ahead (engine.deadline_horizon; the latest accepted now is "
                    f"{_rfc3339(time.time() + horizon)})")
        elif kind.deadline_s is not None:
            deadline = time.time() + kind.deadline_s
        if priority is None:
            priority = kind.priority
        elif priority not in PRIORITY_RANK:
            raise InputError(
                f"priority must be one of {', '.join(PRIORITY_RANK)}, not {priority!r}")
        if request_id is not None and (not isinstance(request_id, str) or not request_id):
            raise InputError("request_id must be a non-empty string")
        payloads: Sequence[PartitionInput]
        if witness_body is not None:
            if inputs:
                raise InputError("a job is proven from inputs or from witnesses, not both")
            self._check_running()
            refs = check_witnesses(witness_body, self.witness_shape(proof_kind),
                                   kind.partitions, proof_kind)
            payloads, digest = refs, witness_digest(refs)
        else:
            if isinstance(inputs, Mapping | str | bytes) or not isinstance(inputs, Sequence):
                raise InputError("inputs must be a list with one object per partition")
            if len(inputs) != kind.partitions:
                raise InputError(
                    f"proof kind {proof_kind!r} takes {kind.partitions} partition input(s), "
                    f"got {len(inputs)}")
            for i, item in enumerate(inputs):
                if not isinstance(item, Mapping):
                    raise InputError(
                        f"inputs[{i}] must be an object, not {type(item).__name__}")
            payloads, digest = inputs, inputs_digest(inputs)
        self._check_running()
        if request_id is not None and (prev := self._previous(request_id)) is not None:
            self._check_same_body(prev, proof_kind, priority, digest)
            if prev.outcome not in ("failed", "cancelled"):
                return prev  # a replay: nothing else runs
        self._check_memory(proof_kind)
        self.priors.ensure(proof_kind)  # the first job of a kind is predicted too
        if witness_body is None:  # bad signals are the caller's error (422), not a failed job
            self.prover.check_inputs(proof_kind, inputs)
        parent = extract_context(trace_context)

        with self._submit_lock:
            self._check_running()
            attempt = 1
            if request_id is not None and (prev := self._previous(request_id)) is not None:
                self._check_same_body(prev, proof_kind, priority, digest)
                if prev.outcome not in ("failed", "cancelled"):
                    return prev
                attempt = prev.attempt + 1
            job = Job(proof_kind, priority, request_id, attempt, next(self._seq),
                      deadline=float(deadline) if deadline is not None else None,
                      on_miss=kind.on_deadline_miss)
            if job.deadline is not None:  # no GPU to take it: its deadline cannot be promised
                self._admit_without_gpu(job, kind.deadline_admission)
            if job.deadline is not None and self.settings.scheduler != ARRIVAL:
                self._admit(job, kind.deadline_admission)
            job.inputs_digest = digest
            if witness_body is not None:  # on disk for good before the journal names it
                try:
                    payloads = self.witnesses.admit(witness_body, job.id, refs)
                except OSError as e:
                    raise Unavailable(
                        f"cannot keep the witness in {self.witnesses.directory} "
                        f"({e.strerror or e}); free space or fix its permissions",
                        retry_after=10.0) from None
            self._create_spans(job, payloads, parent)
            if self.journal is not None:  # durable before anyone hears of it (the 202)
                try:
                    self.journal.record_accepted(JobRecord(
                        job.id, request_id, proof_kind, priority,
                        [p if isinstance(p, WitnessRef) else dict(p) for p in payloads],
                        digest,
                        _traceparent(trace_context), traceparent_of(job.span), attempt, job.seq,
                        job.submitted_at, deadline=job.deadline))
                except JournalError as e:
                    self._discard(job, e)
                    self.witnesses.remove(job.id)
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
                        tuple(payloads), job.submitted_at, job.trace_id, job.trace_sampled))
            self.pipeline.enqueue(job)
            self.deadlines.watch(job)
        return job

    # ---- deadlines ---------------------------------------------------------------------------

    def _items(self, now_mono: float) -> list[Item]:
        """Every unsettled partition of the live jobs, for the predictions."""
        with self._lock:
            live = list(self._active.values())
        items = []
        for job in live:
            if job.terminal:
                continue
            for p in job.partitions:
                if p.outcome is not None:
                    continue
                phase, elapsed = p.current()
                items.append(Item(job.id, job.proof_kind, job.priority, self.pipeline.key(p),
                                  phase, elapsed))
        return items

    def _predict(self, extra: Sequence[Item] = ()) -> tuple[dict[str, float | None],
                                                            dict[str, float]]:
        """Predicted finish (wall clock) per live job, and GPU-seconds of backlog by priority."""
        s = self.settings
        now = time.time()
        items = self._items(time.monotonic())
        items.extend(extra)
        ws = self.pipeline.workers
        reserved = sum(w.reserved for w in ws)
        finish, backlog = predict(now, items, self.estimates, max(1, len(ws) - reserved),
                                  s.synthesis_threads, reserved)
        return finish, backlog

    def predicted_finish(self, job_id: str) -> float | None:
        """The job's predicted finish (wall clock) now; None when finished or not predicted."""
        return self._predict()[0].get(job_id)

    def _admit_without_gpu(self, job: Job, policy: str) -> None:
        """A cluster with no GPU worker yet (nodes still joining, or each refused) cannot
        promise a deadline: a ``reject`` kind is refused (503, retry once a GPU is there),
        another is admitted at risk."""
        why = self.prover.gpu_unavailable()
        if why is None:
            return
        if policy == "reject":
            raise Unavailable(f"a job with a deadline is not admitted now: {why}",
                              retry_after=GPU_WAIT_RETRY_S)
        job.admitted_at_risk = True

    def _admit(self, job: Job, policy: str) -> None:
        """Admission: could the job make its deadline even at the front of its class?"""
        if not self.estimates.known(job.proof_kind):
            return  # nothing measured or configured for this kind: no grounds to refuse
        rank = PRIORITY_RANK[job.priority]
        n = self.settings.proof_kinds[job.proof_kind].partitions
        front = [Item(job.id, job.proof_kind, job.priority, (rank, -math.inf, -1, i),
                      "queued_synthesis") for i in range(n)]
        finish = self._predict(front)[0].get(job.id)
        assert job.deadline is not None
        basis = self.priors.basis(job.proof_kind) if self.estimates.prior(job.proof_kind) \
            else None
        if basis is not None:
            log.info("admission of a %s job by the prior (%s): predicted finish %s, deadline %s",
                     job.proof_kind, basis, _rfc3339(finish) if finish else None,
                     _rfc3339(job.deadline))
        if finish is None or finish <= job.deadline:
            return
        if policy == "reject":
            raise DeadlineInfeasible(job.proof_kind, job.deadline, finish, basis)
        job.admitted_at_risk = True

    def _deadline_passed(self, job: Job) -> None:
        """The watch says the job's deadline passed before it finished: count the miss, and
        under the ``cancel`` policy end it so its unstarted partitions cannot block the next
        deadline (a partition on a GPU finishes its step; its result is dropped)."""
        if job.terminal:
            return
        self.pipeline.note_missed(job)
        if job.span is not None:
            job.span.set_attribute("cuzk.job.deadline_passed_at", _rfc3339(time.time()))
        if job.on_miss == "cancel" and self.settings.scheduler != ARRIVAL:
            left = sum(1 for p in job.partitions if p.outcome is None)
            self.pipeline.finish_job(
                job, "deadline_exceeded",
                f"deadline {_rfc3339(job.deadline or 0.0)} passed with {left} partition(s) "
                "unfinished; they were dropped (on_deadline_miss = cancel)")

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
                prev = self._read_journaled(rec)
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
        inputs: Sequence[PartitionInput],
        parent: Any,
        links: Sequence[Any] = (),
        proven: Mapping[int, tuple[dict[str, Any], list[str]]] | None = None,
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
        if job.deadline is not None:
            attrs["cuzk.job.deadline"] = _rfc3339(job.deadline)
            if not links:
                finish = self._predict_one(job, len(inputs))
                if finish is not None:
                    attrs["cuzk.job.predicted_finish"] = _rfc3339(finish)
                    attrs["cuzk.job.prediction"] = (
                        "prior" if self.estimates.prior(job.proof_kind) else "measured")
        if links:
            attrs["cuzk.job.recovered"] = True
            attrs["cuzk.job.recovered_partitions"] = len(proven or {})
        job.span = self.spans.start("cuzk.job", parent, attrs, links=links)
        job.trace_sampled = job.span.sampled
        # An unsampled trace is never recorded anywhere: naming its id would point at nothing.
        job.trace_id = job.span.trace_id if job.trace_sampled else None
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

    def _predict_one(self, job: Job, partitions: int) -> float | None:
        """The new job's predicted finish in its place in the queue (for its span)."""
        if not self.estimates.known(job.proof_kind):
            return None
        mine = [Item(job.id, job.proof_kind, job.priority,
                     self.pipeline.key_of(job, i), "queued_synthesis")
                for i in range(partitions)]
        return self._predict(mine)[0].get(job.id)

    def _phase_closed(self, p: Partition, phase: str, seconds: float) -> None:
        self.estimates.observe(p.job.proof_kind, phase, seconds)
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
        if any(isinstance(p.inputs, WitnessRef) for p in job.partitions):
            self.witnesses.remove(job.id)  # after the journal recorded the outcome
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
                job = self._read_journaled(rec)
        if job is None:
            raise UnknownJob(f"no job with id {job_id!r}")
        return job

    # ---- the journal -------------------------------------------------------------------------

    def _read_journaled(self, rec: JobRecord) -> Job:
        assert self.recovery is not None  # a record is only read where there is a journal
        return self.recovery.read(rec)

    def _live(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def _adopt(self, rec: JobRecord) -> Job:
        """A journaled unfinished job made live: its journaled proofs settled, the rest queued."""
        assert self.recovery is not None
        job = self.recovery.job_of(rec)
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
            # This process answers for it from now on: submitted here, so that submitted
            # = completed + unfinished holds (a recovered job completes in this process).
            self.counters.inc("jobs_submitted", job.proof_kind)
        if all(p.outcome == "done" for p in job.partitions):
            self.pipeline.finish_job(job, "succeeded")
        else:
            self.pipeline.enqueue(job)
            self.deadlines.watch(job)  # one that passed while down is handled at once
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
                "priority": priority_of(kind.priority),
                "resident": rk is not None,
                "sizes": dict(rk.handle.sizes) if rk and rk.handle else None,
                "key_host_bytes": rk.host_bytes if rk else None,
            })
        return out

    def input_elements(self, proof_kind: str) -> int | None:
        """Field elements one partition's inputs hold, when the prover knows it (None when not):
        the front end bounds a submit's body by it before parsing."""
        if proof_kind not in self.settings.proof_kinds:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        return self.prover.input_elements(proof_kind)

    def witness_shape(self, proof_kind: str) -> WitnessShape:
        """What a witness of the kind must be (its circuit's field and variable counts);
        InputError (501) when this prover takes no witnesses (a cluster)."""
        if proof_kind not in self.settings.proof_kinds:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        shape = self.prover.witness_shape(proof_kind)
        if shape is None:
            raise WitnessesNotTaken(
                "this server does not take witnesses (a cluster's workers cannot read them "
                "yet); submit the job's inputs instead")
        return shape

    def reserve_request_memory(self, nbytes: int) -> Reservation:
        """Hold ``nbytes`` of the request parse reserve for a request's parsing and validation,
        now or never. The reserve is apart from the host budget, so proving holding all of it
        never refuses a submit; a body that needs more than the whole reserve is refused
        (RequestTooLarge, 413), one that does not fit beside the others being parsed now is
        asked to retry (Unavailable, 503), rather than growing the process past its budgets."""
        budget = self.parse_budget
        if nbytes > budget.total:
            self.counters.inc("request_parse_refused", "too_large")
            raise RequestTooLarge(
                f"parsing this request body needs {nbytes} bytes, more than the whole request"
                f" parse reserve of {budget.total} bytes; send a smaller body or raise"
                " engine.request_parse_reserve_bytes")
        res = budget.try_reserve(nbytes, "request_inputs")
        if res is None:
            self.counters.inc("request_parse_refused", "busy")
            raise Unavailable(
                f"parsing this request needs {nbytes} bytes of the request parse reserve"
                f" (engine.request_parse_reserve_bytes, {budget.total} bytes), which other"
                " requests being parsed hold now; retry shortly",
                retry_after=1,
            )
        return res

    def preload(self, proof_kind: str) -> dict[str, Any]:
        kind = self.settings.proof_kinds.get(proof_kind)
        if kind is None:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        rk = self.keys.preload(proof_kind, kind.priority)
        return {"proof_kind": proof_kind, "resident": True, "host_bytes": rk.host_bytes}

    def verification_key(self, proof_kind: str) -> dict[str, Any]:
        """The snarkjs-format verification key of the key this engine proves ``proof_kind``
        with (from the prover backend; a backend without keys raises CuzkError)."""
        if proof_kind not in self.settings.proof_kinds:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        return self.prover.verification_key(proof_kind)

    def evict(self, proof_kind: str) -> dict[str, Any]:
        if proof_kind not in self.settings.proof_kinds:
            raise UnknownProofKind(f"unknown proof kind {proof_kind!r}")
        return {"proof_kind": proof_kind, "result": self.keys.evict(proof_kind)}

    def pause_workers(self) -> None:
        self.pipeline.pause_workers()
        self.events.publish(WorkersPaused(True))

    def resume_workers(self) -> None:
        self.pipeline.gpu_queue.resume()
        self.events.publish(WorkersPaused(False))

    @property
    def workers(self) -> list[GpuWorker]:
        return list(self.pipeline.workers)

    # ---- reads -------------------------------------------------------------------------------

    def snapshot(self, recent_jobs: int = RECENT_JOBS) -> EngineSnapshot:
        """Everything an operator can ask about, computed now from open leases, scopes and
        reservations. ``recent_jobs``: finished jobs listed after the unfinished ones."""
        s = self.settings
        now = time.time()
        with self._lock:
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
        host_snap, key_bytes = self.keys.read_with_host()
        host, waiting = _budget_view(host_snap)
        for w in host.waiters:
            if w.proof_kind is not None:
                k = (w.proof_kind, "waiting_memory")
                phases[k] = phases.get(k, 0) + 1
        predicted, backlog = self._predict()
        # Job states and the job counters from one moment: a submit adds the job and counts it
        # under the engine lock, a conclusion concludes and counts under the counters' lock, so
        # submitted = completed + unfinished at every read.
        with self._lock, self.counters.lock:
            live = sorted(self._active.values(), key=lambda j: j.seq)
            finished = list(reversed(self._finished.values()))[:max(0, recent_jobs)]
            views: list[JobView] = [job.view(waiting, predicted.get(job.id)) for job in live]
            counts = {name: _frozen(self.counters.get(name)) for name in (
                "jobs_submitted", "jobs_completed", "jobs_recovered", "worker_partitions")}
        for job, view in zip(live, views, strict=True):
            if view.state == "queued":
                key = (job.proof_kind, job.priority)
                queued[key] = queued.get(key, 0) + 1
            for p in view.partitions:
                if p.phase in ACTIVE_PHASES and p.phase != "waiting_memory":
                    k2 = (job.proof_kind, p.phase)
                    phases[k2] = phases.get(k2, 0) + 1
        views += [job.view() for job in finished]
        keys = [KeyView(**k) for k in self.keys.snapshot()]
        nodes = tuple(self.prover.nodes())  # a cluster executor's nodes; none in one process
        return EngineSnapshot(
            time=now,
            uptime_s=0.0 if started is None else time.monotonic() - started,
            version=__version__,
            backend=self.prover.name,
            field_arith=self.prover.field_arith,
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
            request_parse=_read_budget(self.parse_budget)[0],
            request_parse_refused=_frozen(self.counters.get("request_parse_refused")),
            keys=tuple(keys),
            jobs_submitted=counts["jobs_submitted"],
            jobs_completed=counts["jobs_completed"],
            jobs_recovered=counts["jobs_recovered"],
            journal_proofs_rejected=_frozen(self.counters.get("journal_proofs_rejected")),
            journal_lost=self.journal is not None and self.journal.lost is not None,
            worker_partitions=counts["worker_partitions"],
            spans_open=len(self.spans.open_spans()),
            key_bytes=MappingProxyType(key_bytes),
            deadlines_missed=_frozen(self.counters.get("deadlines_missed")),
            jobs_rejected=_frozen(self.counters.get("jobs_rejected")),
            synthesis_preempted=_frozen(self.counters.get("synthesis_preempted")),
            backlog_gpu_seconds=MappingProxyType(
                {p: backlog.get(p, 0.0) for p in PRIORITIES}),
            partition_retries=_frozen(self.counters.get("partition_retries")),
            phase_estimates=MappingProxyType(self.estimates.sources()),
            nodes=nodes,
            not_ready=self.readiness(),
        )

    def status(self) -> StatusInfo:
        """The status snapshot in its wire shape."""
        return self.snapshot().to_wire()

    def quiescent(self) -> bool:
        """Nothing in flight: no live job, lease, reservation besides keys, or open job span."""
        with self._lock:
            if self._active:
                return False
        if any(w.busy for w in self.pipeline.workers):
            return False
        return all(r.consumer in ("proving_key", RUNTIME_CONSUMER)
                   for r in self.host_budget.live())


def _frozen(table: Mapping[Any, int]) -> Mapping[Any, int]:
    """A read-only view of a fresh copy (a snapshot never changes after it is taken)."""
    return MappingProxyType(dict(table))


def _read_budget(budget: MemoryBudget) -> tuple[BudgetView, set[int]]:
    """One locked read of a budget, and the ids of the partitions among its waiters."""
    return _budget_view(budget.snapshot())


def _budget_view(snap: dict[str, Any]) -> tuple[BudgetView, set[int]]:
    """A budget's snapshot as a view, and the ids of the partitions among its waiters."""
    waiters = []
    waiting: set[int] = set()
    for w in snap["waiters"]:
        tag = w.get("tag")
        if isinstance(tag, Partition):
            waiting.add(id(tag))
            waiters.append(WaiterView(w["consumer"], w["bytes"], w["priority_rank"], tag.job.id,
                                      tag.index, tag.job.proof_kind, w.get("key_bytes", 0)))
        else:
            waiters.append(WaiterView(w["consumer"], w["bytes"], w["priority_rank"], None, None,
                                      None, w.get("key_bytes", 0)))
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
