"""Metric exposition matches docs/design.md section 5: names, types, labels, exemplars,
monotonic counters."""

from __future__ import annotations

import time

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cuzk.errors import RequestTooLarge, Unavailable
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import make_test_engine, metrics_of, wait_until

# family name (as the OpenMetrics parser reports it) -> (type, label names)
CONTRACT = {
    "cuzk_gpu_worker_busy": ("gauge", {"worker", "device"}),
    "cuzk_gpu_worker_busy_seconds": ("counter", {"worker", "device"}),
    "cuzk_gpu_worker_lease_age_seconds": ("gauge", {"worker", "device"}),
    "cuzk_gpu_worker_lease_proof_kind": ("gauge", {"worker", "device", "proof_kind"}),
    "cuzk_gpu_workers_paused": ("gauge", {"device"}),
    "cuzk_gpu_worker_partitions": ("counter", {"worker", "device", "proof_kind"}),
    "cuzk_jobs_queued": ("gauge", {"proof_kind", "priority"}),
    "cuzk_partitions": ("gauge", {"proof_kind", "phase"}),
    "cuzk_jobs_submitted": ("counter", {"proof_kind"}),
    "cuzk_jobs_completed": ("counter", {"proof_kind", "status"}),
    "cuzk_job_duration_seconds": ("histogram", {"proof_kind", "status"}),
    "cuzk_partition_phase_duration_seconds": ("histogram", {"proof_kind", "phase"}),
    "cuzk_memory_budget_bytes": ("gauge", set()),
    "cuzk_memory_reserved_bytes": ("gauge", {"consumer"}),
    "cuzk_memory_waiters": ("gauge", set()),
    "cuzk_memory_acquire_wait_seconds": ("histogram", {"consumer"}),
    "cuzk_memory_evictions": ("counter", set()),
    "cuzk_memory_evicted_bytes": ("counter", set()),
    "cuzk_memory_request_parse_budget_bytes": ("gauge", set()),
    "cuzk_memory_request_parse_reserved_bytes": ("gauge", set()),
    "cuzk_memory_request_parse_refused": ("counter", {"reason"}),
    "cuzk_proving_key_resident_bytes": ("gauge", {"proof_kind", "location"}),
    "cuzk_proving_key_bytes": ("gauge", {"proof_kind", "state"}),
    "cuzk_build_info": ("gauge", {"version", "backend"}),
    "cuzk_jobs_recovered": ("counter", {"proof_kind", "outcome"}),
    "cuzk_journal_proofs_rejected": ("counter", {"proof_kind", "reason"}),
    "cuzk_journal_lost": ("gauge", set()),
    "cuzk_partition_retries": ("counter", {"phase", "reason"}),
    "cuzk_journal_write_seconds": ("histogram", set()),
    "cuzk_job_deadline_missed": ("counter", {"proof_kind"}),
    "cuzk_job_deadline_margin_seconds": ("histogram", {"proof_kind"}),
    "cuzk_jobs_rejected": ("counter", {"proof_kind", "reason"}),
    "cuzk_backlog_gpu_seconds": ("gauge", {"priority"}),
    "cuzk_synthesis_preempted": ("counter", {"proof_kind"}),
}
HIST_EXTRA = {"le"}
# Declared but without samples unless a job with a deadline is unfinished (absent, not zero).
ABSENT_WHEN_IDLE = {"cuzk_queue_min_slack_seconds", "cuzk_queue_next_deadline_seconds"}
KINDS = {"winning-post": (1, "critical"), "snap-update": (4, "normal")}


def _families(engine):
    text, ctype = metrics_of(engine).render(openmetrics_format=True)
    assert ctype.startswith("application/openmetrics-text")
    return {f.name: f for f in text_string_to_metric_families(text.decode())}


def _counters(fams):
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in fams.values()
        if f.type == "counter"
        for s in f.samples
        if s.name.endswith("_total")
    }


