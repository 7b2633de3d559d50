"""The partition pipeline of docs/design.md section 2: synthesis (memory) -> GPU -> finalize.

Each partition is a work item owned by exactly one place at a time: a queue or the thread
running its current step. The owner is the only one that releases its resources, so cancel
and failure never race a running step: queued items are withdrawn from their queue and
cleaned up by the canceller; running ones notice the job is over at the next step boundary.

Phase continuity: every hand-off opens the next phase scope before closing the current one.
What happens is published on the event bus (``cuzk.engine.events``); nothing here knows who
listens.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from cuzk import progress
from cuzk.engine.backend import STEP, PhaseLost, ProverBackend, StepContext
from cuzk.engine.counters import Counters
from cuzk.engine.events import (
    EventBus,
    JobSettled,
    MemoryWaited,
    PartitionFailed,
    PartitionFinalized,
)
from cuzk.engine.jobs import Job, Partition, PhaseScope
from cuzk.engine.keys import PARTITION_CONSUMER, KeyResidency
from cuzk.engine.leases import GpuWorker
from cuzk.engine.memory import MemoryBudget, ReservationAborted
from cuzk.engine.queues import WorkQueue
from cuzk.engine.scheduling import (
    ARRIVAL,
    DEADLINE,
    RESERVED_SYNTHESIS_THREADS,
    Order,
    OrderKey,
    order_key,
    outranks,
    takes_reserved,
)
from cuzk.engine.settings import EngineSettings
from cuzk.engine.spans import SpanBook, traceparent_of

log = logging.getLogger(__name__)

GPU_CONSUMER = "gpu_phase"
MAX_RETRIES = 5
"""Times one partition's steps may run again after :class:`PhaseLost` before its job fails."""


@contextmanager
def _step(p: Partition, span: Any, waiting: PhaseScope | None = None) -> Iterator[None]:
    """Tell the backend which partition (and span) the step it is about to run belongs to;
    ``waiting``: the partition's nested ``queued_synthesis`` until a remote worker takes it."""
    taken = waiting.close if waiting is not None else None
    token = STEP.set(StepContext(p.job.id, p.job.proof_kind, p.index, p.job.priority,
                                 traceparent_of(span), taken, lambda: _worker_released(p)))
    try:
        with progress.reporting(p.report_step):
            yield
    finally:
        STEP.reset(token)


def _worker_released(p: Partition) -> None:
    """The remote synthesis worker let the partition go: it reads ``queued_gpu`` (nested in
    ``synthesizing``, which closes it) until the engine queues it for a GPU."""
    p.open_phase("queued_gpu", nested=True)


def gpu_step_attribute(step: str) -> str:
    """The GPU span attribute of a device step's milliseconds ("MSM B2": ...step.msm_b2_ms)."""
    return "cuzk.gpu.step." + "_".join(step.lower().split()) + "_ms"


def queue_key(p: Partition, order: Order = DEADLINE) -> OrderKey:
    """The scheduler's key for a partition (cuzk.engine.scheduling): priority class, then the
    earliest deadline, then arrival, then partition index."""
    return order_key(p.job.priority, p.job.deadline, p.job.seq, p.index, order)


class _Stage:
    """Per-partition bookkeeping the pipeline needs between steps."""

    __slots__ = ("device_reservation", "fin_done", "fin_scope", "queued_scope", "retries",
                 "synth_scope")

    def __init__(self) -> None:
        self.synth_scope: PhaseScope | None = None  # queued_synthesis
        self.queued_scope: PhaseScope | None = None
        self.fin_scope: PhaseScope | None = None
        self.fin_done: threading.Event | None = None
        self.device_reservation: Any = None
        self.retries = 0


class _AdmissionStages:
    """A partition's admission as phases and spans: ``waiting_memory`` (span cuzk.memory.wait)
    while its grant waits, ``loading_key`` (span cuzk.key.load) while its kind's key loads.
    Both nest in ``synthesizing``; each stage closes the previous one, so a failed load is an
    error on the key's span, not on the memory wait."""

    SPANS: ClassVar[dict[str, str]] = {
        "waiting_memory": "cuzk.memory.wait", "loading_key": "cuzk.key.load"}

    def __init__(self, pipeline: Pipeline, p: Partition) -> None:
        self._pipeline = pipeline
        self._p = p
        self._scope: PhaseScope | None = None

    def __call__(self, stage: str) -> None:
        self.close()
        p = self._p
        span = self._pipeline.spans.start(self.SPANS[stage], p.span, self._pipeline._attrs(p))
        self._scope = p.open_phase(stage, span, nested=True)

    def close(self, error: BaseException | None = None) -> None:
        if self._scope is not None:
            scope, self._scope = self._scope, None
            scope.close(error)


