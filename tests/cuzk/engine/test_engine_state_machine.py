"""Hypothesis state machine over lease start/end, finalizer completion, failure and cancel.

It drives the engine's own parts directly (its GPU workers' leases, its host budget, its
partitions' phase scopes and span book) in orders the thread pools would only produce by
chance, and after every step reads the gauges through the engine's Prometheus registry and
the status snapshot. The full pipeline is covered by the stress and regression tests.
"""

from __future__ import annotations

from contextlib import ExitStack

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cuzk.engine.jobs import Job, Partition
from tests._doubles import make_test_engine, metrics_of

N_WORKERS = 3
TOTAL, ABC = 100, 60


class Boom(Exception):
    pass


class LeaseMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.engine, _, _ = make_test_engine(
            {"k": (1, "normal")}, gpu_workers_per_device=N_WORKERS, memory_budget_bytes=10_000)
        self.workers = self.engine.workers
        self.seq = 0
        # model: worker index -> (ExitStack holding the lease, partition, reservation)
        self.leases: dict[int, tuple[ExitStack, Partition, object]] = {}
        self.finalizing: list[tuple[Partition, object]] = []
        self.cancelled: set[int] = set()  # id(job) cancelled while its lease was open
        self.last_busy = [0.0] * N_WORKERS
        self.partitions: list[Partition] = []

    def _new_partition(self) -> Partition:
        self.seq += 1
        job = Job("k", "normal", None, 1, self.seq)
        job.span = self.engine.spans.start("cuzk.job", None)
        p = Partition(job, 0, {"tag": self.seq}, self.engine.spans, None)
        p.span = self.engine.spans.start("cuzk.partition", job.span)
        job.partitions.append(p)
        self.partitions.append(p)
        return p

    def _settle(self, p: Partition, outcome: str, exc: BaseException | None = None) -> None:
        p.settle(outcome, exc)
        self.engine.spans.end(p.job.span)

    @rule(w=st.integers(0, N_WORKERS - 1))
    def start_lease(self, w: int) -> None:
        if w in self.leases:
            return
        p = self._new_partition()
        res = self.engine.host_budget.reserve(TOTAL, "partition")
        stack = ExitStack()
        stack.enter_context(self.workers[w].lease(p.job, p))
        self.leases[w] = (stack, p, res)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def end_lease(self, data: st.DataObject) -> None:
        w = data.draw(st.sampled_from(sorted(self.leases)))
        stack, p, res = self.leases.pop(w)
        res.release(ABC)  # the a/b/c part goes right after the GPU phase
        if id(p.job) in self.cancelled:
            stack.close()
            res.release()
            self._settle(p, "cancelled")
            return
        p.open_phase("finalizing")  # hand-off opens the next phase inside the lease
        stack.close()
        self.finalizing.append((p, res))

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def fail_in_lease(self, data: st.DataObject) -> None:
        w = data.draw(st.sampled_from(sorted(self.leases)))
        stack, p, res = self.leases.pop(w)
        exc = Boom("gpu fault")
        try:
            raise exc
        except Boom:
            assert not stack.__exit__(Boom, exc, exc.__traceback__)
        res.release()
        self._settle(p, "failed", exc)

    @precondition(lambda self: self.finalizing)
    @rule(data=st.data())
    def finalizer_completes(self, data: st.DataObject) -> None:
        """A finalizer finishing (in any order, any time) must not touch any worker."""
        i = data.draw(st.integers(0, len(self.finalizing) - 1))
        p, res = self.finalizing.pop(i)
        res.release()
        self._settle(p, "done")

    @precondition(lambda self: self.finalizing or self.leases)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        if self.finalizing and data.draw(st.booleans()):
            p, res = self.finalizing.pop(data.draw(st.integers(0, len(self.finalizing) - 1)))
            res.release()
            self._settle(p, "cancelled")
        elif self.leases:
            w = data.draw(st.sampled_from(sorted(self.leases)))
            self.cancelled.add(id(self.leases[w][1].job))  # stops at the next boundary

    @invariant()
    def gauges_match_open_leases(self) -> None:
        reg = metrics_of(self.engine).registry
        status = {w["id"]: w for w in self.engine.status()["workers"]}
        for i, worker in enumerate(self.workers):
            labels = {"worker": worker.id, "device": "cpu"}
            held = i in self.leases
            assert reg.get_sample_value("cuzk_gpu_worker_busy", labels) == (1.0 if held else 0.0)
            assert status[worker.id]["state"] == ("proving" if held else "idle")
            if held:
                p = self.leases[i][1]
                assert status[worker.id]["job_id"] == p.job.id
                assert p.phase == "proving"
            busy = reg.get_sample_value("cuzk_gpu_worker_busy_seconds_total", labels)
            assert busy >= self.last_busy[i]
            self.last_busy[i] = busy

    @invariant()
    def budget_equals_live_reservations(self) -> None:
        live = [r for _, _, r in self.leases.values()] + [r for _, r in self.finalizing]
        assert self.engine.host_budget.reserved == sum(r.held for r in live)
        assert metrics_of(self.engine).registry.get_sample_value(
            "cuzk_memory_reserved_bytes", {"consumer": "partition"}) == sum(r.held for r in live)
        for p, _ in self.finalizing:
            assert p.phase == "finalizing"

    def teardown(self) -> None:
        for w in sorted(self.leases):
            stack, p, res = self.leases.pop(w)
            stack.close()
            res.release()
            self._settle(p, "cancelled")
        for p, res in self.finalizing:
            res.release()
            self._settle(p, "done")
        self.finalizing.clear()
        assert all(not w.open_leases() for w in self.workers)
        assert self.engine.host_budget.reserved == 0
        assert self.engine.spans.open_spans() == []
        assert all(p.open_scopes() == [] and p.outcome for p in self.partitions)
        reg = metrics_of(self.engine).registry
        for w in self.workers:
            assert reg.get_sample_value(
                "cuzk_gpu_worker_busy", {"worker": w.id, "device": "cpu"}) == 0.0


LeaseMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None)
TestLeaseMachine = LeaseMachine.TestCase
