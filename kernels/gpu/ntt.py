"""Radix-2 NTT over BLS12-381 Fr for the GPU (forward, inverse, odd-coset shift; up to 2^24).

Device layout is limb-major ``(8, n)`` uint32 Montgomery: limb k of element i at ``x[k, i]``, so a
warp touching 32 neighbouring elements reads 128 contiguous bytes per limb (coalesced).

Passes: a transform of 2^k is split into passes of up to ``t`` radix-2 stages. One block loads
2^(t+u) elements into shared memory (32 KiB): the 2^t elements that the pass's stages combine
(they differ in the pass's t index bits) times 2^u neighbours (the u lowest index bits), so
global loads and stores stay in whole 32-byte sectors even when the butterfly stride is huge;
it runs all t stages with a barrier between them and writes back. 2^20 and 2^24 take 3 passes,
each one read and one write of the array.

Orders: DIF (Gentleman-Sande) takes natural order to bit-reversed, DIT (Cooley-Tukey) takes
bit-reversed to natural. H = ifft -> coset shift -> fft therefore needs no permutation:
DIF-inverse, multiply position p by (g^bitrev(p))/n, DIT-forward.

Twiddles: one table of w_N^j (j < N/2) for the largest size used, built on the device from two
small host tables (one multiplication per entry); a 2^k transform indexes it with stride
2^(log N - k). Inverse twiddles use w^-e = -w^(N/2-e), so no second table.
Roots are snarkjs's (``Curve.root_of_unity``); the coset generator is ``kernels.ntt``'s.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from kernels.curves import BLS12_381
from kernels.field import FR_PARAMS, int_to_limbs
from kernels.gpu.launch import SHARED_ELEMS, Executor
from kernels.gpu.runtime import Target

MAX_LOG_N = 24
LIMBS = 8
SHARED_LOG = SHARED_ELEMS.bit_length() - 1   # 10
COALESCE_LOG = 3                             # 8 uint32 = one 32-byte sector per limb row

_R = FR_PARAMS.p
_RM = FR_PARAMS.r_mod_p


def mont(x: int) -> np.ndarray:
    return int_to_limbs(x % _R * _RM % _R, LIMBS)


def coset_generator(log_n: int) -> int:
    """snarkjs groth16_prove's ``inc``: w_2n, or nqr^2 at the two-adicity limit (as kernels.ntt)."""
    curve = BLS12_381
    return curve.root_of_unity(log_n + 1) if log_n < curve.two_adicity else curve.nqr**2 % _R


def plan_passes(log_n: int, shared_log: int = SHARED_LOG, coalesce_log: int = COALESCE_LOG,
                ) -> list[tuple[int, int, int]]:
    """(b_lo, t, u) per pass, top bits first (the DIF order; DIT runs them reversed).

    A pass butterflies index bits [b_lo, b_lo + t) and keeps the u lowest bits in the block
    for coalescing; t + u <= shared_log.
    """
    passes = []
    hi = log_n
    while hi > 0:
        if hi <= shared_log:
            passes.append((0, hi, 0))
            hi = 0
        else:
            t = shared_log - coalesce_log
            b_lo = hi - t
            passes.append((b_lo, t, min(coalesce_log, b_lo)))
            hi = b_lo
    return passes


def _split_log(k: int) -> int:
    """Bits of the low table when an exponent < 2^k is split into low/high table lookups."""
    return (k + 1) // 2


def _pow_tables(base: int, k: int, scale: int = 1) -> tuple[np.ndarray, np.ndarray, int]:
    """Tables so that base^e * scale = lo[e & mask] * hi[e >> kl] for e < 2^k (Montgomery rows)."""
    kl = _split_log(k)
    lo = [1]
    for _ in range((1 << kl) - 1):
        lo.append(lo[-1] * base % _R)
    step = pow(base, 1 << kl, _R)
    hi = [scale % _R]
    for _ in range((1 << max(0, k - kl)) - 1):
        hi.append(hi[-1] * step % _R)
    lo_a = np.stack([mont(v) for v in lo])
    hi_a = np.stack([mont(v) for v in hi])
    return lo_a, hi_a, kl


# --------------------------------------------------------------------------- per-thread bodies

