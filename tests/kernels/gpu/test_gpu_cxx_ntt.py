"""The C++ NTT (kernels/gpu/cuda/ntt.cuh, kernels/gpu/cxx_ntt.py) on the kernels' host twin: Fr's
field arithmetic against Python integers, the forward and inverse NTT against the CPU NTT
(kernels.ntt), H against kernels.qap.h_evaluations bit for bit, for every pass length (multi-pass
plans on small sizes), a twiddle table of a larger domain read at a stride, and the H step's
device-bytes bound. The same checks on a device are in test_gpu_device.py."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk.curves import BLS12_381
from kernels import ntt as cpu_ntt
from kernels import qap
from kernels.field import ints_to_array
from kernels.gpu import cxx_ntt
from kernels.gpu.cxx_kernels import HostKernels, host_kernels
from kernels.gpu.cxx_ntt import CxxNtt, plan_passes

R = BLS12_381.r
MONT = 1 << 256
HOST_OBJECTS = 8 << 10


@pytest.fixture(scope="module")
def kernels() -> HostKernels:
    return host_kernels()


def _host(kernels, x) -> np.ndarray:
    kernels.synchronize()
    return x.get() if hasattr(x, "get") else np.asarray(x)


def _mont_rows(values: list[int]) -> np.ndarray:
    return ints_to_array([v * MONT % R for v in values], 8)


def _ints(rows: np.ndarray) -> list[int]:
    inv = pow(MONT, -1, R)
    return [int.from_bytes(r.astype("<u4").tobytes(), "little") * inv % R for r in rows]


def _random_rows(rng: random.Random, n: int) -> np.ndarray:
    return ints_to_array([rng.randrange(R) for _ in range(n)], 8)


# --------------------------------------------------------------------------- Fr field

def test_fr_ops_match_integers(kernels):
    check_fr_ops(kernels)


def check_fr_ops(kernels) -> None:
    """fr_field_ops (a*b, a+b, a-b, a^2 in Montgomery form) on Fr's edges: r's top bit is the
    only spare one (field.cuh's bound), so sums near 2r and products of r-1 reach it."""
    rng = random.Random(5)
    edge = [0, 1, 2, R - 1, R - 2, (R - 1) // 2, (R + 1) // 2, 1 << 254, (1 << 255) % R,
            MONT % R, (MONT - 1) % R]
    a = edge + edge + [rng.randrange(R) for _ in range(300)]
    b = list(reversed(edge)) + [R - 1] * len(edge) + [rng.randrange(R) for _ in range(300)]
    n = len(a)
    xp = kernels.xp
    out = xp.zeros((4, n, 8), dtype=np.uint32)
    kernels.launch("fr_field_ops", n, n, xp.asarray(_mont_rows(a)), xp.asarray(_mont_rows(b)),
                   out)
    got = _host(kernels, out)
    pairs = list(zip(a, b, strict=True))
    assert _ints(got[0]) == [x * y % R for x, y in pairs]
    assert _ints(got[1]) == [(x + y) % R for x, y in pairs]
    assert _ints(got[2]) == [(x - y) % R for x, y in pairs]
    assert _ints(got[3]) == [x * x % R for x in a]
    # fully reduced, not merely congruent
    assert all(int.from_bytes(r.astype("<u4").tobytes(), "little") < R
               for r in got.reshape(-1, 8))


# --------------------------------------------------------------------------- plans

@pytest.mark.parametrize("log_n", range(1, 25))
def test_passes_cover_every_index_bit_once(log_n):
    plan = plan_passes(log_n)
    bits = [b for b_lo, k in plan for b in range(b_lo + k - 1, b_lo - 1, -1)]
    assert bits == list(range(log_n - 1, -1, -1))          # top bits first, each once
    assert all(1 <= k <= cxx_ntt.PASS_BITS for _, k in plan)
    assert len(plan) == -(-log_n // cxx_ntt.PASS_BITS)


# --------------------------------------------------------------------------- transforms

def check_ntt_matches_cpu(kernels, log_n: int, pass_bits: int = cxx_ntt.PASS_BITS) -> None:
    xp = kernels.xp
    a = _random_rows(random.Random(log_n), 1 << log_n)
    eng = CxxNtt(kernels, pass_bits=pass_bits)
    fwd = eng.forward(xp.asarray(a))
    inv = eng.inverse(xp.asarray(a))
    assert np.array_equal(_host(kernels, fwd), cpu_ntt.fft(a))
    assert np.array_equal(_host(kernels, inv), cpu_ntt.ifft(a))


def check_h_matches_qap(kernels, log_n: int, pass_bits: int = cxx_ntt.PASS_BITS,
                        eng: CxxNtt | None = None) -> None:
    xp = kernels.xp
    rng = random.Random(100 + log_n)
    a, b, c = (_random_rows(rng, 1 << log_n) for _ in range(3))
    ref = qap.h_evaluations(a, b, c, log_n)
    eng = eng or CxxNtt(kernels, pass_bits=pass_bits)
    out = eng.h(xp.asarray(a), xp.asarray(b), xp.asarray(c))
    got = _host(kernels, out)
    assert got.shape == (1 << log_n, 8) and got.dtype == np.uint32
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("pass_bits", [1, 2, 3])
@pytest.mark.parametrize("log_n", [1, 2, 3, 4, 5, 7, 10])
def test_ntt_matches_cpu(kernels, log_n, pass_bits):
    check_ntt_matches_cpu(kernels, log_n, pass_bits)


@pytest.mark.parametrize("pass_bits", [1, 2, 3])
@pytest.mark.parametrize("log_n", [1, 2, 3, 4, 6, 9, 11])
def test_h_matches_qap_bit_for_bit(kernels, log_n, pass_bits):
    check_h_matches_qap(kernels, log_n, pass_bits)


def test_h_with_the_twiddles_of_a_larger_domain(kernels):
    """A device keeps one twiddle table, the largest domain's: smaller transforms read it at a
    stride (and a table grown later serves the smaller domains again)."""
    eng = CxxNtt(kernels)
    eng.twiddles(9)
    for log_n in (3, 5, 8):
        check_h_matches_qap(kernels, log_n, eng=eng)
    assert eng.twiddles(2)[1] == 9
    check_ntt_matches_cpu(kernels, 6)


def test_zero_and_constant_inputs(kernels):
    """H of A = B = C = 0 is 0; a constant polynomial's NTT is that constant everywhere."""
    n = 1 << 5
    z = np.zeros((n, 8), np.uint32)
    assert not CxxNtt(kernels).h(z.copy(), z.copy(), z.copy()).any()
    coeffs = np.zeros((n, 8), np.uint32)
    coeffs[0] = _mont_rows([7])[0]
    assert _ints(CxxNtt(kernels).forward(coeffs)) == [7] * n


def test_rejects_bad_shapes(kernels):
    eng = CxxNtt(kernels)
    with pytest.raises(ValueError, match="2\\^k"):
        eng.forward(np.zeros((6, 8), np.uint32))
    with pytest.raises(ValueError, match="2\\^k"):
        eng.forward(np.zeros((8, 12), np.uint32))
    with pytest.raises(ValueError, match="differ in size"):
        eng.h(*(np.zeros((m, 8), np.uint32) for m in (8, 8, 16)))
    with pytest.raises(ValueError, match="pass_bits"):
        CxxNtt(kernels, pass_bits=4)


# --------------------------------------------------------------------------- memory

@pytest.mark.parametrize("log_n", [9, 12, 14])
def test_h_device_bytes_bounds_what_the_driver_allocates(kernels, log_n):
    """Every array H allocates beyond the caller's a, b, c (NumPy here, traced by tracemalloc
    the way the device pool counts its blocks; the small host tables, host memory on a device
    and shared with it here, are built first) fits h_device_bytes; with the domain's tables
    built, only the output remains; the bound is not loose beyond a small factor."""
    import tracemalloc

    n = 1 << log_n
    rng = random.Random(log_n)
    a, b, c = (_random_rows(rng, n) for _ in range(3))
    for tables in (True, False):
        eng = CxxNtt(kernels)
        if not tables:
            eng.twiddles(log_n)
            eng.coset_tables(log_n)
            eng._inverse_n(log_n)
        x, y, z = a.copy(), b.copy(), c.copy()
        cxx_ntt.host_tables(log_n)          # host-side, cached: not device memory
        CxxNtt(kernels).h(a.copy(), b.copy(), c.copy())   # binds the ctypes entry points
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            out = eng.h(x, y, z)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert out is not None
        bound = cxx_ntt.h_device_bytes(n, tables=tables)
        # + the host's own Python objects (each launch's ctypes arguments), not device memory
        assert peak <= bound + HOST_OBJECTS <= 3 * peak, (tables, peak, bound)


def test_table_bytes_are_what_the_tables_hold(kernels):
    eng = CxxNtt(kernels)
    log_n = 10
    tw, _ = eng.twiddles(log_n)
    lo, hi, _ = eng.coset_tables(log_n)
    held = tw.nbytes + lo.nbytes + hi.nbytes + 32
    assert held <= cxx_ntt.table_bytes(log_n) <= held + 8 * cxx_ntt.POOL_ROUND + 2 * 32 * 64
