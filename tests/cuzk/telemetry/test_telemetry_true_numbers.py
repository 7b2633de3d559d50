"""Numbers that mean what they say: memory waiters vs the waiting_memory phase, partitions
queued for a synthesis thread, job latency by outcome, paused workers, lease age, exemplars
only for sampled traces."""

from __future__ import annotations

import threading

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cuzk.engine.engine import Engine
from cuzk.engine.settings import EngineSettings, ProofKindSettings
from cuzk.simulated_prover import ScriptedProver
from tests._doubles import make_test_engine, metrics_of, wait_until


def _families(engine):
    text, _ = metrics_of(engine).render(openmetrics_format=True)
    return {f.name: f for f in text_string_to_metric_families(text.decode())}


def _phases(fams, kind=None):
    out: dict[str, float] = {}
    for s in fams["cuzk_partitions"].samples:
        if kind is None or s.labels["proof_kind"] == kind:
            out[s.labels["phase"]] = out.get(s.labels["phase"], 0) + s.value
    return out


def test_waiting_memory_equals_memory_waiters_at_every_read():
    """Contention for memory and for synthesis threads at once; every scrape taken while it
    drains must show as many partitions waiting for memory as there are memory waiters."""
    engine, prover, _ = make_test_engine(
        {"snap-update": (8, "normal"), "winning-post": (1, "critical")},
        synthesis_threads=3, memory_budget_bytes=1_000 + 3 * 100)  # a key + 3 partitions
    prover.delay("gpu", 0.01)
    with engine:
        engine.preload("snap-update")
        stop = threading.Event()
        reads: list[tuple[float, float]] = []

        def scrape() -> None:
            while not stop.is_set():
                fams = _families(engine)
                waiting = _phases(fams).get("waiting_memory", 0)
                reads.append((waiting, fams["cuzk_memory_waiters"].samples[0].value))

        t = threading.Thread(target=scrape)
        t.start()
        try:
            for _round in range(10):  # bounded: more work until enough contended reads
                jobs = [engine.submit("snap-update", [{"tag": f"{j}.{i}"} for i in range(8)])
                        for j in range(4)]
                for job in jobs:
                    assert engine.wait(job.id, 30).state == "succeeded"
                if sum(1 for w, _ in reads if w > 0) >= 20:
                    break
        finally:
            stop.set()
            t.join(10)
    assert all(w == m for w, m in reads), [r for r in reads if r[0] != r[1]][:5]
    assert sum(1 for w, _ in reads if w > 0) >= 20  # the contention was real


def test_partitions_waiting_for_a_synthesis_thread_are_not_waiting_for_memory():
    engine, prover, _ = make_test_engine({"snap-update": (6, "normal")}, synthesis_threads=1,
                                         memory_budget_bytes=1 << 20)
    with engine:
        gate = prover.hold("synthesize")
        job = engine.submit("snap-update", [{"tag": str(i)} for i in range(6)])
        assert gate.wait_entered()
        fams = _families(engine)
        phases = _phases(fams, "snap-update")
        assert phases["queued_synthesis"] == 5 and phases["synthesizing"] == 1
        assert phases["waiting_memory"] == 0 == fams["cuzk_memory_waiters"].samples[0].value
        status = engine.status()
        assert status["partition_phases"]["snap-update"]["queued_synthesis"] == 5
        assert [p["phase"] for p in status["jobs"][0]["partitions"]].count("queued_synthesis") == 5
        gate.release()
        assert engine.wait(job.id, 10).state == "succeeded"


def test_job_latency_is_labelled_with_its_outcome():
    engine, prover, _ = make_test_engine({"porep-c2": (2, "normal")})
    with engine:
        gate = prover.hold("gpu")
        cancelled = engine.submit("porep-c2", [{"tag": "a"}, {"tag": "b"}])
        assert gate.wait_entered()
        engine.cancel(cancelled.id)
        gate.release()
        prover.fail("finalize", "f", RuntimeError("bad proof"))
        failed = engine.submit("porep-c2", [{"tag": "f"}, {"tag": "g"}])
        ok = engine.submit("porep-c2", [{"tag": "c"}, {"tag": "d"}])
        for job, state in ((cancelled, "cancelled"), (failed, "failed"), (ok, "succeeded")):
            assert engine.wait(job.id, 10).state == state
        counts = {
            s.labels["status"]: s.value
            for s in _families(engine)["cuzk_job_duration_seconds"].samples
            if s.name.endswith("_count")
        }
    assert counts == {"cancelled": 1, "failed": 1, "succeeded": 1}


def test_paused_workers_and_lease_age_are_exported():
    engine, prover, _ = make_test_engine({"winning-post": (1, "critical")})
    with engine:
        fams = _families(engine)
        assert [s.value for s in fams["cuzk_gpu_workers_paused"].samples] == [0]
        assert all(s.value == 0 for s in fams["cuzk_gpu_worker_lease_age_seconds"].samples)
        gate = prover.hold("gpu")
        job = engine.submit("winning-post", [{"tag": "x"}])
        assert gate.wait_entered()
        engine.pause_workers()
        worker = next(w for w in engine.workers if w.busy)

        def age() -> float:
            for s in _families(engine)["cuzk_gpu_worker_lease_age_seconds"].samples:
                if s.labels["worker"] == worker.id:
                    return s.value
            raise AssertionError("no lease age for the busy worker")

        first = age()
        assert first > 0
        assert wait_until(lambda: age() > first + 0.01)  # computed at read time: it grows
        fams = _families(engine)
        paused = {s.labels["device"]: s.value for s in fams["cuzk_gpu_workers_paused"].samples}
        assert paused == {"cpu": len(engine.workers)}
        idle = [s.value for s in fams["cuzk_gpu_worker_lease_age_seconds"].samples
                if s.labels["worker"] != worker.id]
        assert idle and all(v == 0 for v in idle)
        assert all(w["paused"] for w in engine.status()["workers"])
        engine.resume_workers()
        gate.release()
        assert engine.wait(job.id, 5).state == "succeeded"
        assert wait_until(lambda: not worker.busy)
        fams = _families(engine)
        assert [s.value for s in fams["cuzk_gpu_workers_paused"].samples] == [0]
        assert all(s.value == 0 for s in fams["cuzk_gpu_worker_lease_age_seconds"].samples)


def _exemplars(engine) -> list:
    fams = _families(engine)
    return [s.exemplar for name in ("cuzk_job_duration_seconds",
                                    "cuzk_partition_phase_duration_seconds")
            for s in fams[name].samples if s.exemplar is not None]


def test_exemplars_only_for_sampled_traces():
    settings = EngineSettings(
        backend="cpu", memory_budget_bytes=1 << 20,
        proof_kinds={"winning-post": ProofKindSettings("winning-post", 1, "critical")})
    dropped = Engine(settings, ScriptedProver(), tracer_provider=TracerProvider(sampler=ALWAYS_OFF))
    kept, _, _ = make_test_engine({"winning-post": (1, "critical")})
    for engine in (dropped, kept):
        metrics_of(engine)
        with engine:
            job = engine.submit("winning-post", [{"tag": "x"}])
            assert engine.wait(job.id, 5).state == "succeeded"
            assert wait_until(engine.quiescent)
    assert _exemplars(dropped) == []  # its trace was never exported: nothing may point at it
    assert _exemplars(kept)
