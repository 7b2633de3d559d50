"""Device memory estimates against measured peaks, without a GPU.

The MSM host driver is the same code on NumPy as on CuPy, so the arrays it allocates (traced by
tracemalloc on the CPU executor) are the device buffers it would hold; the estimate must cover
that peak without being far above it. CuPy's radix-sort scratch, which NumPy does not need, is
the one term the estimate adds (one record array). PeakTracker, which measures the real pool's
high-water mark in the device check, is checked against a fake pool."""

from __future__ import annotations

from cuzk.curves import BLS12_381
from kernels.gpu.memtrack import PeakTracker

R = BLS12_381.r


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