def test_exposition_matches_contract_with_exemplars_and_no_job_ids():
    engine, _, _ = make_test_engine(KINDS)
    with engine:
        jobs = [
            engine.submit("winning-post", [{"tag": "w"}], deadline=time.time() + 60),
            engine.submit("snap-update", [{"tag": str(i)} for i in range(4)]),
        ]
        for j in jobs:
            assert engine.wait(j.id, 5).state == "succeeded"
        assert wait_until(engine.quiescent)
        fams = _families(engine)
        first = _counters(fams)
        jobs.append(engine.submit("winning-post", [{"tag": "w2"}]))
        assert engine.wait(jobs[-1].id, 5).state == "succeeded"
        second = _counters(_families(engine))

    assert set(CONTRACT) <= set(fams), set(CONTRACT) - set(fams)
    job_ids = {j.id for j in jobs}
    for name, (mtype, labels) in CONTRACT.items():
        fam = fams[name]
        assert fam.type == mtype, name
        assert fam.samples, f"{name} has no samples"
        for s in fam.samples:
            names = set(s.labels) - (HIST_EXTRA if mtype == "histogram" else set())
            assert names == labels, (name, s.labels)
            assert not (set(s.labels.values()) & job_ids)
    extra = {n for n in fams if n.startswith("cuzk_")} - set(CONTRACT) - ABSENT_WHEN_IDLE
    assert extra == set(), extra  # NVML metrics absent without NVML
    assert all(not fams[n].samples for n in ABSENT_WHEN_IDLE if n in fams)

    kinds = {s.labels["proof_kind"] for s in fams["cuzk_jobs_submitted"].samples}
    assert kinds == {"winning-post", "snap-update"}  # full names, never shortened
    build = fams["cuzk_build_info"].samples[0]
    assert build.value == 1 and build.labels["backend"] == "cpu"

    trace_ids = {j.trace_id for j in jobs}
    for name in ("cuzk_job_duration_seconds", "cuzk_partition_phase_duration_seconds"):
        ex = [s.exemplar for s in fams[name].samples if s.exemplar is not None]
        assert ex, f"{name} has no exemplars"
        assert all(e.labels["trace_id"] in trace_ids for e in ex)

    assert set(first) <= set(second)
    assert all(second[k] >= v for k, v in first.items())
    key = ("cuzk_jobs_completed_total", (("proof_kind", "winning-post"), ("status", "succeeded")))
    assert (first[key], second[key]) == (1, 2)


def test_gauges_follow_live_state():
    engine, _, _ = make_test_engine(KINDS)
    with engine:
        engine.pause_workers()
        job = engine.submit("snap-update", [{"tag": str(i)} for i in range(4)])
        assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 4)
        fams = _families(engine)
        phases = {
            s.labels["phase"]: s.value
            for s in fams["cuzk_partitions"].samples
            if s.labels["proof_kind"] == "snap-update"
        }
        assert phases["queued_gpu"] == 4 and phases["proving"] == 0
        reserved = {
            s.labels["consumer"]: s.value for s in fams["cuzk_memory_reserved_bytes"].samples
        }
        assert reserved == {"partition": 400, "proving_key": 1000, "prover_runtime": 0}
        keys = {
            (s.labels["proof_kind"], s.labels["location"]): s.value
            for s in fams["cuzk_proving_key_resident_bytes"].samples
        }
        assert keys[("snap-update", "host")] == 1000 and keys[("winning-post", "host")] == 0
        assert all(s.value == 0 for s in fams["cuzk_gpu_worker_busy"].samples)
        engine.resume_workers()
        assert engine.wait(job.id, 5).state == "succeeded"
        assert wait_until(engine.quiescent)
        fams = _families(engine)
        assert all(s.value == 0 for s in fams["cuzk_partitions"].samples)
        busy = [
            s.value
            for s in fams["cuzk_gpu_worker_busy_seconds"].samples
            if s.name.endswith("_total")
        ]
        assert sum(busy) > 0


def test_lease_proof_kind_names_the_kind_of_each_open_lease_only():
    """The stuck-lease alert judges a lease by its own kind (issue 27): the gauge is 1 for the
    kind of a worker's open lease and 0 for every other configured kind, all 0 when idle."""
    engine, prover, _ = make_test_engine(KINDS, gpu_workers_per_device=1)
    gate = prover.hold("gpu", "s")
    with engine:
        job = engine.submit("snap-update", [{"tag": "s"}] + [{"tag": f"t{i}"} for i in range(3)])
        assert gate.wait_entered()

        def lease_kinds() -> dict[tuple[str, str], float]:
            return {(s.labels["worker"], s.labels["proof_kind"]): s.value
                    for s in _families(engine)["cuzk_gpu_worker_lease_proof_kind"].samples}

        worker = engine.workers[0].id
        assert lease_kinds() == {(worker, "snap-update"): 1.0, (worker, "winning-post"): 0.0}
        gate.release()
        assert engine.wait(job.id, 5).state == "succeeded"
        assert wait_until(engine.quiescent)
        assert lease_kinds() == {(worker, "snap-update"): 0.0, (worker, "winning-post"): 0.0}