def build_ntt(t: Target) -> types.SimpleNamespace:
    return t.memo("ntt", lambda: _build(t))


def _build(tg: Target) -> types.SimpleNamespace:
    jit, dev, fr = tg.jit, tg.dev, tg.fr
    mul = fr.mont_mul
    add = fr.add
    sub = fr.sub
    copy = fr.copy
    from_mont = fr.from_mont

    def bitrev(i, k):
        r = 0
        for _ in range(k):
            r = (r << 1) | (i & 1)
            i >>= 1
        return r

    def pass_phase(phase, blk, tid, nthr, sh, x, tw, log_tw, b_lo, t, u, dit, inverse):
        """Phase 0 loads the block's tile, phases 1..t run one stage each, phase t+1 stores."""
        umask = (1 << u) - 1
        mid_bits = b_lo - u
        mid = blk & ((1 << mid_bits) - 1)
        high = blk >> mid_bits
        base = (high << (b_lo + t)) | (mid << u)
        g = 1 << (t + u)
        if phase == 0 or phase == t + 1:
            for s in range(tid, g, nthr):
                idx = base | ((s >> u) << b_lo) | (s & umask)
                if phase == 0:
                    for k in range(LIMBS):
                        sh[k, s] = x[k, idx]
                else:
                    for k in range(LIMBS):
                        x[k, idx] = sh[k, s]
            return
        st = phase - 1
        bit = st if dit else t - 1 - st
        h = 1 << bit
        shift = log_tw - 1 - (b_lo + bit)
        half_tw = 1 << (log_tw - 1)
        a0 = dev.local.array(LIMBS, np.uint32)
        a1 = dev.local.array(LIMBS, np.uint32)
        w = dev.local.array(LIMBS, np.uint32)
        v = dev.local.array(LIMBS, np.uint32)
        for p in range(tid, g >> 1, nthr):
            lo = p & umask
            q = p >> u
            m0 = ((q >> bit) << (bit + 1)) | (q & (h - 1))
            s0 = (m0 << u) | lo
            s1 = s0 | (h << u)
            e = (((m0 & (h - 1)) << b_lo) | (mid << u) | lo) << shift
            for k in range(LIMBS):
                a0[k] = sh[k, s0]
                a1[k] = sh[k, s1]
            if e != 0:
                te = half_tw - e if inverse else e
                for k in range(LIMBS):
                    w[k] = tw[k, te]
            if dit:
                # t = a1 * w^(+-e); (a0 + t, a0 - t). Inverse: w^-e = -tw[N/2-e] swaps the signs.
                if e == 0:
                    copy(v, a1)
                else:
                    mul(v, a1, w)
                if inverse and e != 0:
                    sub(a1, a0, v)
                    add(a0, a0, v)
                    for k in range(LIMBS):
                        sh[k, s0] = a1[k]
                        sh[k, s1] = a0[k]
                else:
                    add(a1, a0, v)       # reuse a1 as the "+" output (v holds the product)
                    sub(v, a0, v)
                    for k in range(LIMBS):
                        sh[k, s0] = a1[k]
                        sh[k, s1] = v[k]
            else:
                # (a0 + a1, (a0 - a1) * w^(+-e)); inverse: (a1 - a0) * tw[N/2-e].
                add(v, a0, a1)
                for k in range(LIMBS):
                    sh[k, s0] = v[k]
                if e == 0:
                    sub(v, a0, a1)
                    for k in range(LIMBS):
                        sh[k, s1] = v[k]
                else:
                    if inverse:
                        sub(v, a1, a0)
                    else:
                        sub(v, a0, a1)
                    mul(a0, v, w)
                    for k in range(LIMBS):
                        sh[k, s1] = a0[k]

    def twiddle_body(j, lo_tab, hi_tab, kl, out):
        """out[:, j] = lo[j & mask] * hi[j >> kl]: w^j from two small power tables."""
        v = dev.local.array(LIMBS, np.uint32)
        mul(v, lo_tab[j & ((1 << kl) - 1)], hi_tab[j >> kl])
        for k in range(LIMBS):
            out[k, j] = v[k]

    def coset_body(p, x, lo_tab, hi_tab, kl, log_n):
        """x[:, p] *= g^bitrev(p) / n (the tables carry 1/n): shift of bit-reversed coefficients."""
        i = bitrev(p, log_n)
        f = dev.local.array(LIMBS, np.uint32)
        a = dev.local.array(LIMBS, np.uint32)
        v = dev.local.array(LIMBS, np.uint32)
        mul(f, lo_tab[i & ((1 << kl) - 1)], hi_tab[i >> kl])
        for k in range(LIMBS):
            a[k] = x[k, p]
        mul(v, a, f)
        for k in range(LIMBS):
            x[k, p] = v[k]

    def scale_body(i, x, s):
        a = dev.local.array(LIMBS, np.uint32)
        v = dev.local.array(LIMBS, np.uint32)
        for k in range(LIMBS):
            a[k] = x[k, i]
        mul(v, a, s)
        for k in range(LIMBS):
            x[k, i] = v[k]

    def bitrev_body(i, src, dst, log_n):
        r = bitrev(i, log_n)
        for k in range(LIMBS):
            dst[k, r] = src[k, i]

    def to_limb_major_body(i, src, dst):
        for k in range(LIMBS):
            dst[k, i] = src[i, k]

    def from_limb_major_body(i, src, dst):
        for k in range(LIMBS):
            dst[i, k] = src[k, i]

    def abc_body(i, a, b, c, out):
        """out[i] = from_mont(a*b - c): snarkjs joinABC, written row-major for the H MSM."""
        x = dev.local.array(LIMBS, np.uint32)
        y = dev.local.array(LIMBS, np.uint32)
        z = dev.local.array(LIMBS, np.uint32)
        for k in range(LIMBS):
            x[k] = a[k, i]
            y[k] = b[k, i]
        mul(z, x, y)
        for k in range(LIMBS):
            x[k] = c[k, i]
        sub(z, z, x)
        from_mont(y, z)
        for k in range(LIMBS):
            out[i, k] = y[k]

    bitrev = jit(bitrev)
    ns = types.SimpleNamespace()
    ns.pass_phase = jit(pass_phase)
    ns.twiddle = jit(twiddle_body)
    ns.coset = jit(coset_body)
    ns.scale = jit(scale_body)
    ns.bitrev = jit(bitrev_body)
    ns.to_limb_major = jit(to_limb_major_body)
    ns.from_limb_major = jit(from_limb_major_body)
    ns.abc = jit(abc_body)
    return ns


