"""The soak bench's trend verdict: steady growth is growth, noise and one step are not."""

from __future__ import annotations

import random

import pytest

from cuzk.bench.soak import Soak, trend


def test_flat_noisy_series_is_not_growth() -> None:
    rng = random.Random(1)
    times = [5.0 * i for i in range(100)]
    values = [300 + rng.gauss(0, 3) for _ in times]
    verdict = trend(times, values, floor=8)
    assert not verdict["growing"], verdict


def test_steady_growth_is_reported_per_hour() -> None:
    times = [5.0 * i for i in range(100)]  # 495 s
    values = [300 + 0.1 * t for t in times]  # 0.1 MiB/s = 360 MiB/h, 49.5 MiB over the window
    verdict = trend(times, values, floor=8)
    assert verdict["growing"]
    assert verdict["per_hour"] == pytest.approx(360)
    assert verdict["rise"] == pytest.approx(49.5)


def test_growth_within_the_floor_is_noise() -> None:
    times = [5.0 * i for i in range(100)]
    values = [10 + (1 if t > 250 else 0) for t in times]  # one fd more, once
    assert not trend(times, values, floor=4)["growing"]


def _figures(**over: object) -> dict:
    flat = {"growing": False, "per_hour": 0.0, "rise": 0.0, "noise": 1.0}
    figures = {"series": {n: dict(flat) for n in ("rss_mib", "fds", "threads", "spans_open")},
               "lost": [], "failed": [], "unexpected": [], "spans_open_after_drain": 0.0}
    figures.update(over)
    return figures


def test_a_soak_ends_well_only_when_nothing_was_lost_left_open_or_grew() -> None:
    assert Soak(1, _figures()).ok
    growing = _figures()
    growing["series"]["rss_mib"]["growing"] = True
    assert Soak(1, growing).growing and not Soak(1, growing).ok
    for bad in ({"lost": ["j: 404"]}, {"failed": ["j (ok): failed: boom"]},
                {"unexpected": ["oversize: expected 413, got 500"]},
                {"spans_open_after_drain": 2.0}):
        assert not Soak(1, _figures(**bad)).ok, bad
