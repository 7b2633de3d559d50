"""Concurrency stress: mixed jobs, random finalizer delays, several workers, continuous sampling.

Ground truth comes from the prover double: it records which thread is inside which GPU call.
A worker is certainly holding its lease while the same GPU call is in progress before and
after a read, so any such read that shows the worker idle (gauge or status) is a violation.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from cuzk.testing import make_test_engine, metrics_of, wait_until

KINDS = {"one": (1, "critical"), "three": (3, "high"), "five": (5, "normal")}


# How many reads land inside a lease depends on the machine's scheduling (a quiet CI machine once
# took none in its bounded rounds): retried up to twice. A retry could also hide a rare violation;
# making the in-lease read count deterministic is open work.
@pytest.mark.flaky(reruns=2)
def test_no_sample_shows_a_leased_worker_idle():
    engine, prover, _ = make_test_engine(
        KINDS, gpu_workers_per_device=3, synthesis_threads=2, finalizer_threads=3,
        memory_budget_bytes=3_000)
    rng = random.Random(1234)
    prover.delay("gpu", lambda _i: rng.uniform(0.002, 0.008))
    prover.delay("finalize", lambda _i: rng.uniform(0.0, 0.008))
    stop = threading.Event()
    checked = {"gauge": 0, "status": 0}
    violations: list[str] = []

    def read_gauges() -> dict[str, tuple[float | None, float | None]]:
        reg = metrics_of(engine).registry
        out = {}
        for w in engine.workers:
            labels = {"worker": w.id, "device": "cpu"}
            out[w.id] = (reg.get_sample_value("cuzk_gpu_worker_busy", labels),
                         reg.get_sample_value("cuzk_gpu_worker_busy_seconds_total", labels))
        return out

    def read_status() -> dict[str, dict]:
        return {w["id"]: w for w in engine.status()["workers"]}

    def sampler(kind: str) -> None:
        last_busy: dict[str, float] = {}
        while not stop.is_set():
            before = prover.in_gpu()
            reading = read_gauges() if kind == "gauge" else read_status()
            after = prover.in_gpu()
            for w in engine.workers:
                thread = f"cuzk-{w.id}"
                held = thread in before and before.get(thread) == after.get(thread)
                if kind == "gauge":
                    busy, seconds = reading[w.id]
                    if seconds < last_busy.get(w.id, 0.0):
                        violations.append(f"busy seconds decreased for {w.id}")
                    last_busy[w.id] = seconds
                    if held and busy != 1.0:
                        violations.append(f"gauge idle for {w.id} during a GPU call")
                elif held and (reading[w.id]["state"] != "proving"
                               or reading[w.id]["job_id"] is None):
                    violations.append(f"status idle for {w.id}: {reading[w.id]}")
                checked[kind] += held

    threads = [threading.Thread(target=sampler, args=(k,)) for k in ("gauge", "status")]
    t0 = time.monotonic()
    with engine:
        for t in threads:
            t.start()
        jobs: list = []

        def submit_batch(round_no: int) -> list:
            batch = []
            for i in range(60):
                kind = rng.choice(list(KINDS))
                n = KINDS[kind][0]
                tags = [{"tag": f"{round_no}.{i}.{k}"} for k in range(n)]
                batch.append(engine.submit(kind, tags))
            return batch

        jobs += submit_batch(0)
        gate = prover.hold("gpu", "victim.0")
        cancelled = engine.submit("three", [{"tag": f"victim.{k}"} for k in range(3)])
        assert gate.wait_entered()
        engine.cancel(cancelled.id)  # mid-GPU-phase: stops at the next step boundary
        gate.release()
        for job in jobs:
            engine.wait(job.id, 15)
        # On a loaded machine the samplers may land in fewer GPU calls: add bounded rounds of
        # work until enough reads were taken inside leases to make the check meaningful.
        for round_no in range(1, 4):
            if checked["gauge"] >= 20 and checked["status"] >= 5:
                break
            batch = submit_batch(round_no)
            for job in batch:
                engine.wait(job.id, 15)
            jobs += batch
        assert wait_until(engine.quiescent, 10)
        stop.set()
        for t in threads:
            t.join()
        assert time.monotonic() - t0 < 40
        assert [j.state for j in jobs] == ["succeeded"] * len(jobs)
        assert cancelled.state == "cancelled"
        assert not violations, violations[:5]
        assert checked["gauge"] >= 20 and checked["status"] >= 5, checked
        assert engine.spans.open_spans() == []
        assert engine.host_budget.reserved_by_consumer().get("partition", 0) == 0
        proven = sum(w.partitions_proven for w in engine.workers)
        assert proven == sum(len(j.partitions) for j in jobs if j.state == "succeeded") + sum(
            1 for p in cancelled.partitions if p.worker_id is not None)
