"""``cuzk bench deadlines``: the plan offers the load asked for; one short run prints figures."""

from __future__ import annotations

import pytest

from cuzk.cli import bench_deadlines as b


@pytest.mark.parametrize("load", [0.7, 0.9, 1.1])
def test_the_plan_offers_the_load_asked_for(load):
    hours = 6.0
    plan = b.arrivals(hours, load, seed=3)
    offered = sum(b.gpu_seconds(a.kind) for a in plan) / (b.GPU_WORKERS * hours * 3600)
    assert offered == pytest.approx(load, rel=0.15)
    wp = [a for a in plan if a.kind == "window-post"]
    assert len(wp) == b.WINDOW_JOBS * 12  # a deadline every 30 min
    assert all(a.deadline is not None and a.deadline > a.at for a in wp)
    assert all(a.deadline is None for a in plan if a.kind in b.BACKGROUND)
    assert [a.at for a in plan] == sorted(a.at for a in plan)


def test_one_short_run_prints_every_figure():
    lines: list[str] = []
    figures = b.run_bench(hours=0.1, scale=1 / 1000, seed=1, loads=[0.7],
                          scenarios=["bundled"], echo=lines.append)
    run = figures["runs"]["bundled/70%"]
    assert set(run) == {"old", "new", "new-nopreempt"}
    for f in run.values():
        assert f["submitted"]["winning-post"] + f["submitted"]["window-post"] > 0
        assert 0 < f["gpu_busy"] <= 1.0
    text = "\n".join(lines)
    for label in ("winning-post missed/submitted", "winning-post p99 s", "GPU busy fraction",
                  "background GPU-s/s", "pred. |err| p50/p95 s"):
        assert label in text
