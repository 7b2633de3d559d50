"""BLS12-381 G1 arithmetic in XYZZ coordinates for the MSM kernels (CPU and GPU from one source).

XYZZ ("extended Jacobian") represents (x, y) as (X, Y, ZZ, ZZZ) with x = X/ZZ, y = Y/ZZZ and
ZZ^3 = ZZZ^2. It is what bucket accumulation wants: a mixed addition of an affine point costs
8M + 2S and needs no inversion, and doubling is 6M + 3S (Bernstein-Lange EFD, "xyzz" for
a = 0: madd-2008-s, add-2008-s, dbl-2008-s-1, mdbl-2008-s-1).

A point is a ``(48,)`` uint32 array of Montgomery Fq limbs: X [0:12], Y [12:24], ZZ [24:36],
ZZZ [36:48]; ZZ = 0 means infinity. Affine inputs are the zkey's ``(2, 12)`` Montgomery rows,
where all-zero means infinity ((0, 0) is not on y^2 = x^3 + 4, so the encoding is unambiguous).
All functions work in place on the accumulator, which is what the bucket loops need.
"""

from __future__ import annotations

import types

import numpy as np

from kernels.curves import BLS12_381
from kernels.field import int_to_limbs
from kernels.gpu.runtime import Target

L = 12                 # Fq limbs
XYZZ_WORDS = 4 * L     # uint32 words per XYZZ point
AFFINE_WORDS = 2 * L   # uint32 words per affine point


def build_g1(t: Target) -> types.SimpleNamespace:
    """XYZZ point routines for target ``t`` (memoised per target)."""
    return t.memo("g1", lambda: _build(t))


