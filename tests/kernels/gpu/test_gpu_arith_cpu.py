"""The host-side planning of the GPU kernels: NTT passes and the MSM window choice. (The C++
MSM kernels' arithmetic is tested in test_gpu_cxx_msm.py.)"""

from __future__ import annotations

import pytest

from kernels.gpu.cxx_msm import MAX_C, MIN_C, choose_window
from kernels.gpu.ntt import plan_passes


def test_window_choice_is_monotone_and_bounded():
    cs = [choose_window(1 << k) for k in range(1, 27)]
    assert all(MIN_C <= c <= MAX_C for c in cs)
    assert cs == sorted(cs)
    assert choose_window(1 << 20) in (15, 16, 17)


@pytest.mark.parametrize("log_n", [1, 2, 3, 7, 10, 11, 16, 20, 24])
@pytest.mark.parametrize("shared_log,co", [(10, 3), (3, 1), (2, 1)])
def test_ntt_pass_plan_covers_every_bit_once(log_n, shared_log, co):
    plan = plan_passes(log_n, shared_log, co)
    bits = sorted(b for b_lo, t, _ in plan for b in range(b_lo, b_lo + t))
    assert bits == list(range(log_n))
    for b_lo, t, u in plan:
        assert t >= 1 and t + u <= shared_log and u <= b_lo
    if shared_log == 10:
        assert len(plan) == {1: 1, 2: 1, 3: 1, 7: 1, 10: 1, 11: 2, 16: 2, 20: 3, 24: 3}[log_n]
