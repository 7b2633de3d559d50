"""A step lost with its worker (``PhaseLost``) runs again, counted, back in its priority queue;
a real error still fails the job (the seam the cluster executor uses; no Ray here)."""

from __future__ import annotations

from cuzk.engine.backend import PhaseLost
from cuzk.engine.pipeline import MAX_RETRIES
from tests._doubles import make_test_engine, wait_until

KINDS = {"porep-c2": (3, "normal")}


def _lost(redo: str, phase: str = "gpu") -> PhaseLost:
    return PhaseLost(phase, "worker_lost" if redo == "gpu" else "data_lost", redo, "lost")


def test_lost_gpu_phase_runs_again_and_is_counted_once():
    engine, prover, _ = make_test_engine(KINDS)
    with engine:
        prover.fail("gpu", "b", _lost("gpu"))
        job = engine.submit("porep-c2", [{"tag": t} for t in "abc"])
        done = engine.wait(job.id, 10)
        assert done.outcome == "succeeded", done.error
        retries = engine.snapshot().partition_retries
        assert retries[("gpu", "worker_lost")] == 1
        assert sum(retries.values()) == 1
        assert prover.calls["synthesize"] == 3  # the synthesis survived: not run again
        assert prover.calls["gpu"] == 4
        assert [tuple(pub) for _, pub in done.view().proofs] == [("a",), ("b",), ("c",)]
        assert engine.status()["counters"]["partition_retries"]["gpu/worker_lost"] == 1


def test_lost_data_starts_the_partition_over_from_synthesis():
    engine, prover, _ = make_test_engine(KINDS)
    with engine:
        prover.fail("finalize", "c", _lost("synthesis", "finalize"))
        job = engine.submit("porep-c2", [{"tag": t} for t in "abc"])
        assert engine.wait(job.id, 10).outcome == "succeeded"
        assert engine.snapshot().partition_retries[("finalize", "data_lost")] == 1
        assert prover.calls["synthesize"] == 4 and prover.calls["finalize"] == 4
        assert wait_until(engine.quiescent, 5)  # nothing left held or open


def test_a_partition_lost_too_often_fails_its_job():
    engine, prover, _ = make_test_engine(KINDS)
    with engine:
        for _ in range(MAX_RETRIES + 1):
            prover.fail("gpu", "a", _lost("gpu"))
        job = engine.submit("porep-c2", [{"tag": t} for t in "abc"])
        done = engine.wait(job.id, 10)
        assert done.outcome == "failed"
        assert f"gave up after {MAX_RETRIES} retries" in (done.error or "")
        assert engine.snapshot().partition_retries[("gpu", "worker_lost")] == MAX_RETRIES


def test_a_real_step_error_is_not_retried():
    engine, prover, _ = make_test_engine(KINDS)
    with engine:
        prover.fail("gpu", "a", RuntimeError("kernel fault"))
        job = engine.submit("porep-c2", [{"tag": t} for t in "abc"])
        assert engine.wait(job.id, 10).outcome == "failed"
        assert sum(engine.snapshot().partition_retries.values()) == 0
