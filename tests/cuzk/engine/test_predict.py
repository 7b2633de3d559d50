"""Phase-duration estimates and finish predictions (cuzk.engine.predict)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuzk.engine.predict import PREDICTED_PHASES, Item, PhaseEstimates, predict
from cuzk.protocol import PRIORITIES

any_float = st.floats(allow_nan=True, allow_infinity=True)


@given(st.lists(st.tuples(st.sampled_from(PREDICTED_PHASES), any_float), max_size=50))
def test_an_estimate_is_never_negative_nor_non_finite(observations):
    est = PhaseEstimates()
    est.seed("k", "proving", -3.0)  # a bad seed is ignored too
    for phase, seconds in observations:
        est.observe("k", phase, seconds)
    for phase in PREDICTED_PHASES:
        v = est.get("k", phase)
        assert v is None or (math.isfinite(v) and v >= 0)


def test_a_measurement_replaces_the_seed_then_the_median_of_the_window_counts():
    est = PhaseEstimates(window=3)
    est.seed("k", "proving", 10.0)
    assert est.get("k", "proving") == 10.0
    est.observe("k", "proving", 2.0)
    assert est.get("k", "proving") == 2.0
    est.observe("k", "proving", 4.0)
    assert est.get("k", "proving") == 2.0  # the lower middle: always a measured value
    est.observe("k", "proving", 500.0)  # one stall does not move it far
    assert est.get("k", "proving") == 4.0
    for _ in range(3):
        est.observe("k", "proving", 1.0)  # the window forgets older figures
    assert est.get("k", "proving") == 1.0
    assert est.measured("k", "proving") == 6


def known(s: float, g: float, f: float) -> PhaseEstimates:
    est = PhaseEstimates()
    for phase, v in zip(PREDICTED_PHASES, (s, g, f), strict=True):
        est.seed("k", phase, v)
    return est


def test_queue_played_forward_on_two_workers():
    est = known(1.0, 2.0, 0.5)
    items = [Item(f"j{i}", "k", "normal", (2, math.inf, i, 0), "queued_gpu") for i in range(4)]
    finish, backlog = predict(100.0, items, est, gpu_workers=2, synthesis_threads=2)
    assert finish == {"j0": 102.5, "j1": 102.5, "j2": 104.5, "j3": 104.5}
    assert backlog == {"normal": 8.0}


def test_running_partition_counts_only_what_is_left():
    est = known(1.0, 2.0, 0.5)
    items = [Item("a", "k", "high", (1, 5.0, 0, 0), "proving", elapsed=1.5),
             Item("b", "k", "high", (1, 6.0, 1, 0), "queued_synthesis")]
    finish, backlog = predict(0.0, items, est, gpu_workers=1, synthesis_threads=1)
    assert finish["a"] == pytest.approx(1.0)  # 0.5 s of GPU left, then 0.5 s finalize
    assert finish["b"] == pytest.approx(3.5)  # synthesized by 1.0, GPU from 1.0 to 3.0
    assert backlog["high"] == pytest.approx(2.5)


def test_every_phase_a_partition_can_be_in_is_predicted_and_counted():
    """A partition in any unsettled phase (``loading_key`` included: its key loads on another
    thread) has a finish and its GPU seconds in the backlog; none vanishes from the forecast."""
    from cuzk.protocol import ACTIVE_PHASES

    est = known(1.0, 2.0, 0.5)
    for phase in ACTIVE_PHASES:
        items = [Item("j", "k", "high", (1, math.inf, 0, 0), phase, elapsed=0.0)]
        finish, backlog = predict(0.0, items, est, gpu_workers=1, synthesis_threads=1)
        assert "j" in finish, phase
        if phase != "finalizing":
            assert backlog.get("high", 0.0) > 0, phase
    items = [Item("j", "k", "high", (1, math.inf, 0, 0), "loading_key", elapsed=9.0)]
    finish, _ = predict(0.0, items, est, gpu_workers=1, synthesis_threads=1)
    assert finish["j"] == pytest.approx(3.5)  # its whole synthesis is still ahead


def test_an_unknown_kind_is_not_predicted():
    est = known(1.0, 2.0, 0.5)
    finish, _ = predict(0.0, [Item("x", "other", "low", (3, math.inf, 0, 0), "queued_gpu")],
                        est, 1, 1)
    assert finish == {"x": None}


@given(
    st.lists(st.tuples(st.sampled_from(PRIORITIES),
                       st.sampled_from(["queued_synthesis", "synthesizing", "queued_gpu",
                                        "proving", "finalizing"]),
                       st.floats(0, 100)), min_size=1, max_size=25),
    st.integers(1, 4), st.integers(1, 4),
)
def test_predictions_are_never_before_now_and_backlog_never_negative(parts, workers, threads):
    est = known(0.3, 1.0, 0.2)
    items = [Item(f"j{i}", "k", prio, (PRIORITIES.index(prio), math.inf, i, 0), phase, el)
             for i, (prio, phase, el) in enumerate(parts)]
    finish, backlog = predict(50.0, items, est, workers, threads)
    assert all(t is not None and t >= 50.0 for t in finish.values())
    assert all(v >= 0 for v in backlog.values())


def test_priors_of_unmeasured_kinds_scale_by_what_measured_kinds_took_against_theirs():
    est = PhaseEstimates()
    for kind, g in (("small", 1.0), ("mid", 2.0), ("big", 10.0)):
        est.seed(kind, "proving", g, "prior")
    est.seed("cfg", "proving", 3.0)  # configured: never scaled
    est.observe("small", "proving", 2.5)  # 2.5 x its prior
    assert est.get("big", "proving") == 25.0 and est.get("mid", "proving") == 5.0
    assert est.sources()["big"]["proving"] == (25.0, "prior")  # still a prior, scaled
    assert est.get("cfg", "proving") == 3.0
    assert est.get("big", "synthesizing") is None  # per phase
    est.observe("mid", "proving", 3.0)  # 1.5 x: the lower middle of (1.5, 2.5)
    assert est.get("big", "proving") == 15.0
    est.seed("late", "proving", 4.0, "prior")  # a prior asked for later is scaled too
    assert est.get("late", "proving") == 6.0