def test_request_parse_reserve_metrics_follow_its_ledger_apart_from_the_host_budget():
    """The parse reserve is shown beside the host budget, never in it: its size, what bodies
    being parsed hold, and its refusals by reason (a counter that never goes down)."""
    engine, _, _ = make_test_engine(KINDS, request_parse_reserve_bytes=5000)
    with engine:
        held = engine.reserve_request_memory(1200)
        fams = _families(engine)
        value = {f: fams[f].samples[0].value for f in (
            "cuzk_memory_request_parse_budget_bytes", "cuzk_memory_request_parse_reserved_bytes")}
        assert value == {"cuzk_memory_request_parse_budget_bytes": 5000,
                         "cuzk_memory_request_parse_reserved_bytes": 1200}
        assert {s.labels["consumer"] for s in fams["cuzk_memory_reserved_bytes"].samples} == {
            "partition", "proving_key", "prover_runtime"}
        with pytest.raises(Unavailable):
            engine.reserve_request_memory(4000)  # busy beside the 1200 held: 503
        with pytest.raises(RequestTooLarge):
            engine.reserve_request_memory(6000)  # more than the whole reserve: 413
        held.close()
        refused = {s.labels["reason"]: s.value
                   for s in _families(engine)["cuzk_memory_request_parse_refused"].samples
                   if s.name.endswith("_total")}
        assert refused == {"busy": 1, "too_large": 1}
        assert _families(engine)["cuzk_memory_request_parse_reserved_bytes"].samples[0].value == 0


def test_queued_jobs_gauge_counts_jobs_waiting_for_memory():
    engine, prover, _ = make_test_engine(KINDS, memory_budget_bytes=1100)
    with engine:
        gate = prover.hold("gpu", "a")
        first = engine.submit("winning-post", [{"tag": "a"}])
        assert gate.wait_entered()
        second = engine.submit("winning-post", [{"tag": "b"}])  # no memory left for it
        assert wait_until(lambda: engine.host_budget.waiters == 1)
        fams = _families(engine)
        queued = {
            (s.labels["proof_kind"], s.labels["priority"]): s.value
            for s in fams["cuzk_jobs_queued"].samples
        }
        assert queued[("winning-post", "critical")] == 1
        assert fams["cuzk_memory_waiters"].samples[0].value == 1
        gate.release()
        assert engine.wait(second.id, 5).state == "succeeded"
        assert first.state == "succeeded"


def test_engine_without_telemetry_still_counts():
    """Metrics and tracing belong to the application: an engine nobody subscribed to records
    no spans and publishes to no one, and its snapshot still counts."""
    engine, _, spans = make_test_engine(KINDS, metrics_enabled=False, tracing_enabled=False)
    with engine:
        job = engine.submit("winning-post", [{}])
        assert engine.wait(job.id, 5).state == "succeeded"
        assert not engine.events.active
        assert engine.status()["counters"]["jobs_submitted"]["winning-post"] == 1
        assert job.trace_id is None
    assert spans.get_finished_spans() == ()


def test_device_budgets_are_reported_per_device():
    """On a GPU backend each device's budget and its reservations are metrics too; a key's
    device-resident bytes show under location="device"."""
    kinds = {"winning-post": ScriptedKind(host_bytes=1_000, device_bytes=300)}
    prover = ScriptedProver(kinds, devices=("cuda:0", "cuda:1"), name="cuda", device_memory=10_000)
    engine, prover, _ = make_test_engine(
        {"winning-post": (1, "critical")}, prover, device_memory_budget_bytes=8_000
    )
    with engine:
        gate = prover.hold("gpu", lambda _inputs: True)
        job = engine.submit("winning-post", [{"tag": "w"}])
        assert gate.wait_entered()
        fams = _families(engine)
        budget = {
            s.labels["device"]: s.value for s in fams["cuzk_device_memory_budget_bytes"].samples
        }
        assert budget == {"cuda:0": 8_000, "cuda:1": 8_000}
        reserved = {
            (s.labels["device"], s.labels["consumer"]): s.value
            for s in fams["cuzk_device_memory_reserved_bytes"].samples
        }
        assert reserved[("cuda:0", "proving_key")] == 300 == reserved[("cuda:1", "proving_key")]
        # The one partition's GPU phase holds its working set on exactly one device.
        gpu = [reserved[(d, "gpu_phase")] for d in ("cuda:0", "cuda:1")]
        assert sorted(gpu) == [0, 10]
        keys = {
            (s.labels["proof_kind"], s.labels["location"]): s.value
            for s in fams["cuzk_proving_key_resident_bytes"].samples
        }
        assert keys[("winning-post", "device")] == 600
        gate.release()
        assert engine.wait(job.id, 5).state == "succeeded"
        assert wait_until(engine.quiescent)
        after = {
            (s.labels["device"], s.labels["consumer"]): s.value
            for s in _families(engine)["cuzk_device_memory_reserved_bytes"].samples
        }
        assert after[("cuda:0", "gpu_phase")] == after[("cuda:1", "gpu_phase")] == 0


def test_process_metrics_for_rss_against_budget_and_restarts():
    """The dashboards plot RSS against the budget and count restarts from the start time."""
    import time

    engine, _, _ = make_test_engine(KINDS)
    with engine:
        fams = _families(engine)
    rss = fams["process_resident_memory_bytes"].samples[0].value
    start = fams["process_start_time_seconds"].samples[0].value
    assert rss > 10 * 2**20  # this interpreter with numpy loaded is far above 10 MiB
    assert 0 < time.time() - start < 3600  # this test process started within the hour
