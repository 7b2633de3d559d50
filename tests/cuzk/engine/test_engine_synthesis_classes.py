"""Synthesis threads by class (issue 27): with more than one synthesis thread, one is reserved
for critical and high work, so a winning-post never waits for a thread that porep-c2
partitions hold (a synthesis cannot be stopped half way). The predictor plays the same rule."""

from __future__ import annotations

import math

from cuzk.engine.predict import PREDICTED_PHASES, Item, PhaseEstimates, predict
from cuzk.engine.scheduling import order_key, reserved_synthesis_threads
from cuzk.engine.settings import ProofKindSettings as K
from cuzk.testing import make_test_engine

KINDS = {
    "porep-c2": K("porep-c2", 2, "normal"),
    "winning-post": K("winning-post", 1, "critical"),
}


def test_a_winning_post_synthesizes_while_porep_partitions_hold_the_other_thread():
    engine, prover, _ = make_test_engine(KINDS, synthesis_threads=2, gpu_workers_per_device=1)
    gates = {t: prover.hold("synthesize", t) for t in ("a0", "a1", "b0", "b1")}
    engine.start()
    try:
        porep = [engine.submit("porep-c2", [{"tag": f"{c}0"}, {"tag": f"{c}1"}]) for c in "ab"]
        assert gates["a0"].wait_entered()
        wp = engine.submit("winning-post", [{"tag": "w"}])
        # Bounded: the critical job needs only the reserved thread; a0 is still held.
        assert engine.wait(wp.id, 5).state == "succeeded"
        assert not gates["a0"]._open.is_set()
        starts = [tag for step, edge, tag in prover.events
                  if step == "synthesize" and edge == "start"]
        assert starts[:2] == ["a0", "w"], starts  # nothing of porep's took the second thread
        for g in gates.values():
            g.release()
        for j in porep:
            assert engine.wait(j.id, 10).state == "succeeded"
    finally:
        for g in gates.values():
            g.release()
        engine.shutdown(5)


def test_one_synthesis_thread_serves_every_class():
    assert reserved_synthesis_threads(1) == 0
    engine, _, _ = make_test_engine(KINDS, synthesis_threads=1, gpu_workers_per_device=1)
    engine.start()
    try:
        job = engine.submit("porep-c2", [{"tag": "x0"}, {"tag": "x1"}])
        assert engine.wait(job.id, 10).state == "succeeded"
    finally:
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
    finish, _ = predict(0.0, items, _est(), gpu_workers=1, synthesis_threads=2)
    assert finish["w"] == 1.0  # synthesized at once on the reserved thread, then the GPU first
    # The porep partitions share the one general thread: 4 s, then 8 s of synthesis.
    assert finish["p0"] == 6.0 and finish["p1"] == 10.0
    one, _ = predict(0.0, items, _est(), gpu_workers=1, synthesis_threads=1)
    # One thread serves every class: the porep partitions wait for the winning-post's synthesis.
    assert one["w"] == 1.0 and one["p0"] == 6.5 and one["p1"] == 10.5


def test_a_critical_partition_waits_behind_running_porep_synthesis_only_on_one_thread():
    running = [Item(f"p{i}", "porep-c2", "normal", order_key("normal", None, i), "synthesizing",
                    1.0) for i in range(1)]
    w = Item("w", "winning-post", "critical", order_key("critical", None, 9), "queued_synthesis")
    two, _ = predict(0.0, [*running, w], _est(), gpu_workers=1, synthesis_threads=2)
    assert two["w"] == 1.0
    one, _ = predict(0.0, [*running, w], _est(), gpu_workers=1, synthesis_threads=1)
    assert math.isclose(one["w"], 4.0)  # 3 s left of the porep synthesis, then its own
