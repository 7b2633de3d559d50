"""What a job runs now, as ``cuzk submit``/``get --wait`` and ``cuzk status`` show it: the
first partition in flight, its phase and the prover's step."""

from __future__ import annotations

from typing import Any

from cuzk.cli._output import now_running
from cuzk.cli.submit import activity


def _part(index: int, phase: str, step: str | None = None) -> dict[str, Any]:
    return {"index": index, "phase": phase, "phase_ms": {}, "worker": None, "error": None,
            "step": step}


def test_the_first_partition_in_flight_with_its_step() -> None:
    job = {"state": "running", "partitions": [
        _part(0, "done"), _part(1, "queued_synthesis"), _part(2, "proving", "MSM B1 done, 2/5"),
        _part(3, "synthesizing", "witness")]}
    assert now_running(job) == "p2 proving: MSM B1 done, 2/5 (+1 in flight)"
    assert activity(job) == "running · p2 proving: MSM B1 done, 2/5 (+1 in flight)"


def test_nothing_in_flight_shows_the_state_alone() -> None:
    queued = {"state": "queued", "partitions": [_part(0, "queued_synthesis")]}
    assert now_running(queued) == "" and activity(queued) == "queued"
    done = {"state": "succeeded", "partitions": [_part(0, "done")]}
    assert activity(done) == "succeeded"
    older = {"state": "running", "partitions": [{"index": 0, "phase": "finalizing"}]}
    assert now_running(older) == "p0 finalizing"  # a server without steps
