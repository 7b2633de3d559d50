"""The prover's runtime (the real prover's wasm runtime, once per process) is a fixed
reservation of the host budget (issue 27): held from the start, shown by consumer, never
evicted, and left out of what a kind may ever use."""

from __future__ import annotations

import pytest

from cuzk.engine.backend import PartitionMemory
from cuzk.engine.memory import RUNTIME_CONSUMER
from cuzk.errors import MemoryRequestTooLarge, PartitionTooLarge
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import make_test_engine, wait_until

BOUND_S = 10.0
RUNTIME = 300


class _WithRuntime(ScriptedProver):
    def runtime_host_bytes(self) -> int:
        return RUNTIME


def _engine(budget: int, key: int = 500, working: int = 100):
    kinds = {"k": ScriptedKind(host_bytes=key, estimate=PartitionMemory(working, 10, 0))}
    engine, prover, _ = make_test_engine(
        {"k": (1, "normal")}, _WithRuntime(kinds), memory_budget_bytes=budget
    )
    return engine, prover


def test_the_runtime_is_held_from_the_start_beside_the_keys_and_partitions() -> None:
    engine, _ = _engine(RUNTIME + 500 + 100)  # exactly the runtime, one key, one partition
    assert engine.snapshot().memory.reserved_by_consumer == {RUNTIME_CONSUMER: RUNTIME}
    engine.start()
    try:
        job = engine.submit("k", [{"tag": "a"}])
        assert engine.wait(job.id, BOUND_S).state == "succeeded"
        assert wait_until(engine.quiescent, BOUND_S)
        engine.keys.evict_all()  # operators evict keys; the runtime stays
        assert engine.snapshot().memory.reserved_by_consumer == {RUNTIME_CONSUMER: RUNTIME}
    finally:
        engine.shutdown(5)
    assert engine.host_budget.reserved == RUNTIME


def test_a_kind_that_fits_the_budget_but_not_beside_the_runtime_is_refused_at_submit() -> None:
    """It would otherwise be admitted and wait for ever for bytes the runtime never gives back."""
    engine, _ = _engine(RUNTIME + 500 + 100 - 1)
    engine.start()
    try:
        with pytest.raises(PartitionTooLarge, match=f"{RUNTIME} of them held for the prover"):
            engine.submit("k", [{"tag": "a"}])
        assert not engine.snapshot().jobs
    finally:
        engine.shutdown(5)


def test_a_budget_smaller_than_the_runtime_is_refused_at_start() -> None:
    with pytest.raises(MemoryRequestTooLarge, match=RUNTIME_CONSUMER):
        _engine(RUNTIME - 1)
