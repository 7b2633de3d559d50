"""A worker's busy seconds grow while a lease is open, not only when it closes: the idle alert
is a rate of ``cuzk_gpu_worker_busy_seconds_total``, and a worker inside one long GPU phase
must not read as idle."""

from __future__ import annotations

from tests._doubles import make_test_engine, metrics_of, wait_until

KINDS = {"winning-post": (1, "critical")}
RISE_S = 0.05  # how far each reading must climb while the lease stays open
BOUND_S = 10.0  # a bound on each wait, not a sleep


def test_busy_seconds_rise_while_a_held_lease_is_open() -> None:
    engine, prover, _ = make_test_engine(KINDS, gpu_workers_per_device=1)
    gate = prover.hold("gpu")
    with engine:
        job = engine.submit("winning-post", [{"tag": "long"}])
        assert gate.wait_entered(BOUND_S)
        worker = engine.pipeline.workers[0]
        labels = {"worker": worker.id, "device": worker.device}
        registry = metrics_of(engine).registry

        def exported() -> float:
            value = registry.get_sample_value("cuzk_gpu_worker_busy_seconds_total", labels)
            assert value is not None
            return value

        def status() -> float:
            return float(engine.status()["workers"][0]["busy_seconds"])

        readers = {"metric": exported, "status": status, "busy_seconds": worker.busy_seconds,
                   "sample": lambda: worker.sample()[1]}
        try:
            for name, read in readers.items():
                start = read()
                assert wait_until(lambda read=read, start=start: read() >= start + RISE_S,
                                  BOUND_S), f"{name} did not rise while the lease was open"
                assert worker.busy and prover.calls["finalize"] == 0  # still the same lease
        finally:
            gate.release()
        assert engine.wait(job.id, BOUND_S).state == "succeeded"
