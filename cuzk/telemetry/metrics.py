"""Prometheus metrics of docs/design.md section 5: a consumer of the engine's two doors.

State metrics (worker busy, busy seconds, lease age, paused workers, queue and phase counts,
memory, resident keys, counters) come from a collector that asks the engine for its snapshot
at scrape time, so they are computed from open leases and scopes, never from a flag. The
histograms are observed by a subscriber to the engine's events, with the trace id as exemplar
only when that trace was sampled (an exemplar must point at a trace that exists). Labels
never carry job or request ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics

from cuzk.engine.events import (
    EngineEvent,
    JobSettled,
    JournalWritten,
    MemoryWaited,
    PartitionPhaseEnded,
)
from cuzk.engine.snapshot import EngineSnapshot

if TYPE_CHECKING:
    from cuzk.engine.engine import Engine

JOB_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
PHASE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
JOURNAL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
MARGIN_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600, 1200, 1800)
WAIT_BUCKETS = (0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)


class EngineCollector:
    """Turns the engine's snapshot into metric families on every scrape."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def describe(self) -> Iterable[Metric]:
        return list(self._families(None))

    def collect(self) -> Iterable[Metric]:
        return list(self._families(self._engine.snapshot(recent_jobs=0)))

    def _families(self, s: EngineSnapshot | None) -> Iterator[Metric]:
        busy = GaugeMetricFamily(
            "cuzk_gpu_worker_busy", "1 while the worker holds an open GPU-phase lease",
            labels=["worker", "device"])
        busy_s = CounterMetricFamily(
            "cuzk_gpu_worker_busy_seconds", "Seconds the worker held a GPU-phase lease",
            labels=["worker", "device"])
        lease_age = GaugeMetricFamily(
            "cuzk_gpu_worker_lease_age_seconds",
            "Age of the worker's open GPU-phase lease; 0 when idle",
            labels=["worker", "device"])
        lease_kind = GaugeMetricFamily(
            "cuzk_gpu_worker_lease_proof_kind",
            "1 for the proof kind of the worker's open GPU-phase lease, 0 for every other "
            "configured kind (all 0 when idle): the stuck-lease alert judges a lease by its "
            "own kind's normal GPU phase", labels=["worker", "device", "proof_kind"])
        paused = GaugeMetricFamily(
            "cuzk_gpu_workers_paused", "GPU workers an operator paused (they take no new work)",
            labels=["device"])
        parts = CounterMetricFamily(
            "cuzk_gpu_worker_partitions", "Partitions whose GPU phase the worker completed",
            labels=["worker", "device", "proof_kind"])
        queued = GaugeMetricFamily(
            "cuzk_jobs_queued", "Jobs accepted and not yet started",
            labels=["proof_kind", "priority"])
        phases = GaugeMetricFamily(
            "cuzk_partitions", "Unfinished partitions by the phase they are in",
            labels=["proof_kind", "phase"])
        submitted = CounterMetricFamily(
            "cuzk_jobs_submitted", "Jobs accepted", labels=["proof_kind"])
        completed = CounterMetricFamily(
            "cuzk_jobs_completed", "Jobs finished, by outcome", labels=["proof_kind", "status"])
        recovered = CounterMetricFamily(
            "cuzk_jobs_recovered",
            "Unfinished jobs found in the journal at start, by outcome (resumed: queued again; "
            "completed: every partition already journaled; failed: could not be resumed)",
            labels=["proof_kind", "outcome"])
        rejected = CounterMetricFamily(
            "cuzk_journal_proofs_rejected",
            "Journaled partition proofs not served but proven again, by reason (checksum: the "
            "row failed its checksum; verification: the proof failed Groth16 verification)",
            labels=["proof_kind", "reason"])
        lost = GaugeMetricFamily(
            "cuzk_journal_lost",
            "1 when the journal file was deleted or replaced under the running server (submits "
            "are refused until it is restored and the server restarted), else 0")
        retries = CounterMetricFamily(
            "cuzk_partition_retries",
            "Partition steps run again after their worker process or their data was lost",
            labels=["phase", "reason"])
        budget = GaugeMetricFamily("cuzk_memory_budget_bytes", "Host memory budget in bytes")
        reserved = GaugeMetricFamily(
            "cuzk_memory_reserved_bytes", "Host bytes reserved, by consumer", labels=["consumer"])
        waiters = GaugeMetricFamily("cuzk_memory_waiters", "Reservations waiting for memory")
        evictions = CounterMetricFamily("cuzk_memory_evictions", "Idle proving keys evicted")
        evicted = CounterMetricFamily("cuzk_memory_evicted_bytes", "Bytes freed by evictions")
        parse_budget = GaugeMetricFamily(
            "cuzk_memory_request_parse_budget_bytes",
            "Host bytes kept apart from the memory budget for parsing submit bodies")
        parse_reserved = GaugeMetricFamily(
            "cuzk_memory_request_parse_reserved_bytes",
            "Bytes of the request parse reserve held by submit bodies being parsed now")
        parse_refused = CounterMetricFamily(
            "cuzk_memory_request_parse_refused",
            "Submit bodies the request parse reserve refused (busy: no room now, 503; "
            "too_large: more than the whole reserve, 413)", labels=["reason"])
        keys = GaugeMetricFamily(
            "cuzk_proving_key_resident_bytes", "Bytes of resident proving keys",
            labels=["proof_kind", "location"])
        key_bytes = GaugeMetricFamily(
            "cuzk_proving_key_bytes",
            "Host bytes reserved for each proving key by its state (loading, resident, "
            "evicting); they sum to cuzk_memory_reserved_bytes{consumer=\"proving_key\"}",
            labels=["proof_kind", "state"])
        build = GaugeMetricFamily(
            "cuzk_build_info", "Build information (always 1)", labels=["version", "backend"])
        dev_budget = GaugeMetricFamily(
            "cuzk_device_memory_budget_bytes", "Device memory budget in bytes (CUDA backend)",
            labels=["device"])
        dev_reserved = GaugeMetricFamily(
            "cuzk_device_memory_reserved_bytes",
            "Device bytes reserved, by consumer (CUDA backend)", labels=["device", "consumer"])
        if s is not None:
            paused_by_device: dict[str, int] = {}
            kinds = sorted({k for k, _ in s.partition_phases})
            for w in s.workers:
                busy.add_metric([w.id, w.device], 1.0 if w.busy else 0.0)
                busy_s.add_metric([w.id, w.device], w.busy_seconds)
                lease_age.add_metric([w.id, w.device], w.lease_age_s)
                for kind in kinds:
                    on = w.busy and w.proof_kind == kind
                    lease_kind.add_metric([w.id, w.device, kind], 1.0 if on else 0.0)
                paused_by_device[w.device] = paused_by_device.get(w.device, 0) + int(w.paused)
            for device, n in sorted(paused_by_device.items()):
                paused.add_metric([device], n)
            labels: tuple[str, ...]
            for labels, n in sorted(s.worker_partitions.items()):
                parts.add_metric(list(labels), n)
            for labels, n in sorted(s.jobs_queued.items()):
                queued.add_metric(list(labels), n)
            for labels, n in sorted(s.partition_phases.items()):
                phases.add_metric(list(labels), n)
            for kind, n in sorted(s.jobs_submitted.items()):
                submitted.add_metric([kind], n)
            for labels, n in sorted(s.jobs_completed.items()):
                completed.add_metric(list(labels), n)
            for labels, n in sorted(s.jobs_recovered.items()):
                recovered.add_metric(list(labels), n)
            for labels, n in sorted(s.journal_proofs_rejected.items()):
                rejected.add_metric(list(labels), n)
            lost.add_metric([], 1.0 if s.journal_lost else 0.0)
            for labels, n in sorted(s.partition_retries.items()):
                retries.add_metric(list(labels), n)
            mem = s.memory
            budget.add_metric([], mem.budget_bytes)
            for consumer, n in sorted({"proving_key": 0, "partition": 0, "prover_runtime": 0,
                                       **mem.reserved_by_consumer}.items()):
                reserved.add_metric([consumer], n)
            parse_budget.add_metric([], s.request_parse.budget_bytes)
            parse_reserved.add_metric([], s.request_parse.reserved_bytes)
            for reason, n in sorted(s.request_parse_refused.items()):
                parse_refused.add_metric([reason], n)
            waiters.add_metric([], len(mem.waiters))
            evictions.add_metric([], mem.evictions)
            evicted.add_metric([], mem.evicted_bytes)
            resident: dict[tuple[str, str], int] = {}
            for kind in {k for k, _ in s.partition_phases}:
                resident[(kind, "host")] = 0
                if s.device_memory:
                    resident[(kind, "device")] = 0
            for k in s.keys:
                resident[(k.proof_kind, "host")] = k.host_bytes
                if k.device_bytes:
                    resident[(k.proof_kind, "device")] = sum(k.device_bytes.values())
            for labels, n in sorted(resident.items()):
                keys.add_metric(list(labels), n)
            for (kind, state), n in sorted(s.key_bytes.items()):
                key_bytes.add_metric([kind, state], n)
            build.add_metric([s.version, s.backend], 1.0)
            for device, dev in sorted(s.device_memory.items()):
                dev_budget.add_metric([device], dev.budget_bytes)
                for consumer, n in sorted({"proving_key": 0, "gpu_phase": 0,
                                           **dev.reserved_by_consumer}.items()):
                    dev_reserved.add_metric([device, consumer], n)
        yield from (busy, busy_s, lease_age, lease_kind, paused, parts, queued, phases, submitted,
                    completed, recovered, rejected, lost, retries, budget, reserved, waiters,
                    evictions, evicted, parse_budget, parse_reserved, parse_refused, keys,
                    key_bytes, build)
        yield from _deadline_families(s)
        if s is None or s.device_memory:  # absent, not zero, where no device budget exists
            yield from (dev_budget, dev_reserved)


