"""Key residency races, forced deterministically with gates on the scripted prover's steps.

The scripted prover records every key it loads and unloads and flags a step given a key that
was already unloaded, or a key unloaded twice (``prover.misuse``).
"""

from __future__ import annotations

import threading

import pytest

from cuzk.engine.backend import PartitionMemory
from cuzk.engine.keys import KeyResidency
from cuzk.engine.memory import MemoryBudget
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import make_test_engine, wait_until

BOUND_S = 10.0


def _residency(total: int, kinds: dict[str, ScriptedKind]):
    prover = ScriptedProver(kinds)
    budget = MemoryBudget(total)
    return KeyResidency(prover, budget, {}), budget, prover


def _in_thread(fn):
    out: list = []
    errors: list = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # pragma: no cover - asserted by the caller
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out, errors


def test_deferred_eviction_never_unloads_a_key_someone_pins_again():
    """The last user unpins while another partition asks for the key: the claim to evict and
    the pin are decided under one lock, so the new user gets a fresh load, never the key being
    unloaded, and the old key is unloaded exactly once."""
    keys, budget, prover = _residency(10_000, {"a": ScriptedKind(host_bytes=600)})
    first = keys.acquire("a")
    assert keys.evict("a") == "deferred"
    unload = prover.hold("unload_key", "a")
    t1, _, err1 = _in_thread(lambda: keys.release(first))  # the last user: eviction goes now
    assert unload.wait_entered(BOUND_S)
    assert not keys.is_resident("a")  # claimed: nobody can pin it any more
    t2, got, err2 = _in_thread(lambda: keys.acquire("a"))
    # The reload waits for the unload of the same kind (load/unload are serialised per kind).
    assert not wait_until(lambda: prover.calls["load_key"] == 2, 0.2)
    unload.release()
    t1.join(BOUND_S)
    t2.join(BOUND_S)
    assert not err1 and not err2 and got
    second = got[0]
    assert second is not first and second.handle.key is not first.handle.key
    assert prover.events.index(("unload_key", "end", "a")) < max(
        i for i, e in enumerate(prover.events) if e == ("load_key", "start", "a"))
    assert prover.unloads == 1 and prover.misuse == []
    assert first.state == "gone" and first.host_bytes == 0
    keys.release(second)
    assert budget.reserved == 600 == sum(r.held for r in budget.live())


def test_eviction_racing_a_reload_unloads_the_old_key_exactly_once():
    """Room for one key: b evicts idle a while a partition of a asks again. The old a key is
    unloaded (once) even though a new a key takes its place in the table."""
    keys, budget, prover = _residency(1_000, {"a": ScriptedKind(host_bytes=600),
                                              "b": ScriptedKind(host_bytes=600)})
    keys.preload("a")
    old_a = keys.resident()[0]
    unload = prover.hold("unload_key", "a")
    tb, got_b, err_b = _in_thread(lambda: keys.acquire("b"))
    assert unload.wait_entered(BOUND_S)  # a claimed for b, its unload held
    assert budget.reserved == 600  # a's bytes are not given back before it is unloaded
    ta, got_a, err_a = _in_thread(lambda: keys.acquire("a", "low"))  # queued behind b
    assert wait_until(lambda: budget.waiters == 2, BOUND_S)
    unload.release()
    tb.join(BOUND_S)
    assert got_b and not err_b
    assert ta.is_alive() and budget.waiters == 1  # a waits for b's user
    keys.release(got_b[0])  # b idle: a (re)loads by evicting it
    ta.join(BOUND_S)
    assert got_a and not err_a
    new_a = got_a[0]
    assert new_a is not old_a and old_a.state == "gone"
    assert prover.unloads == 2  # old a, then b: each once
    assert prover.misuse == [] and prover.live_keys() == 1
    keys.release(new_a)
    assert budget.reserved == 600 and budget.evictions == 2


def test_a_key_in_use_is_unloaded_only_after_its_last_partition_is_done():
    """An operator evicts a key while a partition synthesizes with it: 'deferred'; the
    partition proves and finalizes with a live key, then the key is unloaded once."""
    engine, prover, _ = make_test_engine({"k": (2, "normal")})
    engine.start()
    try:
        gate = prover.hold("synthesize", "p0")
        job = engine.submit("k", [{"tag": "p0"}, {"tag": "p1"}])
        assert gate.wait_entered(BOUND_S)
        assert engine.evict("k")["result"] == "deferred"
        gate.release()
        assert engine.wait(job.id, BOUND_S).state == "succeeded"
        assert wait_until(lambda: prover.unloads == 1, BOUND_S)
        assert prover.misuse == []
        last_finalize = max(i for i, e in enumerate(prover.events) if e[:2] == ("finalize", "end"))
        assert prover.events.index(("unload_key", "start", "k")) > last_finalize
        assert not engine.keys.is_resident("k")
        assert engine.host_budget.reserved == 0
    finally:
        engine.shutdown(5)


