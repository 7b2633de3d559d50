"""Regressions from issue 9: budgets where every partition fits alone but the engine used to hang.

The figures are the bundled circuits' real ones on the CPU backend (proving key host bytes and a
partition's working memory), so the scripted engine meets the same arithmetic as `cuzk serve`.
Every wait is bounded; on the old code each of these tests failed (hung until its bound).
"""

from __future__ import annotations

import time

import pytest

from cuzk.engine.backend import PartitionMemory
from cuzk.errors import MemoryRequestTooLarge
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import make_test_engine, wait_until

# (key host bytes, partition bytes, abc bytes): measured from the bundled keys (backend cpu).
FIGURES = {
    "porep-c2": (16_941_053, 10_002_508, 3_145_728),
    "window-post": (8_844_415, 5_034_630, 1_572_864),
    "winning-post": (2_459_449, 1_287_641, 393_216),
}
KINDS = {"porep-c2": (10, "normal"), "window-post": (1, "high"), "winning-post": (1, "critical")}
BOUND_S = 20.0  # generous on a loaded 2-core CI machine; the fixed engine takes well under 1 s


def _engine(budget: int):
    kinds = {
        name: ScriptedKind(host_bytes=key, estimate=PartitionMemory(part, abc, 0))
        for name, (key, part, abc) in FIGURES.items()
    }
    engine, prover, _ = make_test_engine(
        KINDS, ScriptedProver(kinds), memory_budget_bytes=budget, synthesis_threads=2)
    return engine.start(), prover


def _inputs(kind: str) -> list[dict]:
    return [{"tag": f"{kind}-{i}"} for i in range(KINDS[kind][0])]


@pytest.fixture
def engines():
    made = []

    def make(budget: int):
        engine, prover = _engine(budget)
        made.append(engine)
        return engine, prover

    yield make
    for e in made:
        e.shutdown(5)


def test_need_larger_than_budget_is_refused_at_submit_naming_the_figures(engines):
    """Budget 20,000,000: key 16.9 MB + partition 10.0 MB each fit alone, not together. It used to
    be accepted and wait forever with two memory waiters; now submit refuses it at once."""
    engine, _ = engines(20_000_000)
    with pytest.raises(MemoryRequestTooLarge) as err:
        engine.submit("porep-c2", _inputs("porep-c2"))
    msg = str(err.value)
    for figure in ("16941053", "10002508", "26943561", "20000000"):
        assert figure in msg, msg
    assert "porep-c2" in msg
    assert engine.jobs() == [] and engine.host_budget.waiters == 0
    # Nothing changed: a kind that fits still runs.
    job = engine.submit("winning-post", _inputs("winning-post"))
    assert engine.wait(job.id, BOUND_S).state == "succeeded"


def test_two_kinds_never_wait_on_each_other(engines):
    """Budget 28,000,000: porep-c2 then window-post. Each kind used to pin its key while waiting
    for partition memory, so both stuck with 0 partition bytes reserved and idle workers."""
    engine, prover = engines(28_000_000)
    t0 = time.monotonic()
    # The order `cuzk serve` met: partition 0 synthesizes while partition 1 waits for memory
    # and window-post queues behind them; then window-post's key loads beside porep's.
    gate = prover.hold("synthesize", "porep-c2-0")
    porep = engine.submit("porep-c2", _inputs("porep-c2"))
    assert gate.wait_entered(BOUND_S)
    window = engine.submit("window-post", _inputs("window-post"))
    assert wait_until(lambda: engine.host_budget.waiters >= 1, BOUND_S)
    gate.release()
    assert engine.wait(window.id, BOUND_S).state == "succeeded"
    assert engine.wait(porep.id, BOUND_S).state == "succeeded"
    assert time.monotonic() - t0 < BOUND_S
    assert wait_until(engine.quiescent, 5)
    assert engine.host_budget.reserved == sum(r.held for r in engine.host_budget.live())
    assert engine.host_budget.reserved <= 28_000_000


def test_critical_job_is_not_held_behind_a_porep_that_cannot_fit(engines):
    """Budget 22,000,000: porep-c2 (26.9 MB) can never run; a critical winning-post behind it
    used to never start. Now porep-c2 is refused and winning-post completes at once."""
    engine, _ = engines(22_000_000)
    with pytest.raises(MemoryRequestTooLarge):
        engine.submit("porep-c2", _inputs("porep-c2"))
    win = engine.submit("winning-post", _inputs("winning-post"))
    assert engine.wait(win.id, BOUND_S).state == "succeeded"


def test_critical_job_overtakes_a_running_porep_backlog(engines):
    """Budget 28,000,000: porep-c2 fits (one partition at a time), winning-post needs porep's key
    evicted. The critical job must run as soon as the partition in flight is done, before the
    rest of the porep backlog, not after it (and the porep job must still finish)."""
    engine, prover = engines(28_000_000)
    gate = prover.hold("synthesize", "porep-c2-0")
    porep = engine.submit("porep-c2", _inputs("porep-c2"))
    assert gate.wait_entered(BOUND_S)
    win = engine.submit("winning-post", _inputs("winning-post"))
    assert wait_until(lambda: engine.host_budget.waiters >= 1, BOUND_S)
    gate.release()
    assert engine.wait(win.id, BOUND_S).state == "succeeded"
    done_porep = sum(1 for p in porep.partitions if p.outcome == "done")
    assert done_porep < 10, "winning-post waited for the whole porep backlog"
    assert engine.wait(porep.id, BOUND_S).state == "succeeded"
    assert wait_until(engine.quiescent, 5)


def test_two_kinds_never_wait_on_each_other_on_a_device():
    """GPU backend: both keys resident on the device leave no room for either kind's GPU
    working set. A grant only pins a key when the pinned keys plus the largest working set
    still fit the device, so the kinds take turns instead of waiting on each other."""
    kinds = {
        "a": ScriptedKind(host_bytes=100, device_bytes=400, estimate=PartitionMemory(50, 10, 300)),
        "b": ScriptedKind(host_bytes=100, device_bytes=400, estimate=PartitionMemory(50, 10, 300)),
    }
    prover = ScriptedProver(kinds, devices=("cuda:0",), name="cuda", device_memory=10_000)
    engine, prover, _ = make_test_engine(
        {"a": (3, "normal"), "b": (3, "normal")}, prover, memory_budget_bytes=100_000,
        device_memory_budget_bytes=1_000, synthesis_threads=2)
    engine.start()
    try:
        jobs = [engine.submit(k, [{"tag": f"{k}{i}"} for i in range(3)]) for k in ("a", "b")]
        for job in jobs:
            assert engine.wait(job.id, BOUND_S).state == "succeeded", job.state
        assert wait_until(engine.quiescent, 5)
        device = engine.device_budgets["cuda:0"]
        assert device.reserved <= 1_000 and device.waiters == 0
        assert prover.misuse == []
    finally:
        engine.shutdown(5)
