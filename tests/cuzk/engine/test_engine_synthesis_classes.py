"""Synthesis threads by class (issue 27): besides the configured synthesis threads, one more is
reserved for critical and high work, so a winning-post never waits for a thread that porep-c2
partitions hold (a synthesis cannot be stopped half way), and the other classes keep every
thread they had. The predictor plays the same rule."""

from __future__ import annotations

from cuzk.engine.predict import PREDICTED_PHASES, Item, PhaseEstimates, predict
from cuzk.engine.scheduling import order_key
from cuzk.engine.settings import ProofKindSettings as K
from tests._doubles import make_test_engine, wait_until

KINDS = {
    "porep-c2": K("porep-c2", 2, "normal"),
    "winning-post": K("winning-post", 1, "critical"),
}


def test_a_winning_post_synthesizes_while_porep_partitions_hold_every_thread():
    engine, prover, _ = make_test_engine(KINDS, synthesis_threads=2, gpu_workers_per_device=1)
    gates = {t: prover.hold("synthesize", t) for t in ("a0", "a1", "b0", "b1")}
    engine.start()
    try:
        porep = [engine.submit("porep-c2", [{"tag": f"{c}0"}, {"tag": f"{c}1"}]) for c in "ab"]
        # Both configured threads take porep-c2 work: the reservation took none from them.
        assert gates["a0"].wait_entered() and gates["a1"].wait_entered()
        wp = engine.submit("winning-post", [{"tag": "w"}])
        # Bounded: the critical job needs only the reserved thread; a0 and a1 are still held.
        assert engine.wait(wp.id, 5).state == "succeeded"
        assert not gates["a0"]._open.is_set() and not gates["a1"]._open.is_set()
        assert not gates["b0"].entered.is_set()  # nothing of porep's took the reserved one
        for g in gates.values():
            g.release()
        for j in porep:
            assert engine.wait(j.id, 10).state == "succeeded"
    finally:
        for g in gates.values():
            g.release()
        engine.shutdown(5)


def test_a_configured_thread_leaves_critical_work_to_the_idle_reserved_one():
    """Both threads idle when a winning-post comes: the reserved one takes it, so a porep-c2
    partition that comes next still finds the configured thread free."""
    engine, prover, _ = make_test_engine(KINDS, synthesis_threads=1, gpu_workers_per_device=1)
    w_gate, a_gate = prover.hold("synthesize", "w"), prover.hold("synthesize", "a0")
    engine.start()
    try:
        assert wait_until(lambda: engine.pipeline.pending._reserved_waiting)  # both in get
        wp = engine.submit("winning-post", [{"tag": "w"}])
        assert w_gate.wait_entered()
        porep = engine.submit("porep-c2", [{"tag": "a0"}, {"tag": "a1"}])
        assert a_gate.wait_entered(5)  # bounded: the configured thread was left free
        w_gate.release()
        a_gate.release()
        for j in (wp, porep):
            assert engine.wait(j.id, 10).state == "succeeded"
    finally:
        w_gate.release()
        a_gate.release()
        engine.shutdown(5)


def _est() -> PhaseEstimates:
    est = PhaseEstimates()
    for kind, figs in (("porep-c2", (4.0, 2.0, 0.0)), ("winning-post", (0.5, 0.5, 0.0))):
        for phase, v in zip(PREDICTED_PHASES, figs, strict=True):
            est.seed(kind, phase, v)
    return est


def test_the_prediction_gives_critical_work_the_reserved_thread_and_normal_work_the_rest():
    items = [Item(f"p{i}", "porep-c2", "normal", order_key("normal", None, i), "queued_synthesis")
             for i in range(2)]
    items.append(Item("w", "winning-post", "critical", order_key("critical", None, 9),
                      "queued_synthesis"))
    finish, _ = predict(0.0, items, _est(), gpu_workers=1, synthesis_threads=1)
    assert finish["w"] == 1.0  # synthesized at once on the reserved thread, then the GPU first
    # The porep partitions share the one configured thread: 4 s, then 8 s of synthesis; the
    # winning-post's synthesis did not delay them.
    assert finish["p0"] == 6.0 and finish["p1"] == 10.0
    two, _ = predict(0.0, items, _est(), gpu_workers=1, synthesis_threads=2)
    assert two["w"] == 1.0 and two["p0"] == 6.0 and two["p1"] == 8.0


def test_a_critical_partition_never_waits_behind_running_porep_synthesis():
    porep = Item("p0", "porep-c2", "normal", order_key("normal", None, 0), "synthesizing", 1.0)
    w = Item("w", "winning-post", "critical", order_key("critical", None, 9), "queued_synthesis")
    finish, _ = predict(0.0, [porep, w], _est(), gpu_workers=1, synthesis_threads=1)
    assert finish["w"] == 1.0  # not 4.0: after the 3 s left of the porep synthesis
    # A second critical partition behind one on the reserved thread: whichever frees first.
    w1 = Item("w1", "winning-post", "critical", order_key("critical", None, 7), "synthesizing")
    finish, _ = predict(0.0, [porep, w1, w], _est(), gpu_workers=1, synthesis_threads=1)
    assert finish["w1"] == 1.0 and finish["w"] == 1.5  # reserved thread: 0.5 s, then 0.5 s
