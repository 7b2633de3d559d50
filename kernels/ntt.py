"""Radix-2 NTT over BLS12-381 Fr on the CPU (numba), bit-for-bit equal to snarkjs's Fr.fft/Fr.ifft.

Inputs and outputs are (n, 8) uint32 Montgomery arrays in natural order, n = 2^1 .. 2^24.
The roots are ffjavascript's (``Curve.root_of_unity``): any other primitive root would give a
different, equally valid transform, and H would then disagree with the zkey's H section.

Algorithm: bit-reversal gather, then iterative Cooley-Tukey DIT. Work is split across threads
(nogil kernels on a shared pool): each thread gathers and transforms a contiguous block through
all the stages local to it (in cache-sized sub-blocks first), then the remaining log2(threads)
cross-block stages are split by butterfly index. The inverse reuses the forward twiddle table
(w^-j = -w^(n/2-j)), and the 1/n scale (and the odd-coset shift of ``odd_coset_evaluations``) is
folded into the last stage instead of costing an extra pass over memory.
"""

from __future__ import annotations

import threading

import numba
import numpy as np

from kernels._threads import cpu_count, run_parallel
from kernels.curves import BLS12_381, Curve
from kernels.field import FR, fr_copy, int_to_limbs
from kernels.fr64 import fr_add64 as fr_add
from kernels.fr64 import fr_mont_mul64 as fr_mont_mul
from kernels.fr64 import fr_sub64 as fr_sub

MAX_LOG_N = 24
_LIMBS = 8
_CACHE_LOG = 12        # sub-blocks of 2^12 elements (128 KiB) go through their stages in L2
_MIN_PARALLEL_LOG = 12  # below this, threads cost more than they save

_MODE_NONE = 0
_MODE_SCALE = 1         # multiply every output by c
_MODE_COSET = 2         # multiply output i by c * g^i


# ----------------------------------------------------------------------------- numba kernels

@numba.njit(nogil=True, cache=True)
def _powers_rows(out, base, start):
    """out[i] = start * base^i (Montgomery), sequentially."""
    fr_copy(out[0], start)
    for i in range(1, out.shape[0]):
        fr_mont_mul(out[i], out[i - 1], base)


@numba.njit(nogil=True, cache=True)
def _bitrev(i, log_n):
    r = 0
    for _ in range(log_n):
        r = (r << 1) | (i & 1)
        i >>= 1
    return r


@numba.njit(nogil=True, cache=True)
def _butterfly_range(x, tw, log_n, inverse, log_m, lo, hi, v):
    """One DIT stage of half-size m = 2^log_m over butterflies [lo, hi) of x (in place).

    Butterfly b pairs i0 = (b >> log_m) << (log_m+1) | (b & (m-1)) with i1 = i0 + m, twiddle
    w_n^(j * n/(2m)). The inverse uses w^-k = -w^(n/2-k): same table, add/sub swapped.
    """
    m = 1 << log_m
    mask = m - 1
    shift = log_n - 1 - log_m          # twiddle stride n/(2m) as a shift
    half = 1 << (log_n - 1)
    for b in range(lo, hi):
        j = b & mask
        i0 = ((b >> log_m) << (log_m + 1)) | j
        i1 = i0 + m
        if j == 0:
            fr_copy(v, x[i1])
            fr_sub(x[i1], x[i0], v)
            fr_add(x[i0], x[i0], v)
        elif not inverse:
            fr_mont_mul(v, x[i1], tw[j << shift])
            fr_sub(x[i1], x[i0], v)
            fr_add(x[i0], x[i0], v)
        else:
            fr_mont_mul(v, x[i1], tw[half - (j << shift)])
            fr_add(x[i1], x[i0], v)
            fr_sub(x[i0], x[i0], v)


