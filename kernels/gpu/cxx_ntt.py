"""The NTT and the H pipeline over BLS12-381 Fr with the C++ kernels (``kernels/gpu/cuda/ntt.cuh``).

Runs on the device (CuPy arrays, :class:`~kernels.gpu.cxx_kernels.DeviceKernels`) and on the
host twin (NumPy arrays, :class:`~kernels.gpu.cxx_kernels.HostKernels`) with the same code, like
``cxx_msm.py``. Arrays are row-major ``(n, 8)`` uint32 Montgomery elements (the uploads' and the
H MSM's layout: no limb-major copy). Nothing is read back: every call only queues kernels.

A transform is ``plan_passes(log_n)``: passes of ``PASS_BITS`` radix-2 stages (the last one
shorter), each one read and one write of the array (ntt.cuh). H of one array is the inverse DIF
(natural -> bit-reversed) and the forward DIT (bit-reversed -> natural) with the odd-coset shift
(g^bitrev(p) / n) fused into the DIT's first pass, so 2 * ceil(log_n / PASS_BITS) passes.

Tables, built once per domain and cached on the runner's memory (:meth:`CxxNtt.table_bytes`):
the twiddles w_N^j (j < N/2, N the largest domain asked for; N/2 rows of 32 bytes) built on the
device from two power tables of ~sqrt(N) rows, and the odd-coset lo/hi tables of ~sqrt(n) rows
each (``kernels.gpu.ntt._pow_tables``: the same roots and coset generator as the numba NTT).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from kernels.curves import BLS12_381
from kernels.gpu.ntt import MAX_LOG_N, _pow_tables, coset_generator, mont

LIMBS = 8
ROW_BYTES = 32
PASS_BITS = 3       # stages per pass: K = 4 takes 254 registers (README, "The C++ NTT")
POOL_ROUND = 512    # CuPy's pool hands out blocks in multiples of 512 bytes
_R = BLS12_381.r


def plan_passes(log_n: int, pass_bits: int = PASS_BITS) -> list[tuple[int, int]]:
    """(b_lo, k) per pass, top index bits first (the DIF order; the DIT runs them reversed)."""
    passes = []
    hi = log_n
    while hi > 0:
        k = min(pass_bits, hi)
        passes.append((hi - k, k))
        hi -= k
    return passes


def _round_up(n: int) -> int:
    return -(-n // POOL_ROUND) * POOL_ROUND


def _pow_rows(k: int) -> tuple[int, int]:
    """Rows of the lo and hi tables ``_pow_tables`` splits exponents below 2^k into."""
    kl = (k + 1) // 2
    return 1 << kl, 1 << max(0, k - kl)


def table_bytes(log_n: int) -> int:
    """Device bytes of one domain's tables (pool-rounded): twiddles (n/2 rows) and the small
    power tables they are built from, the coset's lo/hi tables and the 1/n row."""
    k = max(log_n - 1, 0)
    tw_lo, tw_hi = _pow_rows(k)
    c_lo, c_hi = _pow_rows(log_n)
    rows = (1 << k, tw_lo, tw_hi, c_lo, c_hi, 1)
    return sum(_round_up(r * ROW_BYTES) for r in rows)


def h_device_bytes(n: int, tables: bool = True) -> int:
    """Upper bound of the device bytes :meth:`CxxNtt.h` allocates for a domain of n beyond the
    caller's a, b, c (transformed in place): the (n, 8) output and, unless the domain's tables
    are already built (``tables=False``), :func:`table_bytes`."""
    log_n = max(n, 2).bit_length() - 1
    return _round_up(n * ROW_BYTES) + (table_bytes(log_n) if tables else 0)


@functools.cache
def host_tables(log_n: int) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """The small host tables of a domain (~sqrt(n) rows each, built by a Python loop over them,
    cached per process): "twiddles" (lo, hi, kl) the twiddle table is built from on the device,
    "coset" the odd-coset shift's (carrying 1/n), "inv_n" (1/n, 1/n, 0) in Montgomery form."""
    tw = _pow_tables(BLS12_381.root_of_unity(log_n), log_n - 1)
    coset = _pow_tables(coset_generator(log_n), log_n, pow(1 << log_n, -1, _R))
    inv = mont(pow(1 << log_n, -1, _R))
    for arr in (*tw[:2], *coset[:2], inv):
        arr.setflags(write=False)
    return {"twiddles": tw, "coset": coset, "inv_n": (inv, inv, 0)}


