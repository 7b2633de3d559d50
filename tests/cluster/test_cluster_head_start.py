"""A head is ready once a GPU worker answers, not once every CPU worker has started (issue 27:
a restarted head spent most of its 20-33 s to ready waiting for new CPU-worker processes on a
loaded machine). The CPU workers here are held at their start (``scripted_cpu_start_gate``)
until the test lets them go, so the order is decided by the test, not by the machine's load."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster._cluster import two_nodes

BUILD_BOUND_S = 90.0  # a fresh GPU worker's process on a loaded 2-core machine, with margin
JOB_BOUND_S = 150.0


@pytest.fixture
def held_cpu_workers(in_namespace: bool, tmp_path: Path) -> Iterator[Any]:
    """(build thread, list the engine lands in, gate): a head being built over the shared
    cluster whose CPU workers do not answer until ``gate`` exists. Afterwards the gate is
    opened, the head stopped and every actor it placed killed (the cluster is shared)."""
    if not in_namespace:
        yield None
        return
    import ray

    from cuzk.cluster.runtime import cluster_engine
    from cuzk.cluster.worker import ProverSpec
    from cuzk.engine.settings import EngineSettings, ProofKindSettings

    gate = tmp_path / "cpu-workers-may-start"
    spec = ProverSpec("scripted", scripted_cpu_start_gate=str(gate))
    settings = EngineSettings(backend="cpu", memory_budget_bytes=1 << 30, tracing_enabled=False,
                              proof_kinds={"w": ProofKindSettings("w", 2, "critical")})
    built: list[Any] = []
    with two_nodes():
        thread = threading.Thread(
            target=lambda: built.append(cluster_engine(settings, None, spec=spec,
                                                       prefix="start-")),
            name="build-head", daemon=True)
        thread.start()
        try:
            yield thread, built, gate
        finally:
            gate.touch()
            thread.join(150)
            for engine in built:
                engine.shutdown(timeout=10)
                for a in engine.prover.actors():
                    ray.kill(a.handle, no_restart=True)


def test_ready_before_cpu_workers_answer_and_synthesis_waits_for_one(held_cpu_workers):
    """The head is built and ready (a GPU worker answers) while no CPU worker has answered; a
    job's partition asks for a CPU worker and waits, it does not fail; once the CPU workers
    answer, the job succeeds with no retry."""
    thread, built, gate = held_cpu_workers
    thread.join(BUILD_BOUND_S)
    assert built, (f"the head was not built within {BUILD_BOUND_S:g} s while its CPU workers "
                   "were held at their start: it waits for CPU workers to be ready")
    engine = built[0]
    executor = engine.prover
    engine.start()
    assert engine.readiness() is None  # what /readyz answers: ready
    assert executor.cpu_slots() == 0  # no CPU worker has answered yet
    assert executor.cpu_capacity() == 2  # node A's and node B's, still starting
    assert engine.settings.synthesis_threads >= 2  # sized for the workers on their way

    asked = threading.Event()
    take_cpu = executor._take_cpu

    def asking(*args: Any, **kwargs: Any) -> Any:
        asked.set()
        return take_cpu(*args, **kwargs)

    executor._take_cpu = asking
    job = engine.submit("w", [{"tag": "a"}, {"tag": "b"}])
    assert asked.wait(60), "no partition asked for a CPU worker"
    assert executor.cpu_slots() == 0 and not gate.exists()
    assert not engine.get(job.id).terminal, engine.get(job.id).error  # it waits

    gate.touch()  # the CPU workers' processes may finish starting now
    done = engine.wait(job.id, JOB_BOUND_S)
    assert done.outcome == "succeeded", done.error
    assert sorted(tuple(public) for _, public in done.view().proofs or ()) == [("a",), ("b",)]
    assert sum(engine.snapshot().partition_retries.values()) == 0
    assert executor.wait_for_cpu_workers(JOB_BOUND_S) and executor.cpu_slots() == 2