@numba.njit(nogil=True, cache=True)
def _phase_local(dst, src, tw, log_n, inverse, log_block, lo, hi):
    """Gather rows [lo, hi) of dst from src in bit-reversed order, then run every stage whose
    butterflies stay inside 2^log_block-aligned blocks (lo, hi are multiples of 2^log_block)."""
    v = np.empty(_LIMBS, np.uint32)
    for i in range(lo, hi):
        fr_copy(dst[i], src[_bitrev(i, log_n)])
    log_sub = min(log_block, _CACHE_LOG)
    sub = 1 << log_sub
    # stages 1..log_sub, one cache-sized sub-block at a time
    for s0 in range(lo, hi, sub):
        for log_m in range(log_sub):
            b0 = s0 >> 1
            _butterfly_range(dst, tw, log_n, inverse, log_m, b0, b0 + (sub >> 1), v)
    # the remaining block-local stages over the whole range
    for log_m in range(log_sub, log_block):
        _butterfly_range(dst, tw, log_n, inverse, log_m, lo >> 1, hi >> 1, v)


@numba.njit(nogil=True, cache=True)
def _phase_stage(x, tw, log_n, inverse, log_m, lo, hi):
    v = np.empty(_LIMBS, np.uint32)
    _butterfly_range(x, tw, log_n, inverse, log_m, lo, hi, v)


@numba.njit(nogil=True, cache=True)
def _phase_last(x, tw, log_n, inverse, lo, hi, mode, s0, g, gm):
    """Final stage (m = n/2) over butterflies [lo, hi), then scale the two outputs of each:
    mode 1: both by s0; mode 2: x[j] by s0*g^(j-lo) and x[j+m] by that times gm (= g^m)."""
    v = np.empty(_LIMBS, np.uint32)
    s = np.empty(_LIMBS, np.uint32)
    s_hi = np.empty(_LIMBS, np.uint32)
    t = np.empty(_LIMBS, np.uint32)
    fr_copy(s, s0)
    m = 1 << (log_n - 1)
    for b in range(lo, hi):
        _butterfly_range(x, tw, log_n, inverse, log_n - 1, b, b + 1, v)
        if mode == _MODE_NONE:
            continue
        fr_mont_mul(t, x[b], s)
        fr_copy(x[b], t)
        if mode == _MODE_SCALE:
            fr_mont_mul(t, x[b + m], s)
            fr_copy(x[b + m], t)
        else:
            fr_mont_mul(s_hi, s, gm)
            fr_mont_mul(t, x[b + m], s_hi)
            fr_copy(x[b + m], t)
            fr_mont_mul(t, s, g)
            fr_copy(s, t)


# ----------------------------------------------------------------------------- tables

class _Domain:
    """Per-size constants: twiddles w^j (j < n/2) in Montgomery form, n^-1, and the coset shift."""

    def __init__(self, curve: Curve, log_n: int) -> None:
        r = curve.r
        n = 1 << log_n
        self.log_n = log_n
        self.w = curve.root_of_unity(log_n)
        half = max(1, n >> 1)
        tw = np.empty((half, _LIMBS), np.uint32)
        one_m = int_to_limbs(FR.params.r_mod_p, _LIMBS)
        _powers_rows(tw, _mont(self.w), one_m)
        self.tw = tw
        self.n_inv = pow(n, -1, r)
        # snarkjs groth16_prove: inc = Fr.w[power+1], or Fr.shift (nqr^2) at the two-adicity limit
        if log_n < curve.two_adicity:
            self.coset = curve.root_of_unity(log_n + 1)
        else:
            self.coset = curve.nqr**2 % r


def _mont(x: int) -> np.ndarray:
    return int_to_limbs(x * FR.params.r_mod_p % FR.p, _LIMBS)


_domains: dict[int, _Domain] = {}
_domains_lock = threading.Lock()
_default_threads = cpu_count()


def set_default_threads(n: int) -> None:
    """Threads each NTT uses when the caller does not say (default: the cores available)."""
    global _default_threads
    _default_threads = max(1, int(n))