class CxxNtt:
    """NTTs and H with the C++ kernels of one runner (device or host twin)."""

    def __init__(self, kernels: Any, xp: Any = None, pass_bits: int = PASS_BITS) -> None:
        if not 1 <= pass_bits <= PASS_BITS:
            raise ValueError(f"pass_bits must be in 1..{PASS_BITS}")
        self.kernels = kernels
        self.xp = kernels.xp if xp is None else xp
        self.pass_bits = pass_bits
        self._tw: tuple[Any, int] | None = None
        self._coset: dict[int, tuple[Any, Any, int]] = {}
        self._inv_n: dict[int, Any] = {}

    # -- tables --------------------------------------------------------------------------
    def twiddles(self, log_n: int) -> tuple[Any, int]:
        """The (N/2, 8) table of w_N^j (N >= 2^log_n), built on the device, grown on demand."""
        if not 1 <= log_n <= MAX_LOG_N:
            raise ValueError(f"NTT size 2^{log_n} outside 2^1..2^{MAX_LOG_N}")
        if self._tw is None or self._tw[1] < log_n:
            xp = self.xp
            k = log_n - 1
            lo, hi, kl = host_tables(log_n)["twiddles"]
            out = xp.empty((1 << k, LIMBS), dtype=np.uint32)
            self.kernels.launch("ntt_pow_table", 1 << k, xp.asarray(lo), xp.asarray(hi), kl, out)
            self._tw = (out, log_n)
        return self._tw

    def coset_tables(self, log_n: int) -> tuple[Any, Any, int]:
        """lo, hi, kl with g^i / n = lo[i & mask] * hi[i >> kl] (g: the odd coset's generator)."""
        if log_n not in self._coset:
            xp = self.xp
            lo, hi, kl = host_tables(log_n)["coset"]
            self._coset[log_n] = (xp.asarray(lo), xp.asarray(hi), kl)
        return self._coset[log_n]

    def _inverse_n(self, log_n: int) -> Any:
        if log_n not in self._inv_n:
            self._inv_n[log_n] = self.xp.asarray(host_tables(log_n)["inv_n"][0])
        return self._inv_n[log_n]

    # -- transforms (in place on (n, 8) arrays) ---------------------------------------------
    @staticmethod
    def log2(x: Any) -> int:
        n = int(x.shape[0])
        log_n = n.bit_length() - 1
        if n < 2 or 1 << log_n != n or tuple(x.shape[1:]) != (LIMBS,):
            raise ValueError(f"NTT input must be (2^k, 8) with k >= 1, got {tuple(x.shape)}")
        if x.dtype != np.uint32:
            raise ValueError(f"NTT input must be uint32, got {x.dtype}")
        return log_n

    def _passes(self, x: Any, dit: bool, inverse: bool, coset: bool = False) -> None:
        log_n = self.log2(x)
        tw, log_tw = self.twiddles(log_n)
        lo, hi, kl = self.coset_tables(log_n) if coset else (tw, tw, 0)
        plan = plan_passes(log_n, self.pass_bits)
        if dit:
            plan = plan[::-1]
        name = "ntt_dit" if dit else "ntt_dif"
        for i, (b_lo, k) in enumerate(plan):
            self.kernels.launch(f"{name}{k}", (1 << log_n) >> k, x, tw, log_tw, b_lo,
                                int(inverse), lo, hi, kl, log_n, int(coset and i == 0))

    def dif(self, x: Any, inverse: bool = False) -> None:
        """Natural -> bit-reversed order, unscaled, in place."""
        self._passes(x, dit=False, inverse=inverse)

    def dit(self, x: Any, inverse: bool = False) -> None:
        """Bit-reversed -> natural order, unscaled, in place."""
        self._passes(x, dit=True, inverse=inverse)

    def forward(self, x: Any) -> Any:
        """Natural-order NTT (snarkjs Fr.fft): a new (n, 8) array."""
        log_n = self.log2(x)
        y = self.xp.empty(x.shape, dtype=np.uint32)
        self.kernels.launch("ntt_bitrev", 1 << log_n, x, y, log_n)
        self.dit(y)
        return y

    def inverse(self, x: Any) -> Any:
        """Natural-order inverse NTT with the 1/n scale (snarkjs Fr.ifft): a new (n, 8) array."""
        log_n = self.log2(x)
        y = self.xp.empty(x.shape, dtype=np.uint32)
        self.kernels.launch("ntt_bitrev", 1 << log_n, x, y, log_n)
        self.dit(y, inverse=True)
        self.kernels.launch("ntt_scale", 1 << log_n, y, self._inverse_n(log_n))
        return y

    def odd_coset(self, x: Any) -> None:
        """In place: evaluations on <w_n> -> evaluations on the odd coset (snarkjs groth16_prove's
        fft(batchApplyKey(ifft(x), 1, inc))), Montgomery in and out: the inverse DIF, then the
        DIT with the coset factor g^bitrev(p) / n applied in its first pass."""
        self.dif(x, inverse=True)
        self._passes(x, dit=True, inverse=False, coset=True)

    def join(self, a: Any, b: Any, c: Any) -> Any:
        """(n, 8) rows of from_mont(a*b - c), normal form (the H MSM's scalars)."""
        out = self.xp.empty(a.shape, dtype=np.uint32)
        self.kernels.launch("ntt_abc", int(a.shape[0]), a, b, c, out)
        return out

    def h(self, a: Any, b: Any, c: Any) -> Any:
        """(a*b - c) on the odd coset, (n, 8) normal form, from the evaluations a, b, c on the
        domain ((n, 8) Montgomery; transformed in place: consumed). Equals
        ``kernels.qap.h_evaluations``. Device bytes beyond a, b, c: :func:`h_device_bytes`."""
        log_n = self.log2(a)
        for x in (b, c):
            if self.log2(x) != log_n:
                raise ValueError(f"H inputs differ in size: {a.shape}, {b.shape}, {c.shape}")
        for x in (a, b, c):
            self.odd_coset(x)
        return self.join(a, b, c)
