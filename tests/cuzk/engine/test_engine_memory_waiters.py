"""A memory waiter is shown with what it would take now (issue 27): its working memory, plus its
kind's proving key only while that key has no slot. Before, a waiter behind the head kept the
size it was queued with, key included, after its kind's key had become resident."""

from __future__ import annotations

from tests._doubles import make_test_engine, wait_until

KEY, WORK = 1_000, 100  # the scripted kind's key and one partition's working memory


def test_waiters_need_their_key_only_while_their_kind_has_none():
    engine, prover, _ = make_test_engine(
        {"trio": (3, "normal"), "other": (1, "normal")}, synthesis_threads=4,
        finalizer_threads=1, memory_budget_bytes=KEY + WORK)
    gate = prover.hold("synthesize")  # the first partition keeps its grant: the budget is full
    with engine:
        trio = engine.submit("trio", [{"tag": str(i)} for i in range(3)])
        assert gate.wait_entered()
        other = engine.submit("other", [{"tag": "o"}])
        assert wait_until(lambda: len(engine.snapshot().memory.waiters) == 3, 5)
        waiters = engine.snapshot().memory.waiters
        seen = sorted((w.proof_kind, w.nbytes, w.key_bytes) for w in waiters)
        # trio's key is resident (pinned by the partition synthesizing): 100 bytes each, the
        # one behind the head included; other's key has no slot: key and working memory.
        assert seen == [("other", KEY + WORK, KEY), ("trio", WORK, 0), ("trio", WORK, 0)]
        wire = engine.status()["memory"]["waiters"]
        assert sorted((w["bytes"], w["key_bytes"]) for w in wire) == [
            (WORK, 0), (WORK, 0), (KEY + WORK, KEY)]
        gate.release()
        assert engine.wait(trio.id, 10).state == "succeeded"
        assert engine.wait(other.id, 10).state == "succeeded"
