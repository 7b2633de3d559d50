"""Scheduler, cancellation, failure, idempotency and key residency through the real engine."""

from __future__ import annotations

import pytest

from cuzk.errors import InputError, UnknownJob, UnknownProofKind, WitnessError
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import make_test_engine, wait_until

KINDS = {"small": (1, "normal"), "multi": (3, "normal"), "urgent": (1, "critical")}


@pytest.fixture
def engine_parts():
    engine, prover, exporter = make_test_engine(KINDS)
    engine.start()
    yield engine, prover, exporter
    engine.shutdown(5)


def test_priority_classes_then_fifo_order_the_gpu(engine_parts):
    engine, _, _ = engine_parts
    engine.pause_workers()
    jobs = [
        engine.submit("small", [{"tag": "n1"}]),
        engine.submit("small", [{"tag": "low"}], priority="low"),
        engine.submit("small", [{"tag": "n2"}]),
        engine.submit("urgent", [{"tag": "crit"}]),
        engine.submit("small", [{"tag": "high"}], priority="high"),
    ]
    assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 5)
    assert [j.state for j in jobs] == ["running"] * 5  # synthesized, waiting for a GPU
    order = [p.inputs["tag"] for p in engine.pipeline.gpu_queue.items()]
    assert order == ["crit", "high", "n1", "n2", "low"]
    engine.resume_workers()
    for j in jobs:
        assert engine.wait(j.id, 5).state == "succeeded"


def test_idempotent_submit_and_new_attempt_after_failure(engine_parts):
    engine, prover, _ = engine_parts
    first = engine.submit("small", [{"tag": "x"}], request_id="r-1")
    assert engine.submit("small", [{"tag": "x"}], request_id="r-1") is first
    assert engine.wait(first.id, 5).state == "succeeded"
    assert engine.submit("small", [{"tag": "x"}], request_id="r-1") is first

    prover.fail("synthesize", "y", WitnessError("signal y: bad"))
    failed = engine.submit("small", [{"tag": "y"}], request_id="r-2")
    assert engine.wait(failed.id, 5).state == "failed"
    assert "signal y" in failed.error
    retry = engine.submit("small", [{"tag": "y"}], request_id="r-2")
    assert retry is not failed and retry.attempt == 2
    assert engine.wait(retry.id, 5).state == "succeeded"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("nope", [{}]), UnknownProofKind),
        (("multi", [{}]), InputError),
        (("multi", {"a": 1}), InputError),
        (("multi", [{}, {}, 3]), InputError),
    ],
)
def test_bad_input_changes_nothing(engine_parts, args, error):
    engine, _, _ = engine_parts
    before = engine.counters.get("jobs_submitted")
    with pytest.raises(error):
        engine.submit(*args)
    with pytest.raises(InputError):
        engine.submit("small", [{}], priority="urgent!")
    assert engine.jobs() == []
    assert engine.counters.get("jobs_submitted") == before
    with pytest.raises(UnknownJob):
        engine.get("missing")


def test_failed_partition_fails_job_cancels_siblings_and_engine_keeps_serving():
    # One synthesis thread: partitions reach the GPU queue in index order, so m2 cannot be
    # proven and finalized before m1 fails.
    engine, prover, _ = make_test_engine(KINDS, synthesis_threads=1)
    with engine:
        _failed_partition_scenario(engine, prover)


def _failed_partition_scenario(engine, prover):
    hold = prover.hold("gpu", "m0")
    prover.fail("gpu", "m1", RuntimeError("device fault"))
    job = engine.submit("multi", [{"tag": "m0"}, {"tag": "m1"}, {"tag": "m2"}])
    assert engine.wait(job.id, 5).state == "failed"
    assert "device fault" in job.error
    hold.release()
    assert job.settled.wait(5)
    outcomes = sorted(p.outcome for p in job.partitions)
    assert outcomes.count("failed") == 1 and "done" not in outcomes
    assert wait_until(engine.quiescent)
    assert engine.counters.get("jobs_completed")[("multi", "failed")] == 1
    ok = engine.submit("multi", [{"tag": "a"}, {"tag": "b"}, {"tag": "c"}])
    assert engine.wait(ok.id, 5).state == "succeeded"
    assert len(ok.to_dict()["proofs"]) == 3


def test_cancel_drops_queued_and_stops_running_at_step_boundary():
    engine, prover, _ = make_test_engine(KINDS, synthesis_threads=1)
    with engine:
        gate = prover.hold("synthesize", "s0")
        job = engine.submit("multi", [{"tag": "s0"}, {"tag": "s1"}, {"tag": "s2"}])
        assert gate.wait_entered()
        engine.cancel(job.id)
        assert job.state == "cancelled"
        assert engine.wait(job.id, 1).state == "cancelled"
        # s1 and s2 were still queued: dropped at once; s0 is mid-synthesis.
        assert [p.outcome for p in job.partitions] == [None, "cancelled", "cancelled"]
        assert not job.settled.is_set()
        gate.release()
        assert job.settled.wait(5)
        assert job.partitions[0].outcome == "cancelled"
        assert prover.calls["synthesize"] == 1 and prover.calls["gpu"] == 0
        assert wait_until(engine.quiescent)
        assert engine.host_budget.reserved_by_consumer().get("partition", 0) == 0


def test_cancel_while_paused_releases_reservations(engine_parts):
    engine, _, _ = engine_parts
    engine.pause_workers()
    job = engine.submit("multi", [{"tag": "a"}, {"tag": "b"}, {"tag": "c"}])
    assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 3)
    assert engine.host_budget.reserved_by_consumer()["partition"] == 300
    engine.cancel(job.id)
    assert job.settled.wait(5)
    assert len(engine.pipeline.gpu_queue) == 0
    assert engine.host_budget.reserved_by_consumer().get("partition", 0) == 0
    engine.resume_workers()


