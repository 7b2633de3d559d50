"""Device memory estimates against measured peaks, without a GPU.

The MSM host driver is the same code on NumPy as on CuPy, so the arrays it allocates (traced by
tracemalloc on the CPU executor) are the device buffers it would hold; the estimate must cover
that peak without being far above it. CuPy's radix-sort scratch, which NumPy does not need, is
the one term the estimate adds (one record array). PeakTracker, which measures the real pool's
high-water mark in the device check, is checked against a fake pool."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, Scalar

from cuzk.curves import BLS12_381
from kernels.field import ints_to_array
from kernels.gpu.g1 import g1_to_affine_mont
from kernels.gpu.launch import Executor
from kernels.gpu.memtrack import PeakTracker
from kernels.gpu.msm import (
    MsmEngine,
    choose_window,
    device_bytes_estimate,
    device_bytes_phases,
    num_windows,
)
from kernels.gpu.runtime import cpu_target

R = BLS12_381.r


@pytest.fixture(scope="module")
def points():
    rng = random.Random(3)
    pts = [G1Point() * Scalar(rng.randrange(1, R)) for _ in range(64)]
    return g1_to_affine_mont(pts).reshape(64, 24)


@pytest.mark.parametrize("log_m", [11, 13])
def test_msm_estimate_covers_the_measured_peak(points, log_m):
    m = 1 << log_m
    rng = random.Random(log_m)
    rows = np.ascontiguousarray(np.tile(points, (m // 64, 1)))
    scalars = ints_to_array([rng.randrange(R) for _ in range(m)], 8)
    eng = MsmEngine(Executor(cpu_target(), np))
    c = choose_window(m)
    eng.window_sums(rows, scalars, c)     # compile every CPU kernel outside the trace
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        sums, _ = eng.window_sums(rows, scalars, c)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert sums.shape[0] == num_windows(c)
    # The estimate counts the uploaded scalars and CuPy's sort scratch; NumPy needs neither here.
    est = device_bytes_estimate(m, c) - m * 32
    phases = device_bytes_phases(m, c)
    assert max(phases.values()) == device_bytes_estimate(m, c)
    assert peak <= est <= 1.35 * peak, (peak, est, phases)


def test_msm_estimate_at_2_20_counts_the_record_temporaries():
    """At 2^20 points (c = 16, 16 windows) the record arrays dominate: 5 x 8 bytes per record
    at the peak, about 0.7 GiB, well above the old figure that ignored them."""
    m = 1 << 20
    c = choose_window(m)
    n = num_windows(c) * m
    assert device_bytes_estimate(m) >= 5 * n * 8


class _FakePool:
    def __init__(self):
        self.used = 0

    def malloc(self, size):
        self.used += size
        return size

    def free(self, size):
        self.used -= size

    def used_bytes(self):
        return self.used


def test_peak_tracker_records_the_high_water_mark_of_a_step():
    pool = _FakePool()
    pool.malloc(1000)                               # resident before the step: not counted
    t = PeakTracker(pool)
    with t.step() as mem:
        a = t.malloc(300)
        b = t.malloc(500)
        pool.free(a)
        pool.free(b)
        t.malloc(200)
    assert mem == {"base_bytes": 1000, "peak_bytes": 800}
    assert t.peak == 1800
