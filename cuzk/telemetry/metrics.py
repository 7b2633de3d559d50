"""Prometheus metrics of design.md section 5, on a registry owned by one engine.

State metrics (worker busy, busy seconds, queue and phase counts, memory, resident keys,
counters) are produced by a custom collector from a snapshot the engine computes from open
leases and scopes at scrape time. Only the histograms are fed by events, with the trace id
as exemplar. Labels never carry job or request ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics

JOB_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
PHASE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
JOURNAL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
WAIT_BUCKETS = (0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300)


@dataclass
class MetricsSnapshot:
    """Everything the collector emits, computed by the engine in one pass at scrape time."""

    version: str
    backend: str
    workers: list[tuple[str, str, bool, float]] = field(default_factory=list)
    worker_partitions: dict[tuple[str, str, str], int] = field(default_factory=dict)
    jobs_queued: dict[tuple[str, str], int] = field(default_factory=dict)
    partitions: dict[tuple[str, str], int] = field(default_factory=dict)
    jobs_submitted: dict[str, int] = field(default_factory=dict)
    jobs_completed: dict[tuple[str, str], int] = field(default_factory=dict)
    jobs_recovered: dict[tuple[str, str], int] = field(default_factory=dict)
    memory_budget: int = 0
    memory_reserved: dict[str, int] = field(default_factory=dict)
    memory_waiters: int = 0
    evictions: int = 0
    evicted_bytes: int = 0
    resident_keys: dict[tuple[str, str], int] = field(default_factory=dict)
    # Per-device budgets (CUDA backend only): device -> bytes, (device, consumer) -> bytes.
    device_memory_budget: dict[str, int] = field(default_factory=dict)
    device_memory_reserved: dict[tuple[str, str], int] = field(default_factory=dict)


class EngineCollector:
    """Turns a MetricsSnapshot into metric families on every scrape."""

    def __init__(self, view: Callable[[], MetricsSnapshot]) -> None:
        self._view = view

    def describe(self) -> Iterable[Metric]:
        return list(self._families(None))

    def collect(self) -> Iterable[Metric]:
        return list(self._families(self._view()))

    def _families(self, s: MetricsSnapshot | None) -> Iterator[Metric]:
        busy = GaugeMetricFamily(
            "cuzk_gpu_worker_busy", "1 while the worker holds an open GPU-phase lease",
            labels=["worker", "device"])
        busy_s = CounterMetricFamily(
            "cuzk_gpu_worker_busy_seconds", "Seconds the worker held a GPU-phase lease",
            labels=["worker", "device"])
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
        budget = GaugeMetricFamily("cuzk_memory_budget_bytes", "Host memory budget in bytes")
        reserved = GaugeMetricFamily(
            "cuzk_memory_reserved_bytes", "Host bytes reserved, by consumer", labels=["consumer"])
        waiters = GaugeMetricFamily("cuzk_memory_waiters", "Reservations waiting for memory")
        evictions = CounterMetricFamily("cuzk_memory_evictions", "Idle proving keys evicted")
        evicted = CounterMetricFamily("cuzk_memory_evicted_bytes", "Bytes freed by evictions")
        keys = GaugeMetricFamily(
            "cuzk_proving_key_resident_bytes", "Bytes of resident proving keys",
            labels=["proof_kind", "location"])
        build = GaugeMetricFamily(
            "cuzk_build_info", "Build information (always 1)", labels=["version", "backend"])
        dev_budget = GaugeMetricFamily(
            "cuzk_device_memory_budget_bytes", "Device memory budget in bytes (CUDA backend)",
            labels=["device"])
        dev_reserved = GaugeMetricFamily(
            "cuzk_device_memory_reserved_bytes",
            "Device bytes reserved, by consumer (CUDA backend)", labels=["device", "consumer"])
        if s is not None:
            for worker, device, is_busy, seconds in s.workers:
                busy.add_metric([worker, device], 1.0 if is_busy else 0.0)
                busy_s.add_metric([worker, device], seconds)
            for labels, n in sorted(s.worker_partitions.items()):
                parts.add_metric(list(labels), n)
            for labels, n in sorted(s.jobs_queued.items()):
                queued.add_metric(list(labels), n)
            for labels, n in sorted(s.partitions.items()):
                phases.add_metric(list(labels), n)
            for kind, n in sorted(s.jobs_submitted.items()):
                submitted.add_metric([kind], n)
            for labels, n in sorted(s.jobs_completed.items()):
                completed.add_metric(list(labels), n)
            for labels, n in sorted(s.jobs_recovered.items()):
                recovered.add_metric(list(labels), n)
            budget.add_metric([], s.memory_budget)
            for consumer, n in sorted(s.memory_reserved.items()):
                reserved.add_metric([consumer], n)
            waiters.add_metric([], s.memory_waiters)
            evictions.add_metric([], s.evictions)
            evicted.add_metric([], s.evicted_bytes)
            for labels, n in sorted(s.resident_keys.items()):
                keys.add_metric(list(labels), n)
            build.add_metric([s.version, s.backend], 1.0)
            for device, n in sorted(s.device_memory_budget.items()):
                dev_budget.add_metric([device], n)
            for labels, n in sorted(s.device_memory_reserved.items()):
                dev_reserved.add_metric(list(labels), n)
        yield from (busy, busy_s, parts, queued, phases, submitted, completed, recovered, budget,
                    reserved, waiters, evictions, evicted, keys, build)
        if s is None or s.device_memory_budget:  # absent, not zero, where no device budget exists
            yield from (dev_budget, dev_reserved)


class EngineMetrics:
    """The engine's registry; with ``enabled=False`` every call is a cheap no-op."""

    def __init__(
        self,
        view: Callable[[], MetricsSnapshot],
        enabled: bool = True,
        nvml_devices: Iterable[int] = (),
    ) -> None:
        self.enabled = enabled
        self.registry = CollectorRegistry(auto_describe=True)
        if not enabled:
            return
        self.registry.register(EngineCollector(view))
        self.job_duration = Histogram(
            "cuzk_job_duration_seconds", "Job latency from submit to its outcome",
            ["proof_kind"], buckets=JOB_BUCKETS, registry=self.registry)
        self.phase_duration = Histogram(
            "cuzk_partition_phase_duration_seconds", "Time a partition spent in a phase",
            ["proof_kind", "phase"], buckets=PHASE_BUCKETS, registry=self.registry)
        self.memory_wait = Histogram(
            "cuzk_memory_acquire_wait_seconds", "Time a reservation waited for memory",
            ["consumer"], buckets=WAIT_BUCKETS, registry=self.registry)
        self.journal_write = Histogram(
            "cuzk_journal_write_seconds",
            "Time one committed journal write took (fsync included)",
            buckets=JOURNAL_BUCKETS, registry=self.registry)
        devices = list(nvml_devices)
        if devices:
            from cuzk.telemetry.nvml import register_nvml

            register_nvml(self.registry, devices)

    @staticmethod
    def _exemplar(trace_id: str | None) -> dict[str, str] | None:
        return {"trace_id": trace_id} if trace_id else None

    def observe_job(self, proof_kind: str, seconds: float, trace_id: str | None) -> None:
        if self.enabled:
            self.job_duration.labels(proof_kind).observe(seconds, self._exemplar(trace_id))

    def observe_phase(
        self, proof_kind: str, phase: str, seconds: float, trace_id: str | None
    ) -> None:
        if self.enabled:
            self.phase_duration.labels(proof_kind, phase).observe(
                seconds, self._exemplar(trace_id))

    def observe_memory_wait(self, consumer: str, seconds: float) -> None:
        if self.enabled:
            self.memory_wait.labels(consumer).observe(seconds)

    def observe_journal_write(self, seconds: float) -> None:
        if self.enabled:
            self.journal_write.observe(seconds)

    def render(self, openmetrics_format: bool = False) -> tuple[bytes, str]:
        """Exposition bytes and content type; OpenMetrics carries the exemplars."""
        if openmetrics_format:
            return openmetrics.generate_latest(self.registry), openmetrics.CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    @staticmethod
    def wants_openmetrics(accept: str | None) -> bool:
        return bool(accept) and "application/openmetrics-text" in accept  # type: ignore[operator]
