"""Phase continuity: every hand-off opens the next phase scope before it closes the current one,
so an unsettled partition always has an open scope (it never reads as ``queued_synthesis``
between phases) and its phase only moves forward. The scopes are instrumented: each time one
opens or closes, the partition's phase is read at once (no sampling that could miss a gap)."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from cuzk.engine.backend import PhaseLost
from cuzk.engine.jobs import Partition
from tests._doubles import make_test_engine
from tests.cuzk.engine._scenarios import give_way_engine, run_give_way

ORDER = {"queued_synthesis": 0, "synthesizing": 1, "waiting_memory": 1, "queued_gpu": 2,
         "proving": 3, "finalizing": 4}
KINDS = {"porep-c2": (3, "normal"), "winning-post": (1, "critical")}


class ScopeRecord:
    """Each partition's phase, read at every scope open and close; the gaps seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[int, list[str]] = {}
        self.gaps: list[str] = []
        self.partitions: dict[int, Partition] = {}

    def record(self, p: Partition, after: str) -> None:
        with p._lock:
            phase, unsettled, empty = p.phase, p.outcome is None, not p._scopes
        with self.lock:
            self.partitions[id(p)] = p
            self.seen.setdefault(id(p), []).append(phase)
            if unsettled and empty and after == "close":
                self.gaps.append(f"job {p.job.id} partition {p.index}: no scope open, unsettled")

    def phases_of(self, tag: str) -> list[str]:
        """The phases the partition whose input ``tag`` is ``tag`` went through, in order."""
        with self.lock:
            return next(self.seen[k] for k, p in self.partitions.items()
                        if p.inputs.get("tag") == tag)


@pytest.fixture
def scopes(monkeypatch: pytest.MonkeyPatch) -> ScopeRecord:
    """Every Partition scope open and close, instrumented."""
    rec = ScopeRecord()
    open_phase, close_scope = Partition.open_phase, Partition._close_scope

    def opening(self: Partition, *args: Any, **kwargs: Any) -> Any:
        scope = open_phase(self, *args, **kwargs)
        rec.record(self, "open")
        return scope

    def closing(self: Partition, *args: Any, **kwargs: Any) -> None:
        close_scope(self, *args, **kwargs)
        rec.record(self, "close")

    monkeypatch.setattr(Partition, "open_phase", opening)
    monkeypatch.setattr(Partition, "_close_scope", closing)
    return rec


def test_a_partition_never_reads_as_an_earlier_phase_nor_queued_between_phases(
    scopes: ScopeRecord,
) -> None:
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

    assert not scopes.gaps, scopes.gaps[:5]
    assert len(scopes.seen) == 16
    for phases in scopes.seen.values():
        # never back to an earlier phase, except a partition whose admission gave its
        # synthesis thread to higher-class work (_requeue), which starts over, counted
        for attempt in _attempts(phases):
            active = [ORDER[ph] for ph in attempt if ph in ORDER]
            assert active == sorted(active), str(phases)
        assert phases[0] == "queued_synthesis" and phases[-1] == "done", phases
        assert {"synthesizing", "queued_gpu", "proving", "finalizing"} <= set(phases), phases
    requeued = sum(len(_attempts(phases)) - 1 for phases in scopes.seen.values())
    assert requeued == sum(engine.counters.get("synthesis_preempted").values())


def _attempts(phases: list[str]) -> list[list[str]]:
    """``phases`` cut where the partition was queued again (queued_synthesis after it had
    left it): each piece is one attempt at the partition."""
    cuts = [i for i in range(1, len(phases))
            if phases[i] == "queued_synthesis" and phases[i - 1] != "queued_synthesis"]
    bounds = [0, *cuts, len(phases)]
    return [phases[a:b] for a, b in itertools.pairwise(bounds)]


def _runs(phases: list[str], *run: str) -> bool:
    """``run`` occurs in ``phases`` as consecutive distinct phases (repeats of one collapsed)."""
    distinct = [ph for i, ph in enumerate(phases) if i == 0 or phases[i - 1] != ph]
    return any(distinct[i:i + len(run)] == list(run) for i in range(len(distinct)))


