"""Multi-limb Montgomery arithmetic for prime fields (BLS12-381 Fr and Fq), shared by CPU and GPU.

Layout (docs/interfaces.md): an element is ``L`` little-endian ``uint32`` limbs, exactly the bytes
snarkjs writes; a batch is a C-contiguous ``(n, L)`` uint32 array. Montgomery form uses R = 2^(32L).
Every value this module produces is fully reduced (in [0, p)), so arrays compare byte-for-byte with
snarkjs's buffers.

Two layers:

* **Scalar ops** (``make_scalar_ops``): plain Python functions over 1-D ``uint32`` limb arrays
  (``(L,)`` slices such as ``x[i]``, or local arrays), closing over compile-time constants of one
  field. They use only fixed-size loops, ``np.uint64`` intermediates and no Python objects, so the
  SAME source compiles for the CPU and for the GPU; pass the decorator that picks the target::

      from numba import cuda
      from kernels.field import FR_PARAMS, make_scalar_ops
      fr_dev = make_scalar_ops(FR_PARAMS, cuda.jit(device=True, inline=True))
      mont_mul = fr_dev.mont_mul    # bind to a plain name: kernels cannot read namespace attributes
      # inside a @cuda.jit kernel: mont_mul(out, a[i], b[i]); out may be cuda.local.array(8, uint32)

  (checked: compiles to sm_90 PTX with numba-cuda, local arrays stay in registers.)

  The CPU versions (``numba.njit``) are ``FR.ops`` / ``FQ.ops``. Ops write their result into
  ``out``; ``add``/``sub``/``neg``/``copy`` allow ``out`` to alias an input, ``mont_mul``,
  ``mont_sqr``, ``to_mont`` and ``from_mont`` do NOT (``out`` doubles as the accumulator).
  Inputs must be reduced (< p).

* **Batch CPU kernels** (``FR.mul(a, b)`` ...): ``@njit(nogil=True, cache=True)`` loops over
  ``(n, L)`` arrays; they release the GIL so the engine can call them from several threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numba
import numpy as np

from kernels.curves import BLS12_381, Curve


@dataclass(frozen=True)
class FieldParams:
    """Constants of one prime field in Montgomery form with 32-bit limbs (R = 2^(32*limbs))."""

    name: str
    p: int
    limbs: int
    r_mod_p: int     # R mod p: Montgomery one
    r2_mod_p: int    # R^2 mod p: to_mont multiplier
    r3_mod_p: int    # R^3 mod p: to_mont of a Montgomery value (used by inverse helpers)
    pinv: int        # -p^-1 mod 2^32

    @property
    def nbytes(self) -> int:
        return 4 * self.limbs


def field_params(name: str, p: int, limbs: int) -> FieldParams:
    """Derive Montgomery constants for modulus ``p`` with ``limbs`` 32-bit limbs."""
    if p % 2 == 0 or p >= 1 << (32 * limbs):
        raise ValueError(f"{name}: modulus must be odd and fit in {limbs} limbs")
    # Conditional-subtraction reductions below rely on 2p fitting in L limbs + one carry word.
    r = 1 << (32 * limbs)
    return FieldParams(
        name=name,
        p=p,
        limbs=limbs,
        r_mod_p=r % p,
        r2_mod_p=r * r % p,
        r3_mod_p=r * r * r % p,
        pinv=(-pow(p, -1, 1 << 32)) % (1 << 32),
    )


def int_to_limbs(x: int, limbs: int) -> np.ndarray:
    """One integer -> (limbs,) uint32 little-endian."""
    return np.frombuffer(int(x).to_bytes(4 * limbs, "little"), dtype="<u4").astype(np.uint32)


def ints_to_array(values: Any, limbs: int) -> np.ndarray:
    """Integers -> (n, limbs) uint32 little-endian (no reduction; values must fit)."""
    values = [int(v) for v in values]
    buf = b"".join(v.to_bytes(4 * limbs, "little") for v in values)
    return np.frombuffer(buf, dtype="<u4").astype(np.uint32).reshape(len(values), limbs)


def array_to_ints(arr: np.ndarray) -> list[int]:
    """(n, limbs) uint32 -> list of Python ints (for tests, public signals, debugging)."""
    a = np.ascontiguousarray(arr, dtype="<u4")
    if a.ndim == 1:
        a = a.reshape(1, -1)
    width = a.shape[1] * 4
    raw = a.tobytes()
    return [int.from_bytes(raw[i * width:(i + 1) * width], "little") for i in range(a.shape[0])]


def make_scalar_ops(params: FieldParams, jit: Any) -> SimpleNamespace:
    """Build the field's scalar ops, each decorated with ``jit`` (njit, or cuda.jit(device=True)).

    Returns a namespace with: copy, set_zero, set_one (Montgomery one), is_zero, eq, gte, add, sub,
    neg, mont_mul, mont_sqr, to_mont, from_mont, and the constant arrays MOD, R2, ONE_MONT.
    All element arguments are 1-D uint32 arrays of length ``params.limbs``.
    """
    L = params.limbs
    MOD = int_to_limbs(params.p, L)                      # uint32 limbs of p
    MOD64 = MOD.astype(np.uint64)
    R2 = int_to_limbs(params.r2_mod_p, L)
    ONE_MONT = int_to_limbs(params.r_mod_p, L)
    PINV = np.uint64(params.pinv)
    MASK = np.uint64(0xFFFFFFFF)
    S32 = np.uint64(32)
    ZERO = np.uint64(0)
    ONE = np.uint64(1)

    def copy(out, a):
        for j in range(L):
            out[j] = a[j]

    def set_zero(out):
        for j in range(L):
            out[j] = np.uint32(0)

    def set_one(out):
        for j in range(L):
            out[j] = ONE_MONT[j]

    def is_zero(a):
        acc = np.uint32(0)
        for j in range(L):
            acc |= a[j]
        return acc == np.uint32(0)

    def eq(a, b):
        acc = np.uint32(0)
        for j in range(L):
            acc |= a[j] ^ b[j]
        return acc == np.uint32(0)

    def gte(a, b):
        """a >= b as unsigned L-limb integers."""
        for k in range(L):
            j = L - 1 - k
            if a[j] != b[j]:
                return a[j] > b[j]
        return True

    def _cond_sub_mod(out, carry):
        """Reduce out (+ carry*2^(32L), value < 2p) into [0, p) without data-dependent branches."""
        borrow = ZERO
        for j in range(L):
            d = np.uint64(out[j]) - MOD64[j] - borrow
            borrow = (d >> S32) & ONE
        # subtract p when the value is >= p: a carry out, or no borrow from the trial subtraction
        use = carry | (borrow ^ ONE)
        mask = (ZERO - use) & MASK
        borrow = ZERO
        for j in range(L):
            d = np.uint64(out[j]) - (MOD64[j] & mask) - borrow
            out[j] = np.uint32(d & MASK)
            borrow = (d >> S32) & ONE

    def add(out, a, b):
        carry = ZERO
        for j in range(L):
            s = np.uint64(a[j]) + np.uint64(b[j]) + carry
            out[j] = np.uint32(s & MASK)
            carry = s >> S32
        _cond_sub_mod(out, carry)

    def sub(out, a, b):
        borrow = ZERO
        for j in range(L):
            d = np.uint64(a[j]) - np.uint64(b[j]) - borrow
            out[j] = np.uint32(d & MASK)
            borrow = (d >> S32) & ONE
        # add p back when the subtraction borrowed
        mask = (ZERO - borrow) & MASK
        carry = ZERO
        for j in range(L):
            s = np.uint64(out[j]) + (MOD64[j] & mask) + carry
            out[j] = np.uint32(s & MASK)
            carry = s >> S32

    def neg(out, a):
        # p - a, or 0 when a == 0 (mask the modulus away)
        nz = np.uint64(0) if is_zero(a) else ONE
        mask = (ZERO - nz) & MASK
        borrow = ZERO
        for j in range(L):
            d = (MOD64[j] & mask) - np.uint64(a[j]) - borrow
            out[j] = np.uint32(d & MASK)
            borrow = (d >> S32) & ONE

    def mont_mul(out, a, b):
        """out = a*b/R mod p (CIOS). out must not alias a or b: it is the running accumulator."""
        for j in range(L):
            out[j] = np.uint32(0)
        hi = ZERO                                # accumulator word L
        for i in range(L):
            bi = np.uint64(b[i])
            carry = ZERO
            for j in range(L):
                s = np.uint64(out[j]) + np.uint64(a[j]) * bi + carry
                out[j] = np.uint32(s & MASK)
                carry = s >> S32
            s = hi + carry
            hi = s & MASK
            hi2 = s >> S32                        # accumulator word L+1 (0 or 1)
            m = (np.uint64(out[0]) * PINV) & MASK
            s = np.uint64(out[0]) + m * MOD64[0]
            carry = s >> S32
            for j in range(1, L):
                s = np.uint64(out[j]) + m * MOD64[j] + carry
                out[j - 1] = np.uint32(s & MASK)
                carry = s >> S32
            s = hi + carry
            out[L - 1] = np.uint32(s & MASK)
            hi = hi2 + (s >> S32)
        _cond_sub_mod(out, hi)

    def mont_sqr(out, a):
        """out = a^2/R mod p; out must not alias a."""
        mont_mul(out, a, a)

    def to_mont(out, a):
        """normal -> Montgomery (a*R mod p); out must not alias a."""
        mont_mul(out, a, R2)

    def from_mont(out, a):
        """Montgomery -> normal (a/R mod p); out must not alias a."""
        for j in range(L):
            out[j] = np.uint32(0)
        hi = ZERO
        # mont_mul(a, 1) specialised: multiply step only contributes a[j] at i == 0.
        for i in range(L):
            if i == 0:
                for j in range(L):
                    out[j] = a[j]
            m = (np.uint64(out[0]) * PINV) & MASK
            s = np.uint64(out[0]) + m * MOD64[0]
            carry = s >> S32
            for j in range(1, L):
                s = np.uint64(out[j]) + m * MOD64[j] + carry
                out[j - 1] = np.uint32(s & MASK)
                carry = s >> S32
            s = hi + carry
            out[L - 1] = np.uint32(s & MASK)
            hi = s >> S32
        _cond_sub_mod(out, hi)

    ns = SimpleNamespace(limbs=L, params=params, MOD=MOD, R2=R2, ONE_MONT=ONE_MONT)
    # Decorate helpers first: later functions resolve them through this closure at compile time.
    _cond_sub_mod = jit(_cond_sub_mod)
    copy = jit(copy)
    set_zero = jit(set_zero)
    set_one = jit(set_one)
    is_zero = jit(is_zero)
    eq = jit(eq)
    gte = jit(gte)
    add = jit(add)
    sub = jit(sub)
    neg = jit(neg)
    mont_mul = jit(mont_mul)
    mont_sqr = jit(mont_sqr)
    to_mont = jit(to_mont)
    from_mont = jit(from_mont)
    ns.__dict__.update(
        copy=copy, set_zero=set_zero, set_one=set_one, is_zero=is_zero, eq=eq, gte=gte,
        add=add, sub=sub, neg=neg, mont_mul=mont_mul, mont_sqr=mont_sqr,
        to_mont=to_mont, from_mont=from_mont,
    )
    return ns


def _cpu_jit(fn: Any) -> Any:
    return numba.njit(nogil=True, inline="always")(fn)


FR_PARAMS = field_params("bls12_381.fr", BLS12_381.r, BLS12_381.fr_limbs)
FQ_PARAMS = field_params("bls12_381.fq", BLS12_381.q, BLS12_381.fq_limbs)

_fr = make_scalar_ops(FR_PARAMS, _cpu_jit)
_fq = make_scalar_ops(FQ_PARAMS, _cpu_jit)

# Module-level names so the cached batch kernels below (and in ntt.py / qap.py) can call them:
# numba caches a function that calls a global dispatcher, not one that calls a closure variable.
fr_add = _fr.add
fr_sub = _fr.sub
fr_neg = _fr.neg
fr_mont_mul = _fr.mont_mul
fr_to_mont = _fr.to_mont
fr_from_mont = _fr.from_mont
fr_copy = _fr.copy
fq_add = _fq.add
fq_sub = _fq.sub
fq_mont_mul = _fq.mont_mul
fq_to_mont = _fq.to_mont
fq_from_mont = _fq.from_mont


# ---- batch kernels: rows [lo, hi) of (n, L) uint32 arrays, so callers can split the work ----

@numba.njit(nogil=True, cache=True)
def _fr_to_mont_rows(out, a, lo, hi):
    for i in range(lo, hi):
        fr_to_mont(out[i], a[i])


@numba.njit(nogil=True, cache=True)
def _fr_from_mont_rows(out, a, lo, hi):
    for i in range(lo, hi):
        fr_from_mont(out[i], a[i])


@numba.njit(nogil=True, cache=True)
def _fr_mul_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fr_mont_mul(out[i], a[i], b[i])


@numba.njit(nogil=True, cache=True)
def _fr_add_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fr_add(out[i], a[i], b[i])


@numba.njit(nogil=True, cache=True)
def _fr_sub_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fr_sub(out[i], a[i], b[i])


@numba.njit(nogil=True, cache=True)
def _fq_to_mont_rows(out, a, lo, hi):
    for i in range(lo, hi):
        fq_to_mont(out[i], a[i])


@numba.njit(nogil=True, cache=True)
def _fq_from_mont_rows(out, a, lo, hi):
    for i in range(lo, hi):
        fq_from_mont(out[i], a[i])


@numba.njit(nogil=True, cache=True)
def _fq_mul_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fq_mont_mul(out[i], a[i], b[i])


@numba.njit(nogil=True, cache=True)
def _fq_add_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fq_add(out[i], a[i], b[i])


@numba.njit(nogil=True, cache=True)
def _fq_sub_rows(out, a, b, lo, hi):
    for i in range(lo, hi):
        fq_sub(out[i], a[i], b[i])


@numba.njit(nogil=True, cache=True)
def _first_unreduced(a, mod):
    """Index of the first row >= mod (as an L-limb integer), or -1."""
    for i in range(a.shape[0]):
        ge = True
        for k in range(a.shape[1]):
            j = a.shape[1] - 1 - k
            if a[i, j] != mod[j]:
                ge = a[i, j] > mod[j]
                break
        if ge:
            return i
    return -1


class Field:
    """Batch operations of one field on (n, L) uint32 arrays; each returns a new array.

    ``threads`` splits a call across that many threads (the kernels release the GIL); the default 1
    suits the engine, which already runs several partitions at once.
    """

    def __init__(self, params: FieldParams, ops: SimpleNamespace, kernels: dict[str, Any]) -> None:
        self.params = params
        self.limbs = params.limbs
        self.p = params.p
        self.ops = ops          # njit scalar ops (CPU), see make_scalar_ops
        self._k = kernels

    # -- conversions between Python ints and arrays (tests, public signals) --
    def from_ints(self, values: Any) -> np.ndarray:
        vals = [int(v) for v in values]
        if any(v < 0 or v >= self.p for v in vals):
            raise ValueError(f"{self.params.name}: value out of range [0, p)")
        return ints_to_array(vals, self.limbs)

    def to_ints(self, arr: np.ndarray) -> list[int]:
        return array_to_ints(arr)

    def check(self, a: np.ndarray) -> np.ndarray:
        """Return ``a`` as a C-contiguous (n, L) uint32 array (a view when it already is one)."""
        a = np.ascontiguousarray(a)
        if a.dtype != np.uint32 or a.ndim != 2 or a.shape[1] != self.limbs:
            raise ValueError(
                f"{self.params.name}: expected (n, {self.limbs}) uint32, got {a.shape} {a.dtype}"
            )
        return a

    def first_unreduced(self, a: np.ndarray) -> int:
        """Index of the first element >= p, or -1: input files are checked with this before any
        kernel sees them, because the arithmetic assumes reduced inputs."""
        a = self.check(a)
        return int(_first_unreduced(a, self.ops.MOD)) if a.shape[0] else -1

    def _unary(self, name: str, a: np.ndarray, threads: int) -> np.ndarray:
        a = self.check(a)
        out = np.empty_like(a)
        run_rows(self._k[name], (out, a), a.shape[0], threads)
        return out

    def _binary(self, name: str, a: np.ndarray, b: np.ndarray, threads: int) -> np.ndarray:
        a, b = self.check(a), self.check(b)
        if a.shape != b.shape:
            raise ValueError(f"{self.params.name}: shape mismatch {a.shape} vs {b.shape}")
        out = np.empty_like(a)
        run_rows(self._k[name], (out, a, b), a.shape[0], threads)
        return out

    def to_mont(self, a: np.ndarray, threads: int = 1) -> np.ndarray:
        return self._unary("to_mont", a, threads)

    def from_mont(self, a: np.ndarray, threads: int = 1) -> np.ndarray:
        return self._unary("from_mont", a, threads)

    def mul(self, a: np.ndarray, b: np.ndarray, threads: int = 1) -> np.ndarray:
        """Montgomery product a*b/R (Montgomery in, Montgomery out)."""
        return self._binary("mul", a, b, threads)

    def add(self, a: np.ndarray, b: np.ndarray, threads: int = 1) -> np.ndarray:
        return self._binary("add", a, b, threads)

    def sub(self, a: np.ndarray, b: np.ndarray, threads: int = 1) -> np.ndarray:
        return self._binary("sub", a, b, threads)


def run_rows(kernel: Any, args: tuple, n: int, threads: int, min_rows: int = 1 << 12) -> None:
    """Run ``kernel(*args, lo, hi)`` over [0, n), split into ``threads`` nogil chunks."""
    from kernels._threads import run_parallel

    threads = max(1, min(int(threads), n // min_rows if n >= min_rows else 1))
    if threads == 1:
        kernel(*args, 0, n)
        return
    bounds = [n * t // threads for t in range(threads + 1)]
    run_parallel([(kernel, (*args, bounds[t], bounds[t + 1])) for t in range(threads)])


FR = Field(FR_PARAMS, _fr, {
    "to_mont": _fr_to_mont_rows, "from_mont": _fr_from_mont_rows, "mul": _fr_mul_rows,
    "add": _fr_add_rows, "sub": _fr_sub_rows,
})
FQ = Field(FQ_PARAMS, _fq, {
    "to_mont": _fq_to_mont_rows, "from_mont": _fq_from_mont_rows, "mul": _fq_mul_rows,
    "add": _fq_add_rows, "sub": _fq_sub_rows,
})


def fields_for(curve: Curve) -> tuple[Field, Field]:
    """(Fr, Fq) batch fields for a curve; only BLS12-381 is instantiated today."""
    if curve.r == FR_PARAMS.p and curve.q == FQ_PARAMS.p:
        return FR, FQ
    raise NotImplementedError(f"no field kernels for curve {curve.name}")
