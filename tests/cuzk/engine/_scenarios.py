"""Engine scenarios more than one test module drives (each module asserts what it is about)."""

from __future__ import annotations

import time
from typing import Any

from cuzk.engine.jobs import Job
from cuzk.engine.settings import ProofKindSettings
from tests._doubles import make_test_engine, wait_until


def give_way_engine() -> tuple[Any, Any, Any]:
    """An engine with one synthesis thread and memory for one partition beside two keys."""
    return make_test_engine(
        {k: ProofKindSettings(k, 1, "normal") for k in ("held", "far", "near")},
        memory_budget_bytes=2 * 1000 + 100, synthesis_threads=1)


def run_give_way(engine: Any) -> list[Job]:
    """On a started ``give_way_engine``: "held" takes the memory and parks in the paused GPU
    queue; "far" waits for memory on the only synthesis thread; "near" (an earlier deadline of
    the same class) arrives, so "far" gives its thread way (``_requeue``). Workers resume; the
    three jobs (held, far, near) are returned once all succeeded."""
    for k in ("held", "far"):  # no idle key to evict for far's partition: it waits
        engine.preload(k)
    engine.pause_workers()
    now = time.time()
    jobs = [engine.submit("held", [{"tag": "h"}], deadline=now + 120)]  # holds the memory
    assert wait_until(lambda: len(engine.pipeline.gpu_queue) == 1)
    jobs.append(engine.submit("far", [{"tag": "f"}], deadline=now + 90))
    assert wait_until(lambda: engine.host_budget.waiters == 1)
    jobs.append(engine.submit("near", [{"tag": "n"}], deadline=now + 60))
    assert wait_until(lambda: engine.counters.get("synthesis_preempted").get("far", 0) == 1)
    engine.resume_workers()
    for job in jobs:
        assert engine.wait(job.id, 10).state == "succeeded"
    return jobs
