"""Regression test for the upstream stale-finalizer race (docs/design.md section 2)."""

from __future__ import annotations

import threading

from tests._doubles import make_test_engine, metrics_of, wait_until


def _gauge(engine, worker_id: str) -> float | None:
    return metrics_of(engine).registry.get_sample_value(
        "cuzk_gpu_worker_busy", {"worker": worker_id, "device": "cpu"})


def test_finalizer_of_p_completing_while_worker_proves_q_leaves_worker_busy():
    """The interleaving, on one GPU worker W:

    1. W leases partition P, runs its GPU phase, hands P to the finalizer pool and leaves
       the lease (split proving: W does not wait for P's finalization).
    2. P's finalize step is held; meanwhile W leases partition Q and starts its GPU phase
       (held too).
    3. P's finalizer completes while W is still inside Q's GPU phase.

    A naive engine keeps ``worker.current_job`` / ``worker.busy`` as fields that the
    finalizer clears when it finishes ("the worker that proved P is done"). At step 3 that
    clear runs after W already set the fields for Q, so W reads idle (gauge 0, status idle)
    while it is proving Q, until Q ends. This test samples W continuously across step 3 and
    requires every sample to read busy with Q. Here the finalizer has no handle on the
    worker: W is busy exactly while Q's lease is open.
    """
    engine, prover, _ = make_test_engine({"k": (1, "normal")}, gpu_workers_per_device=1)
    fin_p = prover.hold("finalize", "P")
    gpu_q = prover.hold("gpu", "Q")
    with engine:
        job_p = engine.submit("k", [{"tag": "P"}])
        assert fin_p.wait_entered(), "P never reached finalize"
        job_q = engine.submit("k", [{"tag": "Q"}])
        assert gpu_q.wait_entered(), "Q never reached the GPU phase"
        worker = engine.workers[0]

        samples: list[tuple[float | None, str, str | None, int | None]] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                st = next(w for w in engine.status()["workers"] if w["id"] == worker.id)
                samples.append((_gauge(engine, worker.id), st["state"], st["job_id"],
                                st["partition"]))

        sampler = threading.Thread(target=sample)
        sampler.start()
        assert wait_until(lambda: len(samples) >= 5), "the sampler took no samples"
        fin_p.release()  # P's finalizer completes while W proves Q
        assert engine.wait(job_p.id, 10).state == "succeeded"
        n_before = len(samples)
        assert wait_until(lambda: len(samples) >= n_before + 5), "no samples after P ended"
        stop.set()
        sampler.join()

        # P's finalize really ended while Q's GPU phase was in progress.
        ev = prover.events
        assert ev.index(("gpu", "start", "Q")) < ev.index(("finalize", "end", "P"))
        assert ("gpu", "end", "Q") not in ev
        assert samples and all(s == (1.0, "proving", job_q.id, 0) for s in samples), samples[:5]

        gpu_q.release()
        assert engine.wait(job_q.id, 10).state == "succeeded"
        assert wait_until(lambda: _gauge(engine, worker.id) == 0.0)
        assert engine.status()["workers"][0]["state"] == "idle"