def domain(log_n: int, curve: Curve = BLS12_381) -> _Domain:
    """The cached per-size tables (built once, kept: n/2 * 32 bytes of twiddles)."""
    if curve.r != FR.p:
        raise NotImplementedError(f"NTT kernels exist for BLS12-381 Fr only, not {curve.name}")
    if not 1 <= log_n <= MAX_LOG_N:
        raise ValueError(f"NTT size 2^{log_n} outside 2^1..2^{MAX_LOG_N}")
    d = _domains.get(log_n)
    if d is None:
        with _domains_lock:
            d = _domains.get(log_n)
            if d is None:
                d = _Domain(curve, log_n)
                _domains[log_n] = d
    return d


def _log2_exact(n: int) -> int:
    log_n = n.bit_length() - 1
    if n <= 0 or 1 << log_n != n:
        raise ValueError(f"NTT size {n} is not a power of two")
    return log_n


# ----------------------------------------------------------------------------- driver

def _transform(a: np.ndarray, inverse: bool, mode: int, c: int, g: int,
               threads: int | None) -> np.ndarray:
    a = FR.check(a)
    n = a.shape[0]
    log_n = _log2_exact(n)
    d = domain(log_n)
    out = np.empty_like(a)
    t = _default_threads if threads is None else max(1, int(threads))
    log_t = 0
    if log_n >= _MIN_PARALLEL_LOG:
        while (2 << log_t) <= t and log_t < log_n - 1:   # every thread needs >= 1 butterfly
            log_t += 1
    t = 1 << log_t
    log_block = log_n - max(1, log_t)          # the last stage always runs in _phase_last
    # phase 1: gather + block-local stages, one contiguous chunk per thread
    chunk = n >> log_t
    run_parallel([
        (_phase_local, (out, a, d.tw, log_n, inverse, log_block, k * chunk, (k + 1) * chunk))
        for k in range(t)
    ])
    # cross-block stages except the last
    half = n >> 1
    bchunk = half >> log_t
    for log_m in range(log_block, log_n - 1):
        run_parallel([
            (_phase_stage, (out, d.tw, log_n, inverse, log_m, k * bchunk, (k + 1) * bchunk))
            for k in range(t)
        ])
    # last stage, with the scale / coset shift folded in
    r = FR.p
    g_m = _mont(g % r)
    gm_m = _mont(pow(g, half, r))
    tasks = []
    for k in range(t):
        lo = k * bchunk
        s0 = _mont(c * pow(g, lo, r) % r)
        args = (out, d.tw, log_n, inverse, lo, lo + bchunk, mode, s0, g_m, gm_m)
        tasks.append((_phase_last, args))
    run_parallel(tasks)
    return out


def fft(a: np.ndarray, threads: int | None = None) -> np.ndarray:
    """Evaluations on <w_n> of the polynomial with coefficients ``a``: sum_j a[j] w^(ij)."""
    return _transform(a, False, _MODE_NONE, 1, 1, threads)


def ifft(a: np.ndarray, threads: int | None = None) -> np.ndarray:
    """Coefficients from evaluations on <w_n> (snarkjs Fr.ifft): the inverse of ``fft``."""
    n = FR.check(a).shape[0]
    return _transform(a, True, _MODE_SCALE, pow(n, -1, FR.p), 1, threads)


def ntt(a: np.ndarray, inverse: bool = False, threads: int | None = None) -> np.ndarray:
    return ifft(a, threads) if inverse else fft(a, threads)


def coset_coefficients(a_evals: np.ndarray, threads: int | None = None) -> np.ndarray:
    """ifft(a) * inc^i: snarkjs's Fr.batchApplyKey(Fr.ifft(a), 1, inc) in one pass."""
    a = FR.check(a_evals)
    log_n = _log2_exact(a.shape[0])
    d = domain(log_n)
    return _transform(a, True, _MODE_COSET, d.n_inv, d.coset, threads)


def odd_coset_evaluations(a_evals: np.ndarray, threads: int | None = None) -> np.ndarray:
    """Evaluations on the odd coset inc*<w_n>, inc = w_2n, from evaluations on <w_n>.

    Equals snarkjs groth16_prove's fft(batchApplyKey(ifft(a), 1, inc)). Montgomery in and out.
    """
    return fft(coset_coefficients(a_evals, threads), threads)
