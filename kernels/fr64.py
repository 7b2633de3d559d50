"""Fr Montgomery multiply on 4 x 64-bit limbs for the CPU NTT and QAP kernels (numba).

``kernels.field`` builds one 8 x 32-bit CIOS for every target (CPU and CUDA share it). On the
CPU a 64 x 64 -> 128-bit product is one instruction, so the same CIOS on 4 limbs does a quarter
of the inner steps: numba has no 128-bit integer, so ``_mac`` emits it as LLVM IR (``mul i128``),
which x86-64 lowers to ``mul``/``mulx``. Arguments and result keep the (8,) uint32 layout of
``kernels.field`` and the same R = 2^256, so the result is bit-identical to ``fr_mont_mul``
(tests/kernels/test_kernels_fr64.py checks it) and callers change only the function they call.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

from kernels.curves import BLS12_381
from kernels.field import FR, FR_PARAMS, Field

_R = BLS12_381.r
_P0, _P1, _P2, _P3 = (np.uint64((_R >> (64 * k)) & (2**64 - 1)) for k in range(4))
_PINV = np.uint64((-pow(_R, -1, 2**64)) % 2**64)  # -r^-1 mod 2^64
_S32 = np.uint64(32)
_M32 = np.uint64(0xFFFFFFFF)
_ZERO = np.uint64(0)


@intrinsic
def _mac(typingctx, acc, a, b, carry):
    """(lo, hi) of acc + a*b + carry as one 128-bit sum (it cannot overflow 128 bits)."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        word = args[0].type  # llvmlite's i64; its class makes the i128 (calling a type
        wide = type(word)(128)  # makes a constant), so this module needs no llvmlite import
        x, y, z, c = (builder.zext(v, wide) for v in args)
        s = builder.add(builder.add(builder.mul(y, z), x), c)
        lo = builder.trunc(s, word)
        hi = builder.trunc(builder.lshr(s, wide(64)), word)
        return context.make_tuple(builder, signature.return_type, (lo, hi))

    return sig, codegen


@numba.njit(nogil=True, inline="always")
def _word(a, k):
    return np.uint64(a[2 * k]) | (np.uint64(a[2 * k + 1]) << _S32)


@numba.njit(nogil=True, inline="always")
def _store(out, k, w):
    out[2 * k] = np.uint32(w & _M32)
    out[2 * k + 1] = np.uint32(w >> _S32)


@numba.njit(nogil=True, inline="always")
def _round(t0, t1, t2, t3, t4, a0, a1, a2, a3, bi):
    """One CIOS round: t += a*bi, then one Montgomery reduction step (t shifts down a word)."""
    t0, c = _mac(t0, a0, bi, _ZERO)
    t1, c = _mac(t1, a1, bi, c)
    t2, c = _mac(t2, a2, bi, c)
    t3, c = _mac(t3, a3, bi, c)
    t4, t5 = _mac(t4, c, np.uint64(1), _ZERO)
    m = t0 * _PINV
    _, c = _mac(t0, m, _P0, _ZERO)
    t0, c = _mac(t1, m, _P1, c)
    t1, c = _mac(t2, m, _P2, c)
    t2, c = _mac(t3, m, _P3, c)
    t3, c = _mac(t4, c, np.uint64(1), _ZERO)
    return t0, t1, t2, t3, t5 + c


