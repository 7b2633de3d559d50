"""The unified memory budget (docs/design.md section 3) and key eviction through it."""

from __future__ import annotations

import random
import threading
import time

import pytest

from cuzk.engine.keys import KeyResidency
from cuzk.engine.memory import MemoryBudget, ReservationError, auto_budget
from cuzk.errors import MemoryRequestTooLarge
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import wait_until


def test_partial_release_then_context_exit_releases_rest():
    budget = MemoryBudget(1000)
    with budget.reserve(600, "partition") as res:
        res.release(250)  # the a/b/c part after the GPU phase
        assert res.held == 350 and budget.reserved == 350
    assert res.closed and budget.reserved == 0


def test_release_twice_or_more_than_held_raises():
    budget = MemoryBudget(1000)
    res = budget.reserve(100, "partition")
    with pytest.raises(ReservationError):
        res.release(101)
    res.release()
    with pytest.raises(ReservationError):
        res.release()
    with pytest.raises(ReservationError):
        res.release(0)
    assert budget.reserved == 0


def test_request_larger_than_budget_fails_at_once():
    budget = MemoryBudget(1000)
    t0 = time.monotonic()
    with pytest.raises(MemoryRequestTooLarge, match=r"1001 bytes.*1000 bytes"):
        budget.reserve(1001, "partition")
    assert time.monotonic() - t0 < 0.5 and budget.waiters == 0


def test_auto_budget_reads_memtotal(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384000 kB\nMemFree: 1 kB\n")
    assert auto_budget(1 << 30, str(meminfo)) == 16384000 * 1024 - (1 << 30)


def test_timeout_withdraws_waiter_and_lets_next_in():
    budget = MemoryBudget(100)
    held = budget.reserve(80, "a")
    with pytest.raises(TimeoutError):
        budget.reserve(50, "big", timeout=0.05)
    assert budget.waiters == 0
    small = budget.reserve(20, "small", timeout=1)
    held.release()
    small.release()


def test_higher_priority_waiter_goes_first():
    budget = MemoryBudget(100)
    blocker = budget.reserve(100, "blocker")
    order: list[str] = []
    threads = []
    for prio in ("low", "normal", "critical", "high"):
        def take(p: str = prio) -> None:
            with budget.reserve(100, p, priority=p):
                order.append(p)
        t = threading.Thread(target=take)
        t.start()
        threads.append(t)
        n = len(threads)
        assert wait_until(lambda n=n: budget.waiters == n)
    blocker.release()
    for t in threads:
        t.join(5)
    assert order == ["critical", "high", "normal", "low"]


def test_no_lost_wakeups_under_contention():
    budget = MemoryBudget(1000)
    rng = random.Random(7)
    done = []
    errors = []

    def worker(seed: int) -> None:
        r = random.Random(seed)
        try:
            for _ in range(30):
                res = budget.reserve(r.randint(1, 600), "p",
                                     priority=r.choice(["low", "normal", "high"]), timeout=10)
                if r.random() < 0.5:
                    res.release(res.held // 2)
                time.sleep(r.random() * 0.0005)
                res.release()
            done.append(seed)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(rng.random(),)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors and len(done) == 8
    assert budget.reserved == 0 and budget.waiters == 0


def _residency(budget_bytes: int, sizes: dict[str, int]):
    prover = ScriptedProver({k: ScriptedKind(host_bytes=v) for k, v in sizes.items()})
    budget = MemoryBudget(budget_bytes)
    return KeyResidency(prover, budget, {}), budget, prover


def test_idle_keys_evicted_lru_only_when_needed():
    keys, budget, prover = _residency(1000, {"a": 400, "b": 400, "c": 400})
    keys.preload("a")
    keys.preload("b")
    rk = keys.acquire("a")  # a used most recently
    keys.release(rk)
    keys.preload("c")  # needs 400: evicts b (least recently used), not a
    assert {k.proof_kind for k in keys.resident()} == {"a", "c"}
    assert budget.evictions == 1 and budget.evicted_bytes == 400
    assert prover.unloads == 1 and budget.reserved == 800


def test_pinned_keys_are_not_evicted_and_waiter_proceeds_after_unpin():
    keys, budget, _ = _residency(1000, {"a": 600, "b": 600})
    rk = keys.acquire("a")
    got = []
    t = threading.Thread(target=lambda: got.append(keys.acquire("b")))
    t.start()
    assert wait_until(lambda: budget.waiters == 1)
    assert keys.is_resident("a")
    keys.release(rk)  # now idle: the waiter evicts it and proceeds
    t.join(5)
    assert got and not keys.is_resident("a")
    keys.release(got[0])
    assert budget.reserved == 600


def test_waiter_does_not_evict_when_eviction_would_not_be_enough():
    keys, budget, _ = _residency(1000, {"a": 300})
    keys.preload("a")
    other = budget.reserve(600, "partition")
    with pytest.raises(TimeoutError):
        budget.reserve(800, "partition", timeout=0.05)
    assert keys.is_resident("a") and budget.evictions == 0
    other.release()


def test_abort_predicate_withdraws_waiter():
    from cuzk.engine.memory import ReservationAborted

    budget = MemoryBudget(100)
    held = budget.reserve(100, "a")
    flag = threading.Event()
    errors = []

    def wait() -> None:
        try:
            budget.reserve(50, "b", abort=flag.is_set)
        except ReservationAborted as exc:
            errors.append(exc)

    t = threading.Thread(target=wait)
    t.start()
    assert wait_until(lambda: budget.waiters == 1)
    flag.set()
    budget.wake()
    t.join(5)
    assert errors and budget.waiters == 0
    held.release()
