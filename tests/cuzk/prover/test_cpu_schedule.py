"""The CPU prover's whole-MSM schedule: longest first, late tasks joining the queue, the last
task split among idle workers, errors reaching the caller; and the scheduled proof path."""

from __future__ import annotations

import threading

import pytest

from cuzk.prover.cpu_schedule import LongestFirst, Task

BOUND_S = 30.0  # generous: a loaded machine only delays, never reorders


def _wait_for(predicate) -> None:
    done = threading.Event()
    for _ in range(int(BOUND_S / 0.05)):
        if predicate():
            return
        done.wait(0.05)
    raise AssertionError("condition not reached within the bound")


def test_one_worker_runs_the_costliest_queued_task_first():
    gate, holding = threading.Event(), threading.Event()
    pool = LongestFirst(1)

    def hold(threads: int) -> None:
        holding.set()
        gate.wait(BOUND_S)

    pool.add(Task("first", 0.0, hold))
    _wait_for(holding.is_set)  # the worker is busy: the rest queue up
    for name, cost in (("A", 2.0), ("B2", 9.0), ("C", 5.0), ("B1", 1.0)):
        pool.add(Task(name, cost, lambda t, n=name: n))
    pool.add(Task("H", 3.0, lambda t: "H"))
    gate.set()
    results = pool.join()
    assert pool.order == ["first", "B2", "C", "H", "A", "B1"]
    assert results["C"] == "C"


def test_the_last_task_gets_the_idle_workers_as_threads():
    pool = LongestFirst(3)
    _wait_for(lambda: pool.idle == 3)
    pool.add(Task("H", 1.0, lambda t: t), last=True)
    assert pool.join() == {"H": 3}


def test_a_task_added_while_others_run_gets_one_thread():
    gate, holding = threading.Event(), threading.Event()
    pool = LongestFirst(2)

    def hold(threads: int) -> int:
        holding.set()
        gate.wait(BOUND_S)
        return threads

    pool.add(Task("B2", 9.0, hold))
    _wait_for(holding.is_set)
    pool.add(Task("C", 1.0, lambda t: t))  # not last: the pool stays open
    _wait_for(lambda: "C" in pool.results)
    gate.set()
    assert pool.join() == {"B2": 1, "C": 1}


def test_a_failing_task_raises_in_join_and_the_others_finish():
    pool = LongestFirst(2)
    pool.add(Task("bad", 5.0, lambda t: 1 / 0))
    pool.add(Task("good", 1.0, lambda t: "ok"))
    with pytest.raises(ZeroDivisionError):
        pool.join()
    assert pool.results == {"good": "ok"}


def test_scheduled_proof_verifies_and_matches_the_sequential_msms(bundled):
    from cuzk.prover import CpuBackend, finalize, gpu_phase, synthesize

    b = bundled("winning-post")
    backend = CpuBackend(workers=2)
    assert backend.scheduled()
    s = synthesize(b.key, b.circuit, b.inputs)
    out = gpu_phase(b.key, s, backend)
    w = s.witness
    assert out.b2 == b.key.msm_b2(w)
    assert out.a == b.key.msm_g1("A", w)
    assert out.c == b.key.msm_g1("C", w[b.key.sizes.n_public + 1 :])
    assert finalize(b.key, s, out).verified