@numba.njit(nogil=True)
def fr_mont_mul64(out, a, b):
    """out = a*b/2^256 mod r; (8,) uint32 arrays, reduced inputs; out may alias a or b."""
    a0, a1, a2, a3 = _word(a, 0), _word(a, 1), _word(a, 2), _word(a, 3)
    z = _ZERO
    t0, t1, t2, t3, t4 = _round(z, z, z, z, z, a0, a1, a2, a3, _word(b, 0))
    t0, t1, t2, t3, t4 = _round(t0, t1, t2, t3, t4, a0, a1, a2, a3, _word(b, 1))
    t0, t1, t2, t3, t4 = _round(t0, t1, t2, t3, t4, a0, a1, a2, a3, _word(b, 2))
    t0, t1, t2, t3, t4 = _round(t0, t1, t2, t3, t4, a0, a1, a2, a3, _word(b, 3))
    # t < 2r: subtract r when t (with its carry word t4) is at least r
    d0, br = _sub_borrow(t0, _P0, _ZERO)
    d1, br = _sub_borrow(t1, _P1, br)
    d2, br = _sub_borrow(t2, _P2, br)
    d3, br = _sub_borrow(t3, _P3, br)
    if t4 != _ZERO or br == _ZERO:
        t0, t1, t2, t3 = d0, d1, d2, d3
    _store(out, 0, t0)
    _store(out, 1, t1)
    _store(out, 2, t2)
    _store(out, 3, t3)


@numba.njit(nogil=True, inline="always")
def _sub_borrow(x, y, borrow):
    """(x - y - borrow mod 2^64, 1 when it borrowed)."""
    d = x - y - borrow
    out_borrow = np.uint64(1) if (x < y) or (x - y < borrow) else _ZERO
    return d, out_borrow


@numba.njit(nogil=True, inline="always")
def _add_carry(x, y, carry):
    """(x + y + carry mod 2^64, 1 when it carried)."""
    s, c = _mac(x, y, np.uint64(1), carry)
    return s, c


@numba.njit(nogil=True)
def fr_add64(out, a, b):
    """out = a + b mod r; (8,) uint32 arrays, reduced inputs; out may alias a or b."""
    s0, c = _add_carry(_word(a, 0), _word(b, 0), _ZERO)
    s1, c = _add_carry(_word(a, 1), _word(b, 1), c)
    s2, c = _add_carry(_word(a, 2), _word(b, 2), c)
    s3, c = _add_carry(_word(a, 3), _word(b, 3), c)
    d0, br = _sub_borrow(s0, _P0, _ZERO)
    d1, br = _sub_borrow(s1, _P1, br)
    d2, br = _sub_borrow(s2, _P2, br)
    d3, br = _sub_borrow(s3, _P3, br)
    if c != _ZERO or br == _ZERO:
        s0, s1, s2, s3 = d0, d1, d2, d3
    _store(out, 0, s0)
    _store(out, 1, s1)
    _store(out, 2, s2)
    _store(out, 3, s3)


@numba.njit(nogil=True)
def fr_sub64(out, a, b):
    """out = a - b mod r; (8,) uint32 arrays, reduced inputs; out may alias a or b."""
    d0, br = _sub_borrow(_word(a, 0), _word(b, 0), _ZERO)
    d1, br = _sub_borrow(_word(a, 1), _word(b, 1), br)
    d2, br = _sub_borrow(_word(a, 2), _word(b, 2), br)
    d3, br = _sub_borrow(_word(a, 3), _word(b, 3), br)
    if br != _ZERO:  # went below zero: add r back (the carry out is dropped)
        d0, c = _add_carry(d0, _P0, _ZERO)
        d1, c = _add_carry(d1, _P1, c)
        d2, c = _add_carry(d2, _P2, c)
        d3, c = _add_carry(d3, _P3, c)
    _store(out, 0, d0)
    _store(out, 1, d1)
    _store(out, 2, d2)
    _store(out, 3, d3)


# ---- batch kernels: rows [lo, hi), the same shape as kernels.field's, for FR64 below ----

@numba.njit(nogil=True, cache=True)
def _mul_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fr_mont_mul64(out[i], a[i], b[i])


@numba.njit(nogil=True, cache=True)
def _add_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fr_add64(out[i], a[i], b[i])


@numba.njit(nogil=True, cache=True)
def _sub_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fr_sub64(out[i], a[i], b[i])


FR64 = Field(FR_PARAMS, FR.ops, {"mul": _mul_rows, "add": _add_rows, "sub": _sub_rows})
"""Batch Fr ops on the 64-bit path (mul, add, sub), same API as ``kernels.field.FR``."""