def _build(t: Target) -> types.SimpleNamespace:
    jit, dev, fq = t.jit, t.dev, t.fq
    mul = fq.mont_mul
    add = fq.add
    sub = fq.sub
    neg = fq.neg
    copy = fq.copy
    is_zero = fq.is_zero
    set_zero = fq.set_zero
    set_one = fq.set_one

    def set_inf(p):
        for j in range(XYZZ_WORDS):
            p[j] = np.uint32(0)

    def is_inf(p):
        return is_zero(p[24:36])

    def copy_pt(p, q):
        for j in range(XYZZ_WORDS):
            p[j] = q[j]

    def negate(p):
        """p = -p (Y -> -Y)."""
        neg(p[12:24], p[12:24])

    def _mdbl(p, x, y):
        """p = 2*(x, y) for affine (x, y): mdbl-2008-s-1 (p is overwritten; x, y not in p)."""
        u = dev.local.array(L, np.uint32)
        v = dev.local.array(L, np.uint32)
        w = dev.local.array(L, np.uint32)
        s = dev.local.array(L, np.uint32)
        m = dev.local.array(L, np.uint32)
        tt = dev.local.array(L, np.uint32)
        add(u, y, y)                 # U = 2y
        mul(v, u, u)                 # V = U^2
        mul(w, u, v)                 # W = U*V
        mul(s, x, v)                 # S = x*V
        mul(tt, x, x)
        add(m, tt, tt)
        add(m, m, tt)                # M = 3x^2
        mul(tt, m, m)
        sub(tt, tt, s)
        sub(p[0:12], tt, s)          # X3 = M^2 - 2S
        sub(tt, s, p[0:12])
        mul(u, m, tt)                # M*(S - X3)
        mul(tt, w, y)
        sub(p[12:24], u, tt)         # Y3 = M(S-X3) - W*y
        copy(p[24:36], v)            # ZZ3 = V
        copy(p[36:48], w)            # ZZZ3 = W

    def dbl_fixed(p):
        """p = 2p: dbl-2008-s-1."""
        if is_inf(p):
            return
        u = dev.local.array(L, np.uint32)
        v = dev.local.array(L, np.uint32)
        w = dev.local.array(L, np.uint32)
        s = dev.local.array(L, np.uint32)
        m = dev.local.array(L, np.uint32)
        tt = dev.local.array(L, np.uint32)
        wy = dev.local.array(L, np.uint32)
        add(u, p[12:24], p[12:24])   # U = 2Y
        mul(v, u, u)                 # V = U^2
        mul(w, u, v)                 # W = U*V
        mul(s, p[0:12], v)           # S = X*V
        mul(tt, p[0:12], p[0:12])
        add(m, tt, tt)
        add(m, m, tt)                # M = 3X^2 (a = 0)
        mul(wy, w, p[12:24])         # W*Y
        mul(tt, m, m)
        sub(tt, tt, s)
        sub(p[0:12], tt, s)          # X3 = M^2 - 2S
        sub(tt, s, p[0:12])
        mul(u, m, tt)
        sub(p[12:24], u, wy)         # Y3 = M(S - X3) - W*Y
        mul(tt, p[24:36], v)
        copy(p[24:36], tt)           # ZZ3 = V*ZZ
        mul(tt, p[36:48], w)
        copy(p[36:48], tt)           # ZZZ3 = W*ZZZ

    def add_affine(p, x, y, negative):
        """p += (x, y), or p -= (x, y) when ``negative``: madd-2008-s. (0, 0) is infinity."""
        if is_zero(x) and is_zero(y):
            return
        ny = dev.local.array(L, np.uint32)
        if negative:
            neg(ny, y)
        else:
            copy(ny, y)
        if is_inf(p):
            copy(p[0:12], x)
            copy(p[12:24], ny)
            set_one(p[24:36])
            set_one(p[36:48])
            return
        pp = dev.local.array(L, np.uint32)
        rr = dev.local.array(L, np.uint32)
        tt = dev.local.array(L, np.uint32)
        mul(tt, x, p[24:36])
        sub(pp, tt, p[0:12])         # P = x*ZZ - X
        mul(tt, ny, p[36:48])
        sub(rr, tt, p[12:24])        # R = y*ZZZ - Y
        if is_zero(pp):
            if is_zero(rr):
                _mdbl(p, x, ny)      # same point: double it
            else:
                set_inf(p)           # P + (-P)
            return
        ppp = dev.local.array(L, np.uint32)
        q = dev.local.array(L, np.uint32)
        u = dev.local.array(L, np.uint32)
        mul(u, pp, pp)               # PP = P^2
        mul(ppp, pp, u)              # PPP = P*PP
        mul(q, p[0:12], u)           # Q = X*PP
        mul(tt, p[24:36], u)
        copy(p[24:36], tt)           # ZZ3 = ZZ*PP
        mul(tt, p[36:48], ppp)
        copy(p[36:48], tt)           # ZZZ3 = ZZZ*PPP
        mul(tt, rr, rr)
        sub(tt, tt, ppp)
        sub(tt, tt, q)
        sub(p[0:12], tt, q)          # X3 = R^2 - PPP - 2Q
        sub(tt, q, p[0:12])
        mul(u, rr, tt)               # R*(Q - X3)
        mul(tt, p[12:24], ppp)       # Y*PPP
        sub(p[12:24], u, tt)         # Y3

    def add_xyzz(p, q):
        """p += q, both XYZZ: add-2008-s."""
        if is_inf(q):
            return
        if is_inf(p):
            copy_pt(p, q)
            return
        u1 = dev.local.array(L, np.uint32)
        s1 = dev.local.array(L, np.uint32)
        pp = dev.local.array(L, np.uint32)
        rr = dev.local.array(L, np.uint32)
        tt = dev.local.array(L, np.uint32)
        mul(u1, p[0:12], q[24:36])   # U1 = X1*ZZ2
        mul(tt, q[0:12], p[24:36])   # U2 = X2*ZZ1
        sub(pp, tt, u1)              # P = U2 - U1
        mul(s1, p[12:24], q[36:48])  # S1 = Y1*ZZZ2
        mul(tt, q[12:24], p[36:48])  # S2 = Y2*ZZZ1
        sub(rr, tt, s1)              # R = S2 - S1
        if is_zero(pp):
            if is_zero(rr):
                dbl_fixed(p)
            else:
                set_inf(p)
            return
        ppp = dev.local.array(L, np.uint32)
        q_ = dev.local.array(L, np.uint32)
        u = dev.local.array(L, np.uint32)
        mul(u, pp, pp)               # PP
        mul(ppp, pp, u)              # PPP
        mul(q_, u1, u)               # Q = U1*PP
        mul(tt, p[24:36], q[24:36])
        mul(p[24:36], tt, u)         # ZZ3 = ZZ1*ZZ2*PP
        mul(tt, p[36:48], q[36:48])
        mul(p[36:48], tt, ppp)       # ZZZ3 = ZZZ1*ZZZ2*PPP
        mul(tt, rr, rr)
        sub(tt, tt, ppp)
        sub(tt, tt, q_)
        sub(p[0:12], tt, q_)         # X3 = R^2 - PPP - 2Q
        sub(tt, q_, p[0:12])
        mul(u, rr, tt)               # R*(Q - X3)
        mul(tt, s1, ppp)             # S1*PPP
        sub(p[12:24], u, tt)         # Y3

    def mul_small(p, k):
        """p = k*p for a small non-negative integer k (double-and-add, MSB first)."""
        if k == 0:
            set_inf(p)
            return
        base = dev.local.array(XYZZ_WORDS, np.uint32)
        copy_pt(base, p)
        top = 0
        while (k >> (top + 1)) != 0:
            top += 1
        for b in range(top - 1, -1, -1):
            dbl_fixed(p)
            if (k >> b) & 1:
                add_xyzz(p, base)

    ns = types.SimpleNamespace()
    set_inf = jit(set_inf)
    is_inf = jit(is_inf)
    copy_pt = jit(copy_pt)
    negate = jit(negate)
    _mdbl = jit(_mdbl)
    dbl_fixed = jit(dbl_fixed)
    # Inlined into the accumulation and reduction loops, so their accumulator stays in registers
    # (a called function takes it by pointer, which puts it on the stack). The bucket-segment
    # kernel keeps the called add_xyzz: three inlined copies plus mul_small cost far more NVVM
    # time than that kernel's share of an MSM is worth.
    add_affine = t.inline(add_affine)
    add_xyzz_inline = t.inline(add_xyzz)
    add_xyzz = jit(add_xyzz)
    mul_small = jit(mul_small)
    ns.__dict__.update(set_inf=set_inf, is_inf=is_inf, copy=copy_pt, negate=negate,
                       dbl=dbl_fixed, add_affine=add_affine, add_xyzz=add_xyzz,
                       add_xyzz_inline=add_xyzz_inline,
                       mul_small=mul_small, set_zero=set_zero)
    return ns


