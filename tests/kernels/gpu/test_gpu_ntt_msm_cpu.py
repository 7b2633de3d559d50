"""The GPU NTT driver end to end on the CPU executor (the kernels' per-thread code compiled with
numba.njit, the host logic on NumPy instead of CuPy) against kernels/ntt.py and kernels/qap.py;
the MSM driver on the C++ kernels' host twin against arkworks' multiexp."""

from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, Scalar

from cuzk.curves import BLS12_381
from kernels import ntt as cpu_ntt
from kernels import qap
from kernels.field import FR, ints_to_array
from kernels.gpu.cxx_kernels import host_kernels
from kernels.gpu.cxx_msm import G1, CxxMsm
from kernels.gpu.g1 import g1_to_affine_mont
from kernels.gpu.launch import Executor
from kernels.gpu.ntt import NttEngine
from kernels.gpu.runtime import cpu_target

R = BLS12_381.r


def rand_mont(n: int, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    vals = [rng.randrange(R) for _ in range(n)]
    vals[: min(n, 3)] = [0, 1, R - 1][: min(n, 3)]
    return FR.to_mont(FR.from_ints(vals))


@pytest.fixture(scope="module")
def ex() -> Executor:
    return Executor(cpu_target(), np)


@pytest.mark.parametrize("shared_log,co", [(10, 3), (3, 1), (2, 1)])
@pytest.mark.parametrize("log_n", [1, 2, 4, 7, 11])
def test_ntt_matches_cpu_reference(ex, shared_log, co, log_n):
    eng = NttEngine(ex, shared_log=shared_log, coalesce_log=co)
    a = rand_mont(1 << log_n, log_n)
    x = eng.to_limb_major(a)
    assert np.array_equal(eng.from_limb_major(eng.forward(x)), cpu_ntt.fft(a))
    assert np.array_equal(eng.from_limb_major(eng.inverse(x)), cpu_ntt.ifft(a))
    y = x.copy()
    eng.odd_coset(y)
    assert np.array_equal(eng.from_limb_major(y), cpu_ntt.odd_coset_evaluations(a))


def test_twiddle_table_grows_and_serves_smaller_sizes(ex):
    """One table for the largest size so far; smaller transforms stride through it."""
    eng = NttEngine(ex)
    big = rand_mont(1 << 12, 1)
    small = rand_mont(1 << 5, 2)
    x = eng.to_limb_major(big)
    assert np.array_equal(eng.from_limb_major(eng.forward(x)), cpu_ntt.fft(big))
    assert eng.twiddles(5)[1] == 12
    assert np.array_equal(eng.from_limb_major(eng.forward(eng.to_limb_major(small))),
                          cpu_ntt.fft(small))


@pytest.mark.parametrize("log_n", [3, 10, 13])
def test_h_matches_qap_reference(ex, log_n):
    n = 1 << log_n
    a, b, c = rand_mont(n, 10), rand_mont(n, 11), rand_mont(n, 12)
    eng = NttEngine(ex)
    got = eng.h_from_abc(eng.to_limb_major(a), eng.to_limb_major(b), eng.to_limb_major(c))
    assert np.array_equal(got, qap.h_evaluations(a, b, c, log_n))


# ------------------------------------------------------------------------------------------ MSM

@pytest.fixture(scope="module")
def points():
    rng = random.Random(7)
    gen = G1Point()
    pts = [gen * Scalar(rng.randrange(1, R)) for _ in range(400)]
    pts[3] = G1Point.identity()          # the zkey writes infinity as zeros
    pts[4] = pts[5]                      # repeated points meet in one bucket (doubling branch)
    return pts, g1_to_affine_mont(pts).reshape(len(pts), 24)


def _scalars(kind: str, m: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    if kind == "random":
        return [rng.randrange(R) for _ in range(m)]
    if kind == "witness-like":   # mostly 0/1/small, some -1 and large, as circuits produce
        return [rng.choice([0, 0, 1, 1, 1, 2, R - 1, rng.randrange(1 << 64), rng.randrange(R)])
                for _ in range(m)]
    if kind == "ones":           # one huge bucket: the chunked accumulation and reductions
        return [1] * m
    if kind == "zeros":
        return [0] * m
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["random", "witness-like", "ones", "zeros"])
@pytest.mark.parametrize("m,c", [(400, None), (400, 5), (137, 11), (1, None), (2, 16)])
def test_msm_matches_arkworks(ex, points, kind, m, c):
    pts, rows = points
    sc = _scalars(kind, m, m * 31 + (c or 0))
    got = CxxMsm(host_kernels()).msm(G1, np.ascontiguousarray(rows[:m]), ints_to_array(sc, 8),
                                     c)
    want = G1Point.multiexp_unchecked(pts[:m], [Scalar(s) for s in sc])
    assert got == want


def test_msm_rejects_size_mismatch(ex, points):
    _, rows = points
    with pytest.raises(ValueError, match="size mismatch"):
        CxxMsm(host_kernels()).msm(G1, np.ascontiguousarray(rows[:3]), ints_to_array([1, 2], 8))
