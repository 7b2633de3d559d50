"""Deadline work is not promised while no GPU can take it (issue 27: three critical
winning-posts expired at cluster start while the nodes registered).

A backend whose ``gpu_unavailable`` names a reason (a cluster head before its GPU node joins,
or with each refused) makes the engine not ready, refuses a deadline job of a ``reject`` kind
with 503 and Retry-After, admits one of another kind at risk, and queues work without a
deadline; once a GPU is there, all of it runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from cuzk.engine.settings import ProofKindSettings
from cuzk.errors import Unavailable
from cuzk.simulated_prover import ScriptedProver
from tests._doubles import make_test_engine

WHY = "no GPU worker: no node with a usable GPU has joined the cluster (1 node(s) joined)"


class _GpuLater(ScriptedProver):
    """A scripted prover whose GPU is not there until ``joined()``; no GPU phase starts before."""

    def __init__(self) -> None:
        super().__init__()
        self.why: str | None = WHY

    def gpu_unavailable(self) -> str | None:
        return self.why

    def device_ready(self, device: str, timeout: float) -> bool:
        if self.why is not None:
            time.sleep(min(timeout, 0.01))  # as a cluster slot waits for its worker
        return self.why is None

    def joined(self) -> None:
        self.why = None


KINDS: dict[str, Any] = {
    "winning-post": ProofKindSettings("winning-post", 1, "critical", deadline_s=30.0,
                                      deadline_admission="reject", on_deadline_miss="cancel"),
    "window-post": ProofKindSettings("window-post", 1, "high", deadline_s=30.0),
    "porep-c2": ProofKindSettings("porep-c2", 2, "normal"),
}


@pytest.fixture
def head() -> Iterator[tuple[Any, _GpuLater]]:
    engine, prover, _ = make_test_engine(KINDS, prover=_GpuLater(), backend="cpu")
    engine.start()
    try:
        yield engine, prover
    finally:
        engine.shutdown(timeout=5)


def test_no_gpu_is_not_ready_and_refuses_deadline_work_of_a_reject_kind(head):
    engine, prover = head
    assert engine.readiness() == WHY
    assert engine.status()["not_ready"] == WHY
    with pytest.raises(Unavailable) as refused:
        engine.submit("winning-post", [{"tag": "w"}])
    assert WHY in str(refused.value) and refused.value.retry_after
    assert engine.snapshot().jobs_rejected.get(("winning-post", "unavailable")) == 1

    at_risk = engine.submit("window-post", [{"tag": "h"}])  # admitted, flagged at risk
    assert at_risk.admitted_at_risk
    plain = engine.submit("porep-c2", [{"tag": "a"}, {"tag": "b"}])  # no deadline: queued
    assert not plain.admitted_at_risk

    prover.joined()
    assert engine.readiness() is None and engine.status()["not_ready"] is None
    crit = engine.submit("winning-post", [{"tag": "w2"}])
    for job in (at_risk, plain, crit):
        assert engine.wait(job.id, 30).outcome == "succeeded"