def test_wait_times_out_on_unfinished_job(engine_parts):
    engine, prover, _ = engine_parts
    gate = prover.hold("gpu", "slow")
    job = engine.submit("small", [{"tag": "slow"}])
    assert gate.wait_entered()  # on a GPU worker: running, not just queued (a loaded machine)
    assert engine.wait(job.id, 0.05).state == "running"
    gate.release()
    assert engine.wait(job.id, 5).state == "succeeded"


def test_key_loaded_once_preload_and_evict(engine_parts):
    engine, prover, _ = engine_parts
    for i in range(3):
        engine.wait(engine.submit("small", [{"tag": str(i)}]).id, 5)
    assert prover.calls["load_key"] == 1
    assert engine.preload("urgent")["resident"]
    assert {c["proof_kind"]: c["resident"] for c in engine.circuits()} == {
        "small": True, "multi": False, "urgent": True}
    assert engine.evict("small")["result"] == "evicted"
    assert engine.evict("small")["result"] == "not_resident"
    assert prover.unloads == 1
    with pytest.raises(UnknownProofKind):
        engine.preload("nope")


def test_evict_of_key_in_use_is_deferred():
    prover = ScriptedProver({"small": ScriptedKind(host_bytes=500)})
    engine, prover, _ = make_test_engine(KINDS, prover)
    with engine:
        gate = prover.hold("gpu", "a")
        job = engine.submit("small", [{"tag": "a"}])
        assert gate.wait_entered()
        assert engine.evict("small")["result"] == "deferred"
        assert engine.keys.is_resident("small")
        gate.release()
        assert engine.wait(job.id, 5).state == "succeeded"
        assert wait_until(lambda: not engine.keys.is_resident("small"))
        assert engine.host_budget.reserved == 0


def test_submit_requires_running_engine():
    from cuzk.engine import EngineNotRunning

    engine, _, _ = make_test_engine(KINDS)
    with pytest.raises(EngineNotRunning):
        engine.submit("small", [{}])
    engine.start()
    engine.shutdown(5)
    with pytest.raises(EngineNotRunning):
        engine.submit("small", [{}])


def test_shutdown_cancels_unfinished_jobs():
    engine, prover, _ = make_test_engine(KINDS)
    engine.start()
    gate = prover.hold("finalize", "a")
    job = engine.submit("small", [{"tag": "a"}])
    assert gate.wait_entered()
    gate.release()
    engine.shutdown(5)
    assert job.terminal
    assert engine.spans.open_spans() == []
    assert engine.host_budget.reserved == 0


def test_finished_jobs_are_retired_beyond_retention():
    engine, _, _ = make_test_engine(KINDS, job_retention=2)
    with engine:
        jobs = []
        for i in range(4):  # one after another: retention keeps the newest to finish, and
            # jobs run together may finish in any order
            jobs.append(engine.submit("small", [{"tag": str(i)}], request_id=f"r{i}"))
            assert jobs[-1].settled.wait(5)

        def retired(job_id: str) -> bool:
            try:
                engine.get(job_id)
            except UnknownJob:
                return True
            return False

        # a job is retired just after the next ones conclude (settled is set before that)
        assert wait_until(lambda: retired(jobs[0].id) and retired(jobs[1].id), 5)
        assert engine.get(jobs[2].id) is jobs[2] and engine.get(jobs[3].id) is jobs[3]
        again = engine.submit("small", [{"tag": "0"}], request_id="r0")
        assert again is not jobs[0]  # its idempotency entry went with it
        status = engine.status()
        assert {j["id"] for j in status["jobs"]} <= {j.id for j in engine.jobs()}
        assert status["keys"][0]["proof_kind"] == "small"


def test_status_snapshot_shape(engine_parts):
    engine, prover, _ = engine_parts
    gate = prover.hold("gpu", "a")
    job = engine.submit("multi", [{"tag": "a"}, {"tag": "b"}, {"tag": "c"}])
    assert gate.wait_entered()
    st = engine.status()
    (j,) = st["jobs"]
    assert j["id"] == job.id and j["proof_kind"] == "multi" and j["state"] == "running"
    assert j["partitions"][0]["phase"] == "proving"
    assert j["partitions"][0]["phase_ms"]["proving"] >= 0
    busy = [w for w in st["workers"] if w["state"] == "proving"]
    assert [(w["job_id"], w["partition"]) for w in busy if w["partition"] == 0] == [(job.id, 0)]
    assert st["memory"]["budget_bytes"] == 1_000_000
    assert st["memory"]["reserved_by_consumer"]["proving_key"] == 1000
    assert st["counters"]["jobs_submitted"]["multi"] == 1
    gate.release()
    assert engine.wait(job.id, 5).state == "succeeded"


def test_cancel_withdraws_a_partition_waiting_for_memory():
    engine, prover, _ = make_test_engine(KINDS, memory_budget_bytes=1100)
    with engine:
        gate = prover.hold("gpu", "a")
        first = engine.submit("small", [{"tag": "a"}])
        assert gate.wait_entered()
        blocked = engine.submit("small", [{"tag": "b"}])
        assert wait_until(lambda: engine.host_budget.waiters == 1)
        engine.cancel(blocked.id)
        assert blocked.settled.wait(5)  # it did not wait for memory to free up
        assert engine.host_budget.waiters == 0 and first.state == "running"
        gate.release()
        assert engine.wait(first.id, 5).state == "succeeded"
