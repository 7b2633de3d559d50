"""The deadline bench: the plan offers the load asked for; one short run gives every figure."""

from __future__ import annotations

import pytest

from cuzk.bench import deadlines as b


@pytest.mark.parametrize("load", [0.7, 0.9, 1.1])
def test_the_plan_offers_the_load_asked_for(load):
    hours = 6.0
    plan = b.arrivals(hours, load, seed=3)
    offered = sum(b.gpu_seconds(a.kind) for a in plan) / (b.GPU_WORKERS * hours * 3600)
    assert offered == pytest.approx(load, rel=0.15)
    wp = [a for a in plan if a.kind == "window-post"]
    # each partition arrives between its challenge (40 min before the close) and its close
    assert all(a.deadline is not None and
               a.deadline - b.WINDOW_SPAN_S < a.at < a.deadline for a in wp)
    assert {(a.deadline - b.WINDOW_SPAN_S - 60.0) % b.WINDOW_EVERY_S for a in wp} == {0.0}
    assert all(a.deadline is None for a in plan if a.kind in b.BACKGROUND)
    assert [a.at for a in plan] == sorted(a.at for a in plan)


def test_window_post_arrives_out_of_deadline_order_and_some_deadlines_are_empty():
    """What arrival order gets wrong: a straggler of one deadline after the next one's work."""
    plan = b.arrivals(6.0, 0.9, seed=3)
    wp = [a for a in plan if a.kind == "window-post"]
    assert any(c.deadline > a.deadline for i, a in enumerate(wp) for c in wp[:i])
    closes = {a.deadline for a in wp}
    assert len(closes) < 12  # 6 hours hold 12 closes; an empty deadline submits nothing


def test_a_run_whose_driver_fell_behind_says_it_is_invalid():
    """Misses the harness caused are not reported as the scheduler's: the run is marked."""
    late_but_met = b.Run("new", wall_model_s=10.0, lags=[0.0, b.LAG_BOUND_S + 0.5])
    late_and_missed = b.Run("old", wall_model_s=10.0, lags=[0.0, b.LAG_BOUND_S + 0.5],
                            missed={"winning-post": 1}, missed_late_submit=1)
    assert late_but_met.figures()["valid"] and not late_and_missed.figures()["valid"]
    assert late_but_met.figures()["late_submits"] == 1
    assert late_and_missed.figures()["missed_after_late_submit"] == 1


def test_one_short_run_gives_every_figure():
    lines: list[str] = []
    reported: list[tuple[str, list[str]]] = []
    figures = b.run_bench(hours=0.1, scale=1 / 1000, seed=1, loads=[0.7],
                          scenarios=["bundled"], orders=["old", "new"], echo=lines.append,
                          report=lambda key, runs: reported.append((key, [r.name for r in runs])))
    run = figures["runs"]["bundled/70%"]
    assert set(run) == {"old", "new"}
    for f in run.values():
        assert f["submitted"]["winning-post"] + f["submitted"].get("window-post", 0) > 0
        assert 0 < f["gpu_busy"] <= 1.0
        assert len({"driver_lag_p99_s", "driver_lag_max_s", "valid"} & set(f)) == 3
    assert reported == [("bundled/70%", ["old", "new"])]
    assert [line.split(":")[0] for line in lines] == [
        "  bundled priorities, load 70%, old order", "  bundled priorities, load 70%, new order"]
