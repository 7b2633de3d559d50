"""The device arithmetic, run on the CPU target (numba.njit of the same source as the kernels).

G1 XYZZ formulas against arkworks (an independent implementation), the signed-digit recoding
against Python big ints, and the host-side planning (NTT passes, MSM window choice).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, Scalar

from cuzk.curves import BLS12_381
from kernels.field import ints_to_array
from kernels.gpu import g1 as G
from kernels.gpu.launch import Executor
from kernels.gpu.msm import MAX_C, MIN_C, SENTINEL, build_msm, choose_window, num_windows
from kernels.gpu.ntt import plan_passes
from kernels.gpu.runtime import cpu_target

R = BLS12_381.r
GEN = G1Point()


@pytest.fixture(scope="module")
def ops():
    return G.build_g1(cpu_target())


def _pt(k: int) -> G1Point:
    return GEN * Scalar(k % R)


def _aff(p: G1Point) -> np.ndarray:
    return G.g1_to_affine_mont([p])[0]


def test_mixed_add_matches_arkworks(ops):
    rng = random.Random(1)
    ks = [rng.randrange(1, R) for _ in range(6)]
    acc = np.zeros(G.XYZZ_WORDS, np.uint32)
    want = G1Point.identity()
    for i, k in enumerate(ks):
        a = _aff(_pt(k))
        neg = i % 2 == 1
        ops.add_affine(acc, a[0], a[1], neg)
        want = want - _pt(k) if neg else want + _pt(k)
    assert G.xyzz_to_g1(acc) == want


def test_mixed_add_edge_cases(ops):
    """Infinity in, P + P (doubling branch), P - P (infinity), and adding the zkey's zero point."""
    a = _aff(_pt(7))
    acc = np.zeros(G.XYZZ_WORDS, np.uint32)
    ops.add_affine(acc, a[0], a[1], False)
    ops.add_affine(acc, a[0], a[1], False)          # equal points -> mdbl branch
    assert G.xyzz_to_g1(acc) == _pt(14)
    ops.add_affine(acc, a[0], a[1], False)          # XYZZ + same affine after scaling
    assert G.xyzz_to_g1(acc) == _pt(21)
    zero = np.zeros(12, np.uint32)
    ops.add_affine(acc, zero, zero, False)          # zkey infinity is skipped
    assert G.xyzz_to_g1(acc) == _pt(21)
    b = np.zeros(G.XYZZ_WORDS, np.uint32)
    ops.add_affine(b, a[0], a[1], False)
    ops.add_affine(b, a[0], a[1], True)             # P - P
    assert ops.is_inf(b)


def test_xyzz_add_double_and_small_mul(ops):
    p = G.affine_ints_to_xyzz(None)
    q = G.affine_ints_to_xyzz(None)
    a, b = _aff(_pt(5)), _aff(_pt(11))
    ops.add_affine(p, a[0], a[1], False)
    ops.add_affine(p, b[0], b[1], False)             # 16, with ZZ != 1
    ops.add_affine(q, b[0], b[1], False)
    ops.add_affine(q, a[0], a[1], True)              # 6
    ops.add_xyzz(p, q)
    assert G.xyzz_to_g1(p) == _pt(22)
    r = p.copy()
    ops.add_xyzz(p, r)                               # equal XYZZ points -> doubling branch
    assert G.xyzz_to_g1(p) == _pt(44)
    ops.dbl(p)
    assert G.xyzz_to_g1(p) == _pt(88)
    neg = p.copy()
    ops.negate(neg)
    s = p.copy()
    ops.add_xyzz(s, neg)
    assert ops.is_inf(s)
    for k in (0, 1, 2, 3, 1000, (1 << 19) - 1):
        t = p.copy()
        ops.mul_small(t, k)
        assert G.xyzz_to_g1(t) == _pt(88 * k)
    inf = np.zeros(G.XYZZ_WORDS, np.uint32)
    ops.dbl(inf)
    assert ops.is_inf(inf)
    ops.add_xyzz(inf, p)
    assert G.xyzz_to_g1(inf) == _pt(88)


def _digits(scalars: list[int], c: int) -> tuple[np.ndarray, int]:
    k = build_msm(cpu_target())
    m, nwin = len(scalars), num_windows(c)
    out = np.empty(nwin * m, np.uint64)
    Executor(cpu_target(), np).grid(k.digits, m, ints_to_array(scalars, 8), c, nwin, m, out)
    return out, nwin


@pytest.mark.parametrize("c", [4, 9, 13, 16, 20])
def test_signed_digits_recompose(c):
    """sum_w (+-(|d_w|)) 2^(c w) == s, with |d| <= 2^(c-1) and zero digits emitted as sentinels."""
    rng = random.Random(c)
    scalars = [0, 1, R - 1, (1 << 254), 2**c - 1, 2 ** (c - 1), 2 ** (c - 1) + 1]
    scalars += [rng.randrange(R) for _ in range(20)]
    recs, nwin = _digits(scalars, c)
    half = 1 << (c - 1)
    for i, s in enumerate(scalars):
        total = 0
        for w in range(nwin):
            r = int(recs[w * len(scalars) + i])
            if r == int(SENTINEL):
                continue
            key, idx, neg = r >> 32, r & 0x7FFFFFFF, (r >> 31) & 1
            assert idx == i
            win, mag = divmod(key, half)
            assert win == w and 0 <= mag < half
            total += (-(mag + 1) if neg else mag + 1) << (c * w)
        assert total == s


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