def test_failed_load_releases_the_key_bytes_and_fails_every_partition_waiting_on_it():
    engine, prover, _ = make_test_engine({"k": (3, "normal")}, synthesis_threads=2)
    engine.start()
    try:
        load = prover.hold("load_key", "k")
        prover.fail("load_key", "k", OSError("zkey unreadable"))
        job = engine.submit("k", [{"tag": f"p{i}"} for i in range(3)])
        assert load.wait_entered(BOUND_S)
        load.release()
        assert engine.wait(job.id, BOUND_S).state == "failed"
        assert "zkey unreadable" in job.error
        assert wait_until(engine.quiescent, BOUND_S)
        # The failed slot's bytes are gone; a partition that came later may have loaded the
        # key again (that one load succeeds) and left it resident and idle: nothing else holds.
        budget = engine.host_budget
        assert budget.waiters == 0 and budget.reserved_by_consumer().get("partition", 0) == 0
        assert budget.reserved == sum(k.host_bytes for k in engine.keys.resident())
        assert all(r.owner.state == "resident" for r in budget.live())
        assert prover.unloads == 0 and prover.misuse == []
        retry = engine.submit("k", [{"tag": f"q{i}"} for i in range(3)])
        assert engine.wait(retry.id, BOUND_S).state == "succeeded"
    finally:
        engine.shutdown(5)


@pytest.mark.parametrize("hint_partition", [True, False], ids=["hinted", "unhinted"])
def test_key_larger_than_its_hint_queues_again_instead_of_waiting_while_holding(
    hint_partition: bool,
):
    """The loaded key is bigger than hinted and the extra does not fit beside another kind's
    partition: the partition gives everything back, queues with the exact figure, and runs."""
    kinds = {
        "big": ScriptedKind(host_bytes=500, loaded_host_bytes=700,
                            estimate=PartitionMemory(200, 50, 0), hint_partition=hint_partition),
        "other": ScriptedKind(host_bytes=100, estimate=PartitionMemory(100, 10, 0)),
    }
    engine, prover, _ = make_test_engine(
        {"big": (2, "normal"), "other": (1, "high")}, ScriptedProver(kinds),
        memory_budget_bytes=1_000, synthesis_threads=2)
    engine.start()
    try:
        gate = prover.hold("synthesize", "o")
        other = engine.submit("other", [{"tag": "o"}])
        assert gate.wait_entered(BOUND_S)  # other holds key 100 + partition 100
        big = engine.submit("big", [{"tag": "b0"}, {"tag": "b1"}])
        assert wait_until(lambda: prover.calls["load_key"] >= 2, BOUND_S)
        gate.release()
        assert engine.wait(other.id, BOUND_S).state == "succeeded"
        assert engine.wait(big.id, BOUND_S).state == "succeeded"
        assert engine.keys.need("big").key_host == 700 and engine.keys.need("big").exact
        assert prover.misuse == []
        assert wait_until(engine.quiescent, BOUND_S)
        assert engine.host_budget.reserved <= 1_000
    finally:
        engine.shutdown(5)


def test_refused_when_the_key_turns_out_too_large_after_its_first_load():
    """A hint said it fits; the loaded key says it never can: the job fails naming the
    figures, and the next submit is refused up front."""
    from cuzk.errors import PartitionTooLarge

    kinds = {"big": ScriptedKind(host_bytes=500, loaded_host_bytes=950,
                                 estimate=PartitionMemory(200, 50, 0))}
    engine, _, _ = make_test_engine({"big": (1, "normal")}, ScriptedProver(kinds),
                                    memory_budget_bytes=1_000)
    engine.start()
    try:
        job = engine.submit("big", [{"tag": "b"}])
        assert engine.wait(job.id, BOUND_S).state == "failed"
        assert "950" in job.error and "200" in job.error and "1000" in job.error
        with pytest.raises(PartitionTooLarge, match="proving key 950"):
            engine.submit("big", [{"tag": "b"}])
        assert wait_until(engine.quiescent, BOUND_S)
        assert engine.host_budget.reserved == 0
    finally:
        engine.shutdown(5)