def _deadline_families(s: EngineSnapshot | None) -> Iterator[Metric]:
    """Deadline metrics, read from the snapshot: misses and refusals (engine counters), the
    least slack per priority (absent where nothing unfinished has a predicted deadline), and
    the predicted GPU-seconds of queued and running work."""
    missed = CounterMetricFamily(
        "cuzk_job_deadline_missed", "Jobs that finished after, or were cut at, their deadline",
        labels=["proof_kind"])
    rejected = CounterMetricFamily(
        "cuzk_jobs_rejected", "Well-formed submits the server refused, by reason (deadline: "
        "cannot be met; memory: partition too large; unavailable: draining or journal)",
        labels=["proof_kind", "reason"])
    slack = GaugeMetricFamily(
        "cuzk_queue_min_slack_seconds",
        "Least slack (deadline minus predicted finish) among unfinished jobs with a deadline; "
        "absent when there is none", labels=["priority"])
    preempted = CounterMetricFamily(
        "cuzk_synthesis_preempted",
        "Partitions of a lower class sent back to the synthesis queue so a higher class got a "
        "synthesis thread or memory (synthesized ones are synthesized again)",
        labels=["proof_kind"])
    nearest = GaugeMetricFamily(
        "cuzk_queue_next_deadline_seconds",
        "Seconds until the nearest deadline among unfinished jobs; absent when there is none")
    backlog = GaugeMetricFamily(
        "cuzk_backlog_gpu_seconds",
        "Predicted GPU-seconds of queued and running work (every kind with a figure: measured, "
        "or its prior before it is measured)",
        labels=["priority"])
    if s is not None:
        for kind, n in sorted(s.deadlines_missed.items()):
            missed.add_metric([kind], n)
        for labels, n in sorted(s.jobs_rejected.items()):
            rejected.add_metric(list(labels), n)
        for prio, v in sorted(s.min_slack_s().items()):
            slack.add_metric([prio], v)
        for prio, v in sorted(s.backlog_gpu_seconds.items()):
            backlog.add_metric([prio], v)
        for kind, n in sorted(s.synthesis_preempted.items()):
            preempted.add_metric([kind], n)
        due = [j.deadline for j in s.jobs if j.finished_at is None and j.deadline is not None]
        if due:
            nearest.add_metric([], min(due) - s.time)
    # Declared always; without a deadline queued they carry no sample, so the series is
    # absent (an alert on them cannot fire on an empty queue), not zero.
    yield from (missed, rejected, backlog, preempted, slack, nearest)


