"""A GPU worker reserved for critical and high work (issue 27): a GPU phase is never
interrupted, so a winning-post ready while every regular worker holds a long porep-c2 phase
starts at once on the reserved worker; no lower-class partition ever takes that worker, which
reserves its own device memory and is a worker of its own in status. The predictor plays the
same rule."""

from __future__ import annotations

import threading

from cuzk.engine.predict import PREDICTED_PHASES, Item, PhaseEstimates, predict
from cuzk.engine.scheduling import order_key
from cuzk.engine.settings import ProofKindSettings as K
from cuzk.simulated_prover import ScriptedProver
from tests._doubles import make_test_engine, wait_until

KINDS = {
    "porep-c2": K("porep-c2", 2, "normal"),
    "winning-post": K("winning-post", 1, "critical"),
    "window-post": K("window-post", 1, "high"),
}
BOUND_S = 5.0


def _engine(prover: ScriptedProver | None = None, **kw: object):
    return make_test_engine(KINDS, prover, gpu_workers_per_device=1,
                            reserved_gpu_workers_per_device=1, synthesis_threads=2, **kw)


def test_a_winning_post_proves_on_the_reserved_worker_while_porep_holds_the_regular_one():
    engine, prover, _ = _engine()
    gates = {t: prover.hold("gpu", t) for t in ("a0", "a1")}  # long porep-c2 GPU phases
    engine.start()
    try:
        porep = engine.submit("porep-c2", [{"tag": "a0"}, {"tag": "a1"}])
        assert wait_until(lambda: any(g.entered.is_set() for g in gates.values()), BOUND_S)
        held = next(i for i, t in enumerate(("a0", "a1")) if gates[t].entered.is_set())
        other = porep.partitions[1 - held]
        regular = next(w for w in engine.workers if not w.reserved)
        assert regular.busy  # the only regular worker is inside a porep-c2 phase
        # The other porep-c2 partition is ready for a GPU; the idle reserved worker is not its
        # to take.
        assert wait_until(lambda: other.phase == "queued_gpu", BOUND_S)
        wp = engine.submit("winning-post", [{"tag": "w"}])
        # Bounded: proven while the porep-c2 phase is still held (nothing else could free it).
        assert engine.wait(wp.id, BOUND_S).state == "succeeded"
        assert wp.partitions[0].worker_id == "cpu-r0"
        assert other.phase == "queued_gpu" and not gates[("a0", "a1")[1 - held]].entered.is_set()
        for g in gates.values():
            g.release()
        assert engine.wait(porep.id, BOUND_S).state == "succeeded"
        assert {p.worker_id for p in porep.partitions} == {regular.id}
        status = engine.status()
        assert [(w["id"], w["partitions_proven"]) for w in status["workers"]] == [
            ("cpu-0", 2), ("cpu-r0", 1)]
    finally:
        for g in gates.values():
            g.release()
        engine.shutdown(5)


def test_no_lower_class_partition_ever_takes_the_reserved_worker():
    """Eight porep-c2 partitions through one regular worker: every one on it, none on the idle
    reserved worker; a window-post (high) in between may take the reserved one."""
    engine, _prover, _ = _engine()
    engine.start()
    try:
        jobs = [engine.submit("porep-c2", [{"tag": f"{c}0"}, {"tag": f"{c}1"}]) for c in "abcd"]
        jobs.append(engine.submit("window-post", [{"tag": "h"}]))
        for j in jobs:
            assert engine.wait(j.id, BOUND_S * 4).state == "succeeded"
        on = {p.worker_id for j in jobs[:4] for p in j.partitions}
        assert on == {"cpu-0"}
        reserved = next(w for w in engine.workers if w.reserved)
        assert reserved.partitions_proven <= 1  # the window-post at most
    finally:
        engine.shutdown(5)


