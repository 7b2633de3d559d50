"""Property: with a scripted prover, every job whose partition fits the budget completes, and
the budget's ledger is right at every step, whatever the budget, sizes, kinds and order.

Liveness: each accepted job succeeds within a bound, with each partition synthesized once and
no more key loads than partitions. Refusal: a job is refused at submit exactly when one
partition's key plus working memory exceed the whole budget. Safety, checked under the
budget's lock after every change: reserved <= budget and reserved == the sum of the live
reservations.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cuzk.engine.backend import PartitionMemory
from cuzk.engine.memory import MemoryBudget
from cuzk.errors import PartitionTooLarge
from cuzk.protocol import PRIORITIES
from cuzk.simulated_prover import ScriptedKind, ScriptedProver
from tests._doubles import make_test_engine, wait_until

BOUND_S = 20.0

kind_st = st.tuples(
    st.integers(1, 600),  # key host bytes
    st.integers(1, 600),  # partition working bytes
    st.integers(1, 3),  # partitions per job
)


@st.composite
def scenarios(draw):
    kinds = draw(st.lists(kind_st, min_size=1, max_size=3))
    needs = [key + part for key, part, _ in kinds]
    # From what only the smallest kind fits to room for every key and partition at once.
    budget = draw(st.integers(min(needs), max(sum(needs), min(needs) + 1)))
    jobs = draw(st.lists(
        st.tuples(st.integers(0, len(kinds) - 1), st.sampled_from(PRIORITIES)),
        min_size=1, max_size=8))
    threads = draw(st.integers(1, 3))
    return kinds, budget, jobs, threads


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_job_that_fits_completes_and_the_ledger_is_always_right(scenario):
    kinds, total, jobs, threads = scenario
    scripted = {
        f"k{i}": ScriptedKind(host_bytes=key, estimate=PartitionMemory(part, part // 3, 0))
        for i, (key, part, _) in enumerate(kinds)
    }
    engine, prover, _ = make_test_engine(
        {f"k{i}": (n, "normal") for i, (_, _, n) in enumerate(kinds)},
        ScriptedProver(scripted), memory_budget_bytes=total, synthesis_threads=threads,
        finalizer_threads=threads, tracing_enabled=False, metrics_enabled=False)
    violations: list[str] = []
    peak = [0]

    def check(b: MemoryBudget) -> None:  # under the budget's lock
        live = sum(r.held for r in b._live.values())
        peak[0] = max(peak[0], b._reserved)
        if b._reserved > b.total or b._reserved != live or b._reserved < 0:
            violations.append(f"reserved {b._reserved}, live {live}, budget {b.total}")

    engine.host_budget.on_change = check
    engine.start()
    try:
        accepted = []
        for i, (k, prio) in enumerate(jobs):
            key, part, n = kinds[k]
            inputs = [{"tag": f"j{i}p{j}"} for j in range(n)]
            if key + part > total:
                try:
                    engine.submit(f"k{k}", inputs, priority=prio)
                except PartitionTooLarge:
                    continue
                raise AssertionError(f"k{k} needs {key + part} > {total} but was accepted")
            accepted.append(engine.submit(f"k{k}", inputs, priority=prio))
        for job in accepted:
            assert engine.wait(job.id, BOUND_S).state == "succeeded", (job.state, job.error)
        partitions = sum(len(j.partitions) for j in accepted)
        # Each partition once, plus once more for each one preempted after its synthesis (a
        # higher class took its memory: cuzk.engine.pipeline._make_room).
        preempted = sum(engine.counters.get("synthesis_preempted").values())
        assert partitions <= prover.calls["synthesize"] <= partitions + preempted
        assert prover.calls["load_key"] <= partitions
        assert wait_until(engine.quiescent, BOUND_S)
        assert engine.host_budget.waiters == 0
        assert violations == [], violations[:3]
        assert prover.misuse == []
        assert peak[0] <= total
        event(f"evicted keys: {engine.host_budget.evictions > 0}")
        event(f"refused jobs: {len(accepted) < len(jobs)}")
    finally:
        engine.shutdown(5)
    assert prover.live_keys() == 0  # shutdown unloaded every key, each once
