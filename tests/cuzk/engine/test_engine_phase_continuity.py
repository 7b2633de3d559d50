"""Phase continuity: every hand-off opens the next phase scope before it closes the current one,
so an unsettled partition always has an open scope (it never reads as ``queued_synthesis``
between phases) and its phase only moves forward. The scopes are instrumented: each time one
opens or closes, the partition's phase is read at once (no sampling that could miss a gap)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from cuzk.engine.jobs import Partition
from tests._doubles import make_test_engine

ORDER = {"queued_synthesis": 0, "synthesizing": 1, "waiting_memory": 1, "queued_gpu": 2,
         "proving": 3, "finalizing": 4}
KINDS = {"porep-c2": (3, "normal"), "winning-post": (1, "critical")}


def test_a_partition_never_reads_as_an_earlier_phase_nor_queued_between_phases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lock = threading.Lock()
    seen: dict[int, list[str]] = {}
    gaps: list[str] = []
    open_phase, close_scope = Partition.open_phase, Partition._close_scope

    def record(p: Partition, after: str) -> None:
        with p._lock:
            phase, unsettled, empty = p.phase, p.outcome is None, not p._scopes
        with lock:
            seen.setdefault(id(p), []).append(phase)
            if unsettled and empty and after == "close":
                gaps.append(f"job {p.job.id} partition {p.index}: no scope open, unsettled")

    def opening(self: Partition, *args: Any, **kwargs: Any) -> Any:
        scope = open_phase(self, *args, **kwargs)
        record(self, "open")
        return scope

    def closing(self: Partition, *args: Any, **kwargs: Any) -> None:
        close_scope(self, *args, **kwargs)
        record(self, "close")

    monkeypatch.setattr(Partition, "open_phase", opening)
    monkeypatch.setattr(Partition, "_close_scope", closing)

    engine, prover, _ = make_test_engine(
        KINDS, synthesis_threads=2, finalizer_threads=2, memory_budget_bytes=10**12)
    for step in ("synthesize", "gpu", "finalize"):
        prover.delay(step, 0.002)  # hand-offs interleave across threads
    with engine:
        jobs = [engine.submit("porep-c2", [{"tag": f"j{j}p{i}"} for i in range(3)])
                for j in range(4)]
        jobs += [engine.submit("winning-post", [{"tag": f"w{j}"}]) for j in range(4)]
        for job in jobs:
            assert engine.wait(job.id, 30).state == "succeeded"

    assert not gaps, gaps[:5]
    assert len(seen) == 16
    for phases in seen.values():
        active = [ORDER[ph] for ph in phases if ph in ORDER]
        assert active == sorted(active), phases  # never back to an earlier phase
        assert phases[0] == "queued_synthesis" and phases[-1] == "done", phases
        assert {"synthesizing", "queued_gpu", "proving", "finalizing"} <= set(phases), phases