# --------------------------------------------------------------------------- host conversions

_Q = BLS12_381.q
_R_INV_Q = pow(1 << (32 * L), -1, _Q)
_R_Q = (1 << (32 * L)) % _Q


def _limbs_int(a: np.ndarray) -> int:
    return int.from_bytes(np.ascontiguousarray(a, dtype="<u4").tobytes(), "little")


def _mont_int(a: np.ndarray) -> int:
    """Montgomery limbs -> field element as a Python int."""
    return _limbs_int(a) * _R_INV_Q % _Q


def _int_mont(x: int) -> np.ndarray:
    return int_to_limbs(x * _R_Q % _Q, L)


def xyzz_to_affine_ints(p: np.ndarray) -> tuple[int, int] | None:
    """(48,) XYZZ limbs -> affine (x, y) ints, None for infinity (host side, big ints)."""
    zz = _mont_int(p[24:36])
    if zz == 0:
        return None
    zzz = _mont_int(p[36:48])
    x = _mont_int(p[0:12]) * pow(zz, -1, _Q) % _Q
    y = _mont_int(p[12:24]) * pow(zzz, -1, _Q) % _Q
    return x, y


def affine_ints_to_xyzz(pt: tuple[int, int] | None) -> np.ndarray:
    out = np.zeros(XYZZ_WORDS, np.uint32)
    if pt is None:
        return out
    out[0:12] = _int_mont(pt[0])
    out[12:24] = _int_mont(pt[1])
    out[24:36] = _int_mont(1)
    out[36:48] = _int_mont(1)
    return out


def xyzz_to_g1(p: np.ndarray):  # -> G1Point
    """(48,) XYZZ limbs -> py_arkworks_bls12381.G1Point (unchecked: the kernels' own output)."""
    from py_arkworks_bls12381 import G1Point

    aff = xyzz_to_affine_ints(p)
    if aff is None:
        return G1Point.identity()
    raw = aff[0].to_bytes(48, "little") + aff[1].to_bytes(48, "little")
    return G1Point.from_xy_bytes_unchecked_le(raw)


def g1_to_affine_mont(points: list) -> np.ndarray:
    """G1Points -> (n, 2, 12) Montgomery uint32, infinity as zeros (the zkey layout)."""
    out = np.zeros((len(points), 2, L), np.uint32)
    for i, pt in enumerate(points):
        raw = pt.to_xy_bytes_le()
        if raw == bytes(len(raw)):
            continue
        out[i, 0] = _int_mont(int.from_bytes(raw[:48], "little"))
        out[i, 1] = _int_mont(int.from_bytes(raw[48:], "little"))
    return out


