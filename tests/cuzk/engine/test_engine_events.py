"""The engine's two doors: typed events to subscribers, one immutable snapshot when asked,
and nothing of Prometheus or the OpenTelemetry SDK inside the engine."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading

import pytest

from cuzk.engine.events import (
    JobAccepted,
    JobSettled,
    MemoryWaited,
    PartitionFailed,
    PartitionFinalized,
    PartitionPhaseEnded,
    WorkersPaused,
)
from cuzk.engine.snapshot import EngineSnapshot
from tests._doubles import make_test_engine, wait_until

KINDS = {"porep-c2": (3, "normal"), "winning-post": (1, "critical")}
APPLICATION_ONLY = ("prometheus_client", "opentelemetry.sdk", "starlette", "uvicorn", "numba",
                    "cuzk.prover", "cuzk.telemetry", "cuzk.api")


def test_engine_imports_neither_prometheus_nor_the_otel_sdk():
    code = (
        "import sys, cuzk.engine, cuzk.engine.engine, cuzk.engine.events, cuzk.engine.snapshot\n"
        f"bad = [m for m in sys.modules if m.startswith({APPLICATION_ONLY!r})]\n"
        "print(','.join(sorted(bad)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "", f"cuzk.engine loaded: {out.stdout.strip()}"


class Recorder:
    def __init__(self) -> None:
        self.events: list = []
        self.lock = threading.Lock()

    def __call__(self, event) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, kind: type) -> list:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


def test_a_job_publishes_accepted_phases_proofs_and_its_outcome_before_wait_returns():
    engine, _, _ = make_test_engine(KINDS, metrics_enabled=False)
    rec = Recorder()
    engine.subscribe(rec)
    with engine:
        job = engine.submit("porep-c2", [{"tag": f"p{i}"} for i in range(3)], request_id="r1")
        assert engine.wait(job.id, 5).state == "succeeded"
        # Delivered synchronously before the waiter woke: no polling needed here.
        settled = rec.of(JobSettled)
        assert [(e.job_id, e.outcome, e.error) for e in settled] == [(job.id, "succeeded", None)]
        assert settled[0].duration_s > 0 and settled[0].request_id == "r1"
        accepted = rec.of(JobAccepted)
        assert len(accepted) == 1 and accepted[0].job_id == job.id
        assert [dict(i) for i in accepted[0].inputs] == [{"tag": f"p{i}"} for i in range(3)]
        assert rec.events[0] is accepted[0]  # before anything else of the job
        finals = sorted(rec.of(PartitionFinalized), key=lambda e: e.partition)
        assert [(e.partition, e.proof["tag"], list(e.public)) for e in finals] == [
            (i, f"p{i}", [f"p{i}"]) for i in range(3)]
        assert rec.events.index(settled[0]) > max(rec.events.index(e) for e in finals)
        ended = rec.of(PartitionPhaseEnded)
        loaded = 0
        for i in range(3):
            phases = [e.phase for e in ended if e.partition == i]
            # The key loads once, for the first partition granted; one granted while it loads
            # waits for that load in loading_key too. Loading follows the grant.
            loaded += "loading_key" in phases
            assert [ph for ph in phases if ph != "loading_key"] == [
                "queued_synthesis", "waiting_memory", "synthesizing", "queued_gpu", "proving",
                "finalizing"], phases
            assert phases[2] in ("loading_key", "synthesizing"), phases
        assert loaded >= 1
        assert all(e.seconds >= 0 and e.trace_id == job.trace_id and e.sampled for e in ended)
        assert {e.consumer for e in rec.of(MemoryWaited)} == {"partition"}


def test_failures_and_cancellations_are_published_with_their_outcome(engine, prover):
    rec = Recorder()
    engine.subscribe(rec)
    prover.fail("synthesize", "bad", ValueError("no witness"))
    failed = engine.submit("winning-post", [{"tag": "bad"}])
    assert engine.wait(failed.id, 5).state == "failed"
    [pf] = rec.of(PartitionFailed)
    assert (pf.job_id, pf.partition, pf.phase, pf.error) == (
        failed.id, 0, "synthesizing", "no witness")
    gate = prover.hold("gpu", "c0")
    cancelled = engine.submit("porep-c2", [{"tag": f"c{i}"} for i in range(3)])
    assert gate.wait_entered()
    engine.cancel(cancelled.id)
    gate.release()
    assert engine.wait(cancelled.id, 5).state == "cancelled"
    outcomes = {e.job_id: (e.outcome, e.error) for e in rec.of(JobSettled)}
    assert outcomes[failed.id][0] == "failed" and "no witness" in outcomes[failed.id][1]
    assert outcomes[cancelled.id] == ("cancelled", "cancelled by request")
    assert len(rec.of(JobSettled)) == 2  # once per job


def test_a_failing_subscriber_disturbs_nothing(engine, caplog):
    def broken(event):
        raise RuntimeError("subscriber bug")

    rec = Recorder()
    engine.subscribe(broken)
    engine.subscribe(rec)
    job = engine.submit("winning-post", [{"tag": "x"}])
    assert engine.wait(job.id, 5).state == "succeeded"
    assert rec.of(JobSettled) and "subscriber bug" in caplog.text


def test_unsubscribed_receives_nothing_more(engine):
    rec = Recorder()
    sub = engine.subscribe(rec)
    engine.pause_workers()
    sub.close()
    engine.resume_workers()
    assert rec.of(WorkersPaused) == [WorkersPaused(True)]


def test_events_and_snapshots_are_immutable(engine, prover):
    gate = prover.hold("gpu")
    job = engine.submit("winning-post", [{"tag": "x"}])
    assert gate.wait_entered()
    snap = engine.snapshot()
    assert isinstance(snap, EngineSnapshot)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.paused = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.workers[0].busy = False  # type: ignore[misc]
    busy = [w for w in snap.workers if w.busy]
    assert [(w.job_id, w.proof_kind, w.partition) for w in busy] == [(job.id, "winning-post", 0)]
    assert busy[0].lease_age_s > 0
    gate.release()
    assert engine.wait(job.id, 5).state == "succeeded"
    assert wait_until(engine.quiescent)
    # The old snapshot still says what was true when it was taken.
    assert [w.busy for w in snap.workers].count(True) == 1
    assert not any(w.busy for w in engine.snapshot().workers)
    with pytest.raises(dataclasses.FrozenInstanceError):
        JobAccepted("j", "k", "normal", None, 1, (), 0.0, None, False).job_id = "x"  # type: ignore[misc]