class EngineMetrics:
    """One engine's Prometheus registry: a snapshot collector plus event-fed histograms.

    ``EngineMetrics(engine)`` subscribes at once; ``close()`` unsubscribes. The application
    creates it (``cuzk serve``, the benchmark, tests); the engine does not know it exists.
    ``nvml``: also export NVML device gauges for the engine's CUDA devices, when NVML answers.
    ``nvml_replay``: a recording of NVML samples (``cuzk.telemetry.nvml.load_recording``) to
    export for the engine's devices instead of asking the driver; ValueError when it is bad.
    """

    def __init__(self, engine: Engine, nvml: bool = True,
                 nvml_replay: str | Path | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(EngineCollector(engine))
        # RSS (against the memory budget) and start time (restarts) of the serving process.
        ProcessCollector(registry=self.registry)
        self.job_duration = Histogram(
            "cuzk_job_duration_seconds", "Job latency from submit to its outcome",
            ["proof_kind", "status"], buckets=JOB_BUCKETS, registry=self.registry)
        self.phase_duration = Histogram(
            "cuzk_partition_phase_duration_seconds", "Time a partition spent in a phase",
            ["proof_kind", "phase"], buckets=PHASE_BUCKETS, registry=self.registry)
        self.memory_wait = Histogram(
            "cuzk_memory_acquire_wait_seconds", "Time a reservation waited for memory",
            ["consumer"], buckets=WAIT_BUCKETS, registry=self.registry)
        self.deadline_margin = Histogram(
            "cuzk_job_deadline_margin_seconds",
            "Seconds to spare when a job with a deadline finished in time (misses are counted "
            "in cuzk_job_deadline_missed_total, never observed here)",
            ["proof_kind"], buckets=MARGIN_BUCKETS, registry=self.registry)
        self.journal_write = Histogram(
            "cuzk_journal_write_seconds",
            "Time one committed job-journal write took (fsync included)",
            buckets=JOURNAL_BUCKETS, registry=self.registry)
        if nvml_replay is not None:
            from cuzk.telemetry.nvml import register_nvml_replay

            register_nvml_replay(self.registry, list(engine.prover.devices), nvml_replay)
        elif nvml:
            from cuzk.telemetry.nvml import cuda_device_ids, register_nvml

            devices = cuda_device_ids(engine.prover)
            if devices:
                register_nvml(self.registry, devices)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._handlers: dict[type, Callable[[Any], None]] = {
            PartitionPhaseEnded: self._phase_ended,
            JobSettled: self._job_settled,
            MemoryWaited: self._memory_waited,
            JournalWritten: self._journal_written,
        }
        self._subscription = engine.subscribe(self.observe)

    def close(self) -> None:
        self._subscription.close()

    def observe(self, event: EngineEvent) -> None:
        """The event subscriber: histograms only (everything else is read at scrape time).

        It runs in the engine's threads (a GPU worker's among them), so it stays short: one
        dispatch on the event's type and a cached histogram child per label set."""
        handler = self._handlers.get(type(event))
        if handler is not None:
            handler(event)

    def _child(self, histogram: Histogram, labels: tuple[str, ...]) -> Any:
        key = (id(histogram), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = histogram.labels(*labels)
        return child

    def _phase_ended(self, e: PartitionPhaseEnded) -> None:
        self._child(self.phase_duration, (e.proof_kind, e.phase)).observe(
            e.seconds, _exemplar(e.trace_id, e.sampled))

    def _job_settled(self, e: JobSettled) -> None:
        self._child(self.job_duration, (e.proof_kind, e.outcome)).observe(
            e.duration_s, _exemplar(e.trace_id, e.sampled))
        margin = e.margin_s
        if margin is not None and e.outcome == "succeeded":  # never a negative value
            self._child(self.deadline_margin, (e.proof_kind,)).observe(
                margin, _exemplar(e.trace_id, e.sampled))

    def _memory_waited(self, e: MemoryWaited) -> None:
        self._child(self.memory_wait, (e.consumer,)).observe(e.seconds)

    def _journal_written(self, e: JournalWritten) -> None:
        self.journal_write.observe(e.seconds)

    def render(self, openmetrics_format: bool = False) -> tuple[bytes, str]:
        """Exposition bytes and content type; OpenMetrics carries the exemplars."""
        if openmetrics_format:
            return openmetrics.generate_latest(self.registry), openmetrics.CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    @staticmethod
    def wants_openmetrics(accept: str | None) -> bool:
        return bool(accept) and "application/openmetrics-text" in accept  # type: ignore[operator]


def _exemplar(trace_id: str | None, sampled: bool) -> dict[str, str] | None:
    """A trace id exemplar, only for a trace the sampler kept (else it links to nothing)."""
    return {"trace_id": trace_id} if trace_id and sampled else None