@pytest.mark.parametrize(("redo", "phase", "back_to"), [
    ("gpu", "gpu", "queued_gpu"),  # the synthesis survived: back to the GPU queue
    ("synthesis", "finalize", "queued_synthesis"),  # the data is gone: from the start
])
def test_a_retried_partition_opens_its_queue_before_closing_the_lost_step(
    scopes: ScopeRecord, redo: str, phase: str, back_to: str,
) -> None:
    engine, prover, _ = make_test_engine({"porep-c2": (2, "normal")})
    lost = PhaseLost(phase, "worker_lost" if redo == "gpu" else "data_lost", redo, "lost")
    prover.fail(phase, "b", lost)
    with engine:
        job = engine.submit("porep-c2", [{"tag": "a"}, {"tag": "b"}])
        assert engine.wait(job.id, 10).state == "succeeded"
    assert not scopes.gaps, scopes.gaps
    lost_phase = {"gpu": "proving", "finalize": "finalizing"}[phase]
    assert _runs(scopes.phases_of("b"), lost_phase, back_to), scopes.phases_of("b")
    assert scopes.phases_of("b")[-1] == "done"


def test_a_partition_that_gives_way_for_memory_is_queued_again_without_a_gap(
    scopes: ScopeRecord,
) -> None:
    """The memory preemption (``_requeue``): the waiting partition's thread goes to higher-class
    work; the partition reads ``queued_synthesis`` at once, never nothing, and its span says so."""
    engine, _, exporter = give_way_engine()
    with engine:
        run_give_way(engine)
    assert not scopes.gaps, scopes.gaps
    phases = scopes.phases_of("f")
    waited = phases.index("waiting_memory")
    assert "queued_synthesis" in phases[waited:] and phases[-1] == "done", phases
    preempted = [sp for sp in exporter.get_finished_spans()
                 if sp.name == "cuzk.partition"
                 and (sp.attributes or {}).get("cuzk.partition.preempted")]
    assert len(preempted) == 1


def test_a_remote_worker_hand_back_reads_queued_gpu_until_the_engine_moves_it_on(
    scopes: ScopeRecord,
) -> None:
    """A backend whose synthesis runs on a remote worker (a cluster): from its admission the
    partition reads ``queued_synthesis`` until the backend says a worker took it
    (``worker_taken``), and ``queued_gpu`` once the backend marks the hand-back
    (``worker_released``) before freeing the worker, so a partition reads ``synthesizing``
    exactly while a worker holds it; the marks end with the synthesis scope (none left over)."""
    from cuzk.engine.backend import STEP
    from tests._doubles import ScriptedProver

    before_taken: list[str] = []
    taken: list[str] = []
    after_release: list[str] = []
    leftover: list[int] = []

    class RemoteWorkerProver(ScriptedProver):
        def __init__(self) -> None:
            super().__init__()
            self.synthesis_waits_for_worker = True

        def synthesize(self, key: Any, inputs: Any) -> Any:
            ctx = STEP.get()
            assert ctx is not None and ctx.worker_taken and ctx.worker_released
            p = next(p for p in scopes.partitions.values() if p.inputs is inputs)
            before_taken.append(p.phase)
            ctx.worker_taken()  # a CPU worker holds it now
            taken.append(p.phase)
            result = super().synthesize(key, inputs)
            ctx.worker_released()
            after_release.append(p.phase)
            return result

        def gpu_phase(self, key: Any, synthesis: Any, device: str) -> dict:
            p = next(p for p in scopes.partitions.values() if p.inputs is synthesis.inputs)
            leftover.append(len(p._scopes))  # "proving" alone: the hand-back mark is gone
            return super().gpu_phase(key, synthesis, device)

    engine, _, _ = make_test_engine({"porep-c2": (3, "normal")}, prover=RemoteWorkerProver())
    with engine:
        job = engine.submit("porep-c2", [{"tag": f"r{i}"} for i in range(3)])
        assert engine.wait(job.id, 10).state == "succeeded"
    assert before_taken == ["queued_synthesis"] * 3  # admitted, no worker yet
    assert taken == ["synthesizing"] * 3
    assert after_release == ["queued_gpu"] * 3
    assert leftover == [1, 1, 1]
    assert not scopes.gaps, scopes.gaps
    for i in range(3):
        phases = scopes.phases_of(f"r{i}")
        after = phases[len(phases) - phases[::-1].index("synthesizing"):]
        assert "synthesizing" not in after and after[-1] == "done", phases
        assert _runs(phases, "synthesizing", "queued_gpu", "proving"), phases