def test_the_reserved_worker_reserves_its_own_device_memory():
    """On a device with a budget, the reserved worker's phase holds a device reservation of its
    own beside the regular worker's: both phases are inside at once, each counted."""
    prover = ScriptedProver(devices=("cuda:0",), name="cuda", device_memory=10 << 20)
    engine, prover, _ = _engine(prover)
    held = prover.hold("gpu", "a0")
    held_w = prover.hold("gpu", "w")
    engine.start()
    try:
        porep = engine.submit("porep-c2", [{"tag": "a0"}, {"tag": "a1"}])
        assert held.wait_entered(BOUND_S)
        budget = engine.device_budgets["cuda:0"]
        one = budget.reserved
        assert one > 0
        wp = engine.submit("winning-post", [{"tag": "w"}])
        assert held_w.wait_entered(BOUND_S)
        assert budget.reserved > one  # the reserved worker's own device working memory
        snap = {w.id: w.busy for w in engine.snapshot().workers}
        assert snap == {"gpu-0": True, "gpu-r0": True}
        held_w.release()
        held.release()
        for j in (wp, porep):
            assert engine.wait(j.id, BOUND_S).state == "succeeded"
        assert wait_until(lambda: budget.reserved == 0 or all(
            r.consumer != "gpu_phase" for r in budget.live()))
    finally:
        held.release()
        held_w.release()
        engine.shutdown(5)


def test_a_regular_worker_still_takes_critical_work_when_the_reserved_one_is_busy():
    engine, prover, _ = _engine()
    first = prover.hold("gpu", "w1")
    engine.start()
    try:
        w1 = engine.submit("winning-post", [{"tag": "w1"}])
        assert first.wait_entered(BOUND_S)
        assert w1.partitions[0].worker_id == "cpu-r0"
        w2 = engine.submit("winning-post", [{"tag": "w2"}])
        assert engine.wait(w2.id, BOUND_S).state == "succeeded"
        assert w2.partitions[0].worker_id == "cpu-0"
        first.release()
        assert engine.wait(w1.id, BOUND_S).state == "succeeded"
    finally:
        first.release()
        engine.shutdown(5)


def test_an_idle_regular_worker_leaves_critical_work_to_the_idle_reserved_one():
    """Both idle when a winning-post is ready: the reserved worker takes it, so a porep-c2
    partition that comes next still finds the regular worker free."""
    engine, prover, _ = _engine()
    w_gate, a_gate = prover.hold("gpu", "w"), prover.hold("gpu", "a0")
    engine.start()
    try:
        assert wait_until(lambda: engine.pipeline.gpu_queue._reserved_waiting)
        wp = engine.submit("winning-post", [{"tag": "w"}])
        assert w_gate.wait_entered(BOUND_S)
        assert wp.partitions[0].worker_id == "cpu-r0"
        porep = engine.submit("porep-c2", [{"tag": "a0"}, {"tag": "a1"}])
        assert a_gate.wait_entered(BOUND_S)  # bounded: the regular worker was left free
        w_gate.release()
        a_gate.release()
        for j in (wp, porep):
            assert engine.wait(j.id, BOUND_S).state == "succeeded"
    finally:
        w_gate.release()
        a_gate.release()
        engine.shutdown(5)


def _est() -> PhaseEstimates:
    est = PhaseEstimates()
    for kind, figs in (("porep-c2", (1.0, 4.0, 0.0)), ("winning-post", (0.5, 0.5, 0.0))):
        for phase, v in zip(PREDICTED_PHASES, figs, strict=True):
            est.seed(kind, phase, v)
    return est


def test_the_prediction_puts_critical_work_on_the_reserved_worker_and_not_porep():
    porep = [Item(f"p{i}", "porep-c2", "normal", order_key("normal", None, i), "proving", 0.0)
             for i in range(1)]
    porep.append(Item("q", "porep-c2", "normal", order_key("normal", None, 5), "queued_gpu"))
    w = Item("w", "winning-post", "critical", order_key("critical", None, 9), "queued_gpu")
    finish, _ = predict(0.0, [*porep, w], _est(), gpu_workers=1, synthesis_threads=1,
                        reserved_gpu_workers=1)
    assert finish["w"] == 0.5  # at once on the reserved worker, not after 4 s of porep
    assert finish["q"] == 8.0  # porep's next waits for the regular worker, not the reserved
    none, _ = predict(0.0, [*porep, w], _est(), gpu_workers=1, synthesis_threads=1)
    assert none["w"] == 4.5


def test_a_thread_never_blocks_on_the_reserved_workers_get():
    """Shutdown with the reserved worker waiting: it leaves like the others (bounded)."""
    engine, _, _ = _engine()
    engine.start()
    assert wait_until(lambda: engine.pipeline.gpu_queue._reserved_waiting)
    t = threading.Thread(target=engine.shutdown, args=(5,))
    t.start()
    t.join(BOUND_S + 2)
    assert not t.is_alive()