class Pipeline:
    def __init__(
        self,
        settings: EngineSettings,
        prover: ProverBackend,
        spans: SpanBook,
        bus: EventBus,
        counters: Counters,
        host_budget: MemoryBudget,
        device_budgets: dict[str, MemoryBudget],
        residency: KeyResidency,
        on_job_settled: Callable[[Job], None],
    ) -> None:
        self.settings = settings
        self.prover = prover
        self.spans = spans
        self.bus = bus
        self.counters = counters
        self.host = host_budget
        self.device_budgets = device_budgets
        self.keys = residency
        self._on_job_settled = on_job_settled
        rec = settings.record_intervals
        self.pending: WorkQueue[Partition] = WorkQueue("pending")
        self.gpu_queue: WorkQueue[Partition] = WorkQueue("gpu", record_intervals=rec)
        self.fin_queue: WorkQueue[Partition] = WorkQueue("finalize")
        self.workers: list[GpuWorker] = []
        n = r = 0
        for device in prover.devices:
            # Named for what it runs on: cpu-N on the CPU backend, gpu-N on a CUDA device; the
            # reserved lanes (critical and high work only) cpu-rN / gpu-rN.
            kind = "cpu" if device == "cpu" else "gpu"
            for _ in range(settings.gpu_workers_per_device):
                self.workers.append(GpuWorker(f"{kind}-{n}", device, spans, rec))
                n += 1
            for _ in range(settings.reserved_gpu_workers_per_device):
                self.workers.append(GpuWorker(f"{kind}-r{r}", device, spans, rec,
                                              reserved=True))
                r += 1
        self._threads: list[threading.Thread] = []
        self._stage: dict[int, _Stage] = {}
        self._stage_lock = threading.Lock()
        self._settled = threading.Condition(self._stage_lock)  # notified as work items leave
        self.draining = False
        self._pause_lock = threading.Lock()
        self._parked: dict[int, Partition] = {}

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        def spawn(name: str, target: Callable[..., None], *args: Any) -> None:
            t = threading.Thread(target=target, args=args, name=name, daemon=True)
            t.start()
            self._threads.append(t)

        for i in range(self.settings.synthesis_threads):
            spawn(f"cuzk-synth-{i}", self._synthesis_loop)
        for i in range(RESERVED_SYNTHESIS_THREADS):  # critical and high work only, besides
            spawn(f"cuzk-synth-reserved-{i}", self._synthesis_loop, True)
        for w in self.workers:
            spawn(f"cuzk-{w.id}", self._worker_loop, w)
        for i in range(self.settings.finalizer_threads):
            spawn(f"cuzk-final-{i}", self._finalizer_loop)

    def stop(self, timeout: float) -> None:
        """Close the queues stage by stage so in-flight steps can still hand off and clean up."""
        import time

        deadline = time.monotonic() + timeout
        groups = [
            (self.pending, "cuzk-synth"),
            (self.gpu_queue, "cuzk-gpu"),
            (self.fin_queue, "cuzk-final"),
        ]
        for queue, prefix in groups:
            for p in queue.close():
                self._abandon(p)
            for t in self._threads:
                if t.name.startswith(prefix):
                    t.join(max(0.0, deadline - time.monotonic()))

    def drain(self, timeout: float) -> bool:
        """Start no new work; let partitions in synthesis, on a worker or finalizing finish.

        Partitions waiting (queued for synthesis, for memory, or synthesized and queued for a
        GPU worker) are parked: they hold nothing, keep their place in the journal and resume
        at the next start. True when everything in flight finished within ``timeout``.
        """
        import time

        deadline = time.monotonic() + timeout
        self.draining = True
        for queue in (self.pending, self.gpu_queue):
            for p in queue.remove_where(lambda _: True):
                self._park(p)
        for budget in (self.host, *self.device_budgets.values()):
            budget.wake()  # memory waiters see the drain and park
        with self._settled:
            while len(self._stage) > len(self._parked):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._settled.wait(left)
        return True

    def pause_workers(self) -> None:
        """GPU workers take nothing more. During a drain, what waits for them is parked at
        once (no worker will take it before the exit, and the drain waits for nothing parked)."""
        with self._pause_lock:
            self.gpu_queue.pause()
            parked = self.gpu_queue.remove_where(lambda _: True) if self.draining else []
        for p in parked:
            self._park(p)

    def _park(self, p: Partition, current: PhaseScope | None = None) -> None:
        """Drop what a partition not yet proving holds; it stays unsettled, back in
        ``queued_synthesis`` (its next start begins there)."""
        self._release(p)
        with self._stage_lock:
            st = self._stage.get(id(p))
        if st is not None:
            leaving = current or st.queued_scope
            if leaving is not None and not leaving.closed:
                st.synth_scope = p.open_phase("queued_synthesis")
                leaving.close()
        with self._settled:
            self._parked[id(p)] = p
            self._settled.notify_all()

    # ---- entry -------------------------------------------------------------------------------

    def enqueue(self, job: Job) -> None:
        """Queue the job's unsettled partitions (a recovered job's proven ones are settled)."""
        todo = [p for p in job.partitions if p.outcome is None]
        for p in todo:
            st = _Stage()
            st.synth_scope = p.open_phase("queued_synthesis")
            with self._stage_lock:
                self._stage[id(p)] = st
        for p in todo:
            self.pending.put(p, self.key(p))
        if todo and self._preempting:
            self.host.wake()  # a thread waiting for memory for lower-class work gives way

    @property
    def _preempting(self) -> bool:
        s = self.settings
        return s.preempt_synthesis and s.scheduler != ARRIVAL

    def _outranked(self, p: Partition) -> bool:
        """Under the budget lock: work that goes before this one in the scheduler's order waits
        for a synthesis thread while this one's thread waits for memory. It holds nothing yet,
        so it gives way at no cost: to a higher class, and within a class to an earlier deadline
        too (a winning-post must not wait for a thread held by a window-post's memory wait;
        ``outranks``, deadline never against deadline, is for preempting finished synthesis)."""
        if not self._preempting:
            return False
        head = self.pending.head_key()
        return head is not None and head < self.key(p)

    def _make_room(self, p: Partition) -> None:
        """Preempt synthesis for ``p``: when its working memory does not fit now, withdraw
        synthesized partitions it outranks (a lower class, or no deadline against its deadline)
        still queued for a GPU (latest in the order first), drop their a/b/c and queue them for
        synthesis again, until it would fit.
        Their synthesis is redone later (the price; ``cuzk bench deadlines`` measures it)."""
        if not self._preempting:
            return
        mine = self.key(p)
        if not any(outranks(mine, self.key(q)) for q in self.gpu_queue.items()):
            return
        try:
            n = self.keys.need(p.job.proof_kind)
        except Exception:  # no figures yet: nothing to size the room by
            return
        # An evicted key has to come back too.
        need = n.working + (0 if self.keys.is_resident(p.job.proof_kind) else n.key_host)
        short = self.host.reserved + need - self.host.total
        if short <= 0:
            return
        victims = sorted((q for q in self.gpu_queue.items() if outranks(mine, self.key(q))),
                         key=self.key, reverse=True)
        chosen: set[int] = set()
        for q in victims:
            if short <= 0:
                break
            held = q.reservation.held if q.reservation is not None else 0
            if held:
                chosen.add(id(q))
                short -= held
        for q in self.gpu_queue.remove_where(lambda q: id(q) in chosen):
            st = self._st(q)
            queued = st.queued_scope
            self.prover.release_abc(q.synthesis)
            self._release(q)
            if queued is not None:
                self._requeue(q, queued)

    def _requeue(self, p: Partition, current: PhaseScope) -> None:
        """A memory-waiting partition gave its synthesis thread to higher-class work: back to
        the synthesis queue in its place (it held no memory and no key), counted."""
        self._release(p)
        st = self._st(p)
        st.queued_scope = None
        st.synth_scope = p.open_phase("queued_synthesis")
        current.close()
        self.counters.inc("synthesis_preempted", p.job.proof_kind)
        if p.span is not None:
            p.span.set_attribute("cuzk.partition.preempted", True)
        self.pending.put(p, self.key(p))

    def key(self, p: Partition) -> OrderKey:
        return queue_key(p, self.settings.scheduler)

    def key_of(self, job: Job, index: int) -> OrderKey:
        return order_key(job.priority, job.deadline, job.seq, index, self.settings.scheduler)

    def _st(self, p: Partition) -> _Stage:
        with self._stage_lock:
            return self._stage[id(p)]

    # ---- synthesis: memory, then witness and a/b/c -----------------------------------------

    def _synthesis_loop(self, reserved: bool = False) -> None:
        accept = takes_reserved if reserved else None
        while (p := self.pending.get(accept=accept)) is not None:
            try:
                self._synthesize(p)
            except BaseException as exc:  # a bug must not kill the pool silently
                log.exception("synthesis stage crashed")
                self._fail(p, exc)

    def _attrs(self, p: Partition) -> dict[str, Any]:
        return {
            "cuzk.job.id": p.job.id,
            "cuzk.proof_kind": p.job.proof_kind,
            "cuzk.partition.index": p.index,
            "cuzk.priority": p.job.priority,
        }

    def _synthesize(self, p: Partition) -> None:
        job, st = p.job, self._st(p)
        if job.terminal:
            return self._abandon(p)
        if self.draining:
            return self._park(p)
        # From here a synthesis thread holds the partition: key, reservation, witness, a/b/c.
        scope = p.open_phase("synthesizing")
        # With remote synthesis workers (a cluster) this thread only admits and dispatches: the
        # partition reads queued_synthesis, nested so that its time is not counted (nor
        # predicted) as synthesis, until a worker takes it (StepContext.worker_taken) or the
        # synthesis scope ends.
        waiting = (p.open_phase("queued_synthesis", nested=True)
                   if self.prover.synthesis_waits_for_worker else None)
        assert st.synth_scope is not None  # opened when it was queued
        st.synth_scope.close()
        self._make_room(p)
        stages = _AdmissionStages(self, p)
        try:
            # One grant: the key (pinned) and the working memory together, or nothing held
            # while waiting (cuzk.engine.keys explains why); then the key's load, if it is not
            # resident yet, as its own phase and span.
            p.key, p.reservation = self.keys.admit(
                job.proof_kind, job.priority,
                abort=lambda: job.terminal or self.draining or self._outranked(p),
                tag=p, order=self.key(p), on_stage=stages)
            if self.bus.active:
                self.bus.publish(MemoryWaited(
                    self.host.name, PARTITION_CONSUMER, p.reservation.waited_s))
        except ReservationAborted:
            stages.close()
            if job.terminal:
                return self._abandon(p)
            if self.draining:
                return self._park(p, scope)
            return self._requeue(p, scope)
        except Exception as exc:
            stages.close(exc)
            return self._fail(p, exc)
        stages.close()
        if p.span is not None:
            p.span.set_attribute("cuzk.memory.bytes", p.reservation.held)
            for name, value in p.key.handle.sizes.items():
                p.span.set_attribute(f"cuzk.circuit.{name}", value)
        if job.terminal:
            return self._abandon(p)
        if self.draining:
            return self._park(p, scope)
        scope.span = self.spans.start_step("cuzk.synthesis", p.span, self._attrs(p))
        try:
            with _step(p, scope.span, waiting):
                p.synthesis = self.prover.synthesize(p.key.handle, p.inputs)
        except PhaseLost as exc:
            return self._retry(p, exc, scope)
        except Exception as exc:
            return self._fail(p, exc)
        if job.terminal:
            return self._abandon(p)
        with self._pause_lock:   # a pause during a drain parks what is queued (pause_workers)
            if not (self.draining and self.gpu_queue.paused):
                st.queued_scope = p.open_phase("queued_gpu")
                scope.close()
                self.gpu_queue.put(p, self.key(p))
                return
        # No worker will take it before the exit: parked like those already queued.
        self._park(p, scope)

    # ---- GPU workers -------------------------------------------------------------------------

    def _worker_loop(self, worker: GpuWorker) -> None:
        while True:
            # A cluster device (a GPU worker actor's slot) may be gone: take nothing from the
            # priority queue for it until it is back.
            while not self.prover.device_ready(worker.device, 0.5):
                if self.gpu_queue.closed:
                    return
            # A reserved worker takes critical and high work only; a regular one leaves such
            # work to a reserved worker waiting for it (cuzk.engine.queues).
            p = self.gpu_queue.get(accept=takes_reserved if worker.reserved else None)
            if p is None:
                return
            try:
                self._prove(worker, p)
            except BaseException as exc:
                log.exception("GPU stage crashed")
                self._fail(p, exc)

    def _prove(self, worker: GpuWorker, p: Partition) -> None:
        """One partition's GPU phase on ``worker``.

        The partition's key stays pinned (``p.key``, from its admission in ``_synthesize``)
        for the whole GPU phase: only ``_release`` unpins it, and only the partition's owner
        (this thread, until the hand-off to a finalizer) calls it, after ``gpu_phase`` has
        returned or raised. A pinned key is never claimed for eviction, so the prover never
        drops a key from a device while a worker's lane is using it. Workers of one device run
        their phases at the same time (each on its own lane, cuzk.prover.real_prover), each
        inside its own device reservation of the partition's ``device_bytes``.
        """
        job, st = p.job, self._st(p)
        if job.terminal:
            return self._abandon(p)
        est = p.key.handle.estimate
        budget = self.device_budgets.get(worker.device)
        device_res = None
        if budget is not None and est.device_bytes:
            try:
                device_res = st.device_reservation = budget.reserve(
                    est.device_bytes, GPU_CONSUMER, job.priority, abort=lambda: job.terminal,
                    order=self.key(p))
                if self.bus.active:
                    self.bus.publish(MemoryWaited(
                        budget.name, GPU_CONSUMER, device_res.waited_s))
            except ReservationAborted:
                return self._abandon(p)
            except Exception as exc:
                return self._fail(p, exc)
        handed_off = failed = False
        try:
            with worker.lease(job, p) as span:
                assert st.queued_scope is not None  # opened when it was queued for a GPU
                st.queued_scope.close()
                try:
                    with _step(p, span):
                        p.gpu_output = self.prover.gpu_phase(
                            p.key.handle, p.synthesis, worker.device)
                    for step, ms in self.prover.gpu_steps(p.gpu_output).items():
                        span.set_attribute(gpu_step_attribute(step), ms)
                    self.prover.release_abc(p.synthesis)
                    p.reservation.release(min(est.abc_bytes, p.reservation.held))
                except PhaseLost as exc:
                    failed = True
                    self._retry(p, exc, None)  # requeued inside the lease: no phase gap
                    raise
                except Exception as exc:
                    failed = True
                    self._fail(p, exc)  # settles inside the lease: no phase gap
                    raise
                self.counters.inc("worker_partitions", (worker.id, worker.device, job.proof_kind))
                if not job.terminal:
                    st.fin_scope = p.open_phase("finalizing")
                    if not self.settings.split_proving:
                        st.fin_done = threading.Event()
                    self.fin_queue.put(p, self.key(p))
                    handed_off = True
                    if st.fin_done is not None:
                        st.fin_done.wait()  # the non-split comparison: hold the lease
        except Exception as exc:
            if not failed and not handed_off:
                self._fail(p, exc)
            return
        finally:
            if device_res is not None:
                device_res.close()
                if st.device_reservation is device_res:
                    st.device_reservation = None
        if not handed_off:
            self._abandon(p)

    # ---- finalizers --------------------------------------------------------------------------

    def _finalizer_loop(self) -> None:
        while (p := self.fin_queue.get()) is not None:
            try:
                self._finalize(p)
            except BaseException as exc:
                log.exception("finalize stage crashed")
                self._fail(p, exc)

    def _finalize(self, p: Partition) -> None:
        job, st = p.job, self._st(p)
        try:
            if job.terminal:
                return self._abandon(p)
            attrs = self._attrs(p)
            if p.worker_id is not None:
                attrs["cuzk.worker.id"] = p.worker_id
            links = [p.gpu_span] if p.gpu_span is not None else []
            span = self.spans.start_step("cuzk.finalize", p.span, attrs, links=links)
            assert st.fin_scope is not None  # opened when it was handed off
            st.fin_scope.span = span
            try:
                with _step(p, span):
                    p.proof = self.prover.finalize(p.key.handle, p.synthesis, p.gpu_output)
            except PhaseLost as exc:
                return self._retry(p, exc, st.fin_scope)
            except Exception as exc:
                return self._fail(p, exc)
            if self.bus.active:
                self.bus.publish(PartitionFinalized(
                    job.id, job.proof_kind, p.index, p.proof.proof, tuple(p.proof.public)))
            self._release(p)
            p.settle("done")
            self._after_settle(p)
        finally:
            if st.fin_done is not None:
                st.fin_done.set()

    # ---- outcomes ----------------------------------------------------------------------------

    def _retry(self, p: Partition, exc: PhaseLost, current: PhaseScope | None) -> None:
        """Run a lost step again: back into the priority queue it came from (the GPU queue when
        the synthesis survived, else synthesis from the start), counted; the job fails after
        MAX_RETRIES. Opens the next phase before closing ``current`` (no phase gap)."""
        st = self._st(p)
        if p.job.terminal:
            return self._abandon(p)
        if st.retries >= MAX_RETRIES:
            return self._fail(p, RuntimeError(f"{exc} (gave up after {MAX_RETRIES} retries)"))
        st.retries += 1
        self.counters.inc("partition_retries", (exc.phase, exc.reason))
        log.warning("job %s partition %d: %s; running it again (%s, retry %d)",
                    p.job.id, p.index, exc, exc.redo, st.retries)
        if exc.redo == "gpu":
            st.queued_scope = p.open_phase("queued_gpu")
            if current is not None:
                current.close(exc)
            self.gpu_queue.put(p, queue_key(p))
            return
        self._release(p)
        st.synth_scope = p.open_phase("queued_synthesis")
        if current is not None:
            current.close(exc)
        self.pending.put(p, queue_key(p))

    def _release(self, p: Partition) -> None:
        """Give back everything the work item holds; safe to call more than once."""
        if p.reservation is not None:
            p.reservation.close()
            p.reservation = None
        if p.key is not None:
            key, p.key = p.key, None
            self.keys.release(key)
        if p.synthesis is not None:
            self.prover.discard(p.synthesis)
        p.synthesis = None
        p.gpu_output = None

    def _abandon(self, p: Partition) -> None:
        """The job is over (cancelled, or failed elsewhere): drop this partition's work."""
        self._release(p)
        p.settle("cancelled")
        with self._stage_lock:
            st = self._stage.get(id(p))
        if st is not None and st.fin_done is not None:
            st.fin_done.set()
        self._after_settle(p)

    def _fail(self, p: Partition, exc: BaseException) -> None:
        phase = p.phase
        self._release(p)
        if p.settle("failed", exc) and self.bus.active:
            self.bus.publish(PartitionFailed(
                p.job.id, p.job.proof_kind, p.index, phase, str(exc)))
        self.finish_job(p.job, "failed", f"partition {p.index}: {exc}", exc)
        self._after_settle(p)

    def _after_settle(self, p: Partition) -> None:
        job = p.job
        with self._settled:
            self._stage.pop(id(p), None)
            self._parked.pop(id(p), None)
            self._settled.notify_all()
        if all(q.outcome == "done" for q in job.partitions):
            self.finish_job(job, "succeeded")
        if job.terminal and all(q.outcome is not None for q in job.partitions):
            self._on_job_settled(job)

    def note_missed(self, job: Job) -> None:
        """Count a missed deadline once per job."""
        if job.mark_missed():
            self.counters.inc("deadlines_missed", job.proof_kind)

    def finish_job(
        self, job: Job, outcome: str, error: str | None = None, exc: BaseException | None = None
    ) -> bool:
        """Conclude a job once; withdraw its queued partitions (they settle as cancelled)."""
        with self.counters.lock:  # concluded and counted in one step for a snapshot
            if not job.conclude(outcome, error):
                return False
            self.counters.inc("jobs_completed", (job.proof_kind, outcome))
        if job.deadline is not None and (job.finished_at or 0.0) > job.deadline:
            self.note_missed(job)  # finished late (or cut at the deadline)
        if job.span is not None:
            job.span.set_attribute("cuzk.job.status", outcome)
            if job.deadline is not None:
                job.span.set_attribute("cuzk.job.deadline_missed", job.deadline_missed)
        job.error_exc = exc

        def mine(q: Partition) -> bool:
            return q.job is job

        for queue in (self.pending, self.gpu_queue, self.fin_queue):
            for q in queue.remove_where(mine):
                self._abandon(q)
        for budget in (self.host, *self.device_budgets.values()):
            budget.wake()  # its partitions waiting for memory withdraw now
        if self.bus.active:  # before waiters wake: they may read what subscribers recorded
            self.bus.publish(JobSettled(
                job.id, job.proof_kind, job.priority, job.request_id, job.attempt, outcome,
                error, job.duration_s(), job.trace_id, job.trace_sampled, job.deadline,
                job.finished_at, job.deadline_missed))
        job._done.set()
        if all(q.outcome is not None for q in job.partitions):
            self._on_job_settled(job)
        return True