# --------------------------------------------------------------------------- host driver

class NttEngine:
    """NTTs on one executor, with the twiddle and coset tables cached on its memory.

    ``shared_log`` / ``coalesce_log`` are parameters so the tests can force multi-pass plans on
    tiny sizes; production uses 10 / 3.
    """

    def __init__(self, ex: Executor, shared_log: int = SHARED_LOG,
                 coalesce_log: int = COALESCE_LOG) -> None:
        if not 1 <= shared_log <= SHARED_LOG:
            raise ValueError(f"shared_log must be in 1..{SHARED_LOG}")
        self.ex = ex
        self.k = build_ntt(ex.target)
        self.shared_log = shared_log
        self.coalesce_log = min(coalesce_log, shared_log - 1)
        self._tw: Any = None
        self._log_tw = 0
        self._coset: dict[int, tuple[Any, Any, int]] = {}

    # -- tables ------------------------------------------------------------------------
    def twiddles(self, log_n: int) -> tuple[Any, int]:
        """The w_N^j table (N >= 2^log_n) on the executor's memory, grown on demand."""
        if not 1 <= log_n <= MAX_LOG_N:
            raise ValueError(f"NTT size 2^{log_n} outside 2^1..2^{MAX_LOG_N}")
        if self._tw is None or self._log_tw < log_n:
            xp = self.ex.xp
            k = log_n - 1                                   # exponents < 2^(log_n - 1)
            lo, hi, kl = _pow_tables(BLS12_381.root_of_unity(log_n), k)
            out = xp.empty((LIMBS, 1 << k), dtype=np.uint32)
            self.ex.grid(self.k.twiddle, 1 << k, xp.asarray(lo), xp.asarray(hi), kl, out)
            self._tw, self._log_tw = out, log_n
        return self._tw, self._log_tw

    def coset_tables(self, log_n: int) -> tuple[Any, Any, int]:
        if log_n not in self._coset:
            xp = self.ex.xp
            lo, hi, kl = _pow_tables(coset_generator(log_n), log_n, pow(1 << log_n, -1, _R))
            self._coset[log_n] = (xp.asarray(lo), xp.asarray(hi), kl)
        return self._coset[log_n]

    # -- transforms on limb-major device arrays (in place) --------------------------------
    def _passes(self, x: Any, log_n: int, dit: bool, inverse: bool) -> None:
        tw, log_tw = self.twiddles(log_n)
        plan = plan_passes(log_n, self.shared_log, self.coalesce_log)
        if dit:
            plan = plan[::-1]
        for b_lo, t, u in plan:
            nblocks = 1 << (log_n - t - u)
            nthreads = 1 << (t + u - 1)
            self.ex.phases(self.k.pass_phase, nblocks, nthreads, t + 2,
                           x, tw, log_tw, b_lo, t, u, dit, inverse)

    @staticmethod
    def _log2(n: int) -> int:
        log_n = n.bit_length() - 1
        if n < 2 or 1 << log_n != n:
            raise ValueError(f"NTT size {n} is not a power of two >= 2")
        return log_n

    def dif(self, x: Any, inverse: bool = False) -> None:
        """Natural -> bit-reversed order, unscaled."""
        self._passes(x, self._log2(x.shape[1]), dit=False, inverse=inverse)

    def dit(self, x: Any, inverse: bool = False) -> None:
        """Bit-reversed -> natural order, unscaled."""
        self._passes(x, self._log2(x.shape[1]), dit=True, inverse=inverse)

    def forward(self, x: Any) -> Any:
        """Natural-order NTT (snarkjs Fr.fft); returns a new limb-major array."""
        log_n = self._log2(x.shape[1])
        y = self.ex.xp.empty_like(x)
        self.ex.grid(self.k.bitrev, x.shape[1], x, y, log_n)
        self.dit(y)
        return y

    def inverse(self, x: Any) -> Any:
        """Natural-order inverse NTT with the 1/n scale (snarkjs Fr.ifft)."""
        log_n = self._log2(x.shape[1])
        y = self.ex.xp.empty_like(x)
        self.ex.grid(self.k.bitrev, x.shape[1], x, y, log_n)
        self.dit(y, inverse=True)
        self.ex.grid(self.k.scale, x.shape[1], y, self.ex.xp.asarray(mont(pow(1 << log_n, -1, _R))))
        return y

    def odd_coset(self, x: Any) -> None:
        """In place: evaluations on <w_n> -> evaluations on the odd coset inc*<w_n>.

        = fft(batchApplyKey(ifft(x), 1, inc)) of snarkjs groth16_prove, Montgomery in and out.
        """
        log_n = self._log2(x.shape[1])
        self.dif(x, inverse=True)
        lo, hi, kl = self.coset_tables(log_n)
        self.ex.grid(self.k.coset, x.shape[1], x, lo, hi, kl, log_n)
        self.dit(x)

    # -- layout helpers ------------------------------------------------------------------
    def to_limb_major(self, rows: Any) -> Any:
        out = self.ex.xp.empty((LIMBS, rows.shape[0]), dtype=np.uint32)
        self.ex.grid(self.k.to_limb_major, rows.shape[0], rows, out)
        return out

    def from_limb_major(self, x: Any) -> Any:
        out = self.ex.xp.empty((x.shape[1], LIMBS), dtype=np.uint32)
        self.ex.grid(self.k.from_limb_major, x.shape[1], x, out)
        return out

    def h_from_abc(self, a: Any, b: Any, c: Any) -> Any:
        """(n, 8) rows of from_mont(A*B - C) on the odd coset from limb-major a, b, c (consumed)."""
        for x in (a, b, c):
            self.odd_coset(x)
        out = self.ex.xp.empty((a.shape[1], LIMBS), dtype=np.uint32)
        self.ex.grid(self.k.abc, a.shape[1], a, b, c, out)
        return out
