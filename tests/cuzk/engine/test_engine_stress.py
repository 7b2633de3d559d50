"""Concurrency stress: mixed jobs, random finalizer delays, several workers, continuous sampling.

Ground truth comes from the prover double: it records which thread is inside which GPU call.
A worker is certainly holding its lease while the same GPU call is in progress before and
after a read, so any such read that shows the worker idle (gauge or status) is a violation.

Reads inside leases are not left to the scheduler: while the random load runs, probes hold
every worker inside a GPU call (each partition of a probe job waits on a gate) until both
samplers have read each held worker a few times, then let them go. So every run checks at
least ROUNDS * PROBE_READS in-lease reads per worker and kind, on a quiet or a loaded machine.
"""

from __future__ import annotations

import random
import threading
import time

from tests._doubles import make_test_engine, metrics_of, wait_until

KINDS = {"one": (1, "critical"), "three": (3, "high"), "five": (5, "normal")}
WORKERS = 3  # a probe job of kind "three" holds all of them at once
ROUNDS = 3  # batches of random load, each with a probe while it is in flight
PROBE_READS = 3  # reads of each held worker, per sampler, before a probe lets go


def test_no_sample_shows_a_leased_worker_idle():
    engine, prover, _ = make_test_engine(
        KINDS, gpu_workers_per_device=WORKERS, synthesis_threads=2, finalizer_threads=3,
        memory_budget_bytes=3_000)
    rng = random.Random(1234)
    prover.delay("gpu", lambda _i: rng.uniform(0.002, 0.008))
    prover.delay("finalize", lambda _i: rng.uniform(0.0, 0.008))
    stop = threading.Event()
    checked = {"gauge": 0, "status": 0}
    in_lease: dict[str, dict[str, int]] = {"gauge": {}, "status": {}}  # kind -> worker -> reads
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
                in_lease[kind][w.id] = in_lease[kind].get(w.id, 0) + held

    def submit_batch(round_no: int) -> list:
        batch = []
        for i in range(60):
            kind = rng.choice(list(KINDS))
            n = KINDS[kind][0]
            tags = [{"tag": f"{round_no}.{i}.{k}"} for k in range(n)]
            batch.append(engine.submit(kind, tags))
        return batch

    def probe(round_no: int):
        """Hold every worker inside a GPU call until both samplers have read each of them
        PROBE_READS more times while held; the random load waits behind the probe."""
        tags = [f"probe.{round_no}.{k}" for k in range(WORKERS)]
        gates = [prover.hold("gpu", tag) for tag in tags]
        before = {kind: dict(reads) for kind, reads in in_lease.items()}
        job = engine.submit("three", [{"tag": tag} for tag in tags])
        entered = all(gate.wait_entered() for gate in gates)
        read = entered and wait_until(lambda: all(
            in_lease[kind].get(w.id, 0) - before[kind].get(w.id, 0) >= PROBE_READS
            for kind in in_lease for w in engine.workers), 10)
        for gate in gates:
            gate.release()
        assert entered, f"probe {round_no}: not every worker reached its GPU call"
        assert read, f"probe {round_no}: samplers did not read the held workers: {in_lease}"
        return job

    threads = [threading.Thread(target=sampler, args=(k,)) for k in ("gauge", "status")]
    t0 = time.monotonic()
    with engine:
        for t in threads:
            t.start()
        try:
            jobs = submit_batch(0)
            jobs.append(probe(0))
            gate = prover.hold("gpu", "victim.0")
            cancelled = engine.submit("three", [{"tag": f"victim.{k}"} for k in range(3)])
            assert gate.wait_entered()
            engine.cancel(cancelled.id)  # mid-GPU-phase: stops at the next step boundary
            gate.release()
            for round_no in range(1, ROUNDS):  # each probe while a batch is in flight
                jobs += submit_batch(round_no)
                jobs.append(probe(round_no))
            for job in jobs:
                engine.wait(job.id, 15)
            assert wait_until(engine.quiescent, 10)
        finally:  # the samplers stop even when a step above fails
            stop.set()
            for t in threads:
                t.join()
        assert time.monotonic() - t0 < 40
        assert [j.state for j in jobs] == ["succeeded"] * len(jobs)
        assert cancelled.state == "cancelled"
        assert not violations, violations[:5]
        assert checked["gauge"] >= 20 and checked["status"] >= 5, checked
        assert all(in_lease[kind].get(w.id, 0) >= ROUNDS * PROBE_READS
                   for kind in in_lease for w in engine.workers), in_lease
        assert engine.spans.open_spans() == []
        assert engine.host_budget.reserved_by_consumer().get("partition", 0) == 0
        proven = sum(w.partitions_proven for w in engine.workers)
        assert proven == sum(len(j.partitions) for j in jobs if j.state == "succeeded") + sum(
            1 for p in cancelled.partitions if p.worker_id is not None)
