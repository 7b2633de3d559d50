"""The native QAP steps (``cuzk/prover/_native/qap.c``): snarkjs's buildABC1 and joinABC with its
six NTTs, in C, so a CPU proof needs no numba.

Same inputs, outputs (bit for bit) and errors as ``kernels/qap.py`` ``build_abc`` and
``h_evaluations``, which stay the fallback where the extension is not built. This module imports
no numba, directly or through another module (``python -X importtime`` shows it), so a one-proof
``cuzk prove`` does not pay numba's import and first dispatch. The multiply path follows the MSM's
(``[prover] field_arith``: ``portable`` forces the portable one).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from cuzk.prover import native_msm
from kernels._threads import MIN_PARALLEL_ROWS, cpu_count, threads_for_rows
from kernels.abc_checks import check_abc_indices
from kernels.curves import BLS12_381

_qap: Any
try:
    _qap = importlib.import_module("cuzk.prover._native._qap")
except ImportError:  # built at install; absent only where no C compiler was found
    _qap = None

_R = BLS12_381.r
_MONT = (1 << 256) % _R
_MAX_THREADS = 64


def available() -> bool:
    return _qap is not None


def _fast() -> bool:
    return native_msm.arith_path() != "portable"


def _ext() -> Any:
    if _qap is None:
        raise RuntimeError("the native QAP extension is not built (pip install -e .)")
    return _qap


def _fr_rows(a: np.ndarray) -> np.ndarray:
    """``a`` as a C-contiguous (n, 8) uint32 array, 8-byte aligned for the C code's 64-bit limbs
    (a view when it already is one, else a copy: a file's mapping may be 4-byte aligned)."""
    a = np.ascontiguousarray(a)
    if a.dtype != np.uint32 or a.ndim != 2 or a.shape[1] != 8:
        raise ValueError(f"bls12_381.fr: expected (n, 8) uint32, got {a.shape} {a.dtype}")
    return a.copy() if a.ctypes.data % 8 else a


def _indices(a: np.ndarray) -> np.ndarray:
    return np.require(a, dtype=np.uint32, requirements=["C", "A"])


def first_unreduced(a: np.ndarray) -> int:
    """Index of the first element of an (n, 8) Fr array that is >= r, or -1."""
    return int(_ext().first_unreduced(_fr_rows(a)))


def _threads(threads: int | None) -> int:
    return min(_MAX_THREADS, cpu_count() if threads is None else max(1, int(threads)))


def build_abc(
    coef_matrix: np.ndarray,
    coef_constraint: np.ndarray,
    coef_signal: np.ndarray,
    coef_value_words: np.ndarray,
    witness: np.ndarray,
    domain_size: int,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evaluations of A, B, C on the domain (snarkjs buildABC1), (domain_size, 8) Montgomery each,
    as ``kernels.qap.build_abc`` (same ValueErrors on out-of-range indices or unreduced values)."""
    ext = _ext()
    matrix = _indices(coef_matrix)
    constraint = _indices(coef_constraint)
    signal = _indices(coef_signal)
    values = _fr_rows(coef_value_words)
    witness = _fr_rows(witness)
    check_abc_indices(matrix, constraint, signal, values.shape[0], witness.shape[0], domain_size)
    bad = int(ext.first_unreduced(values))
    if bad >= 0:
        raise ValueError(f"coefficient {bad}: value is not reduced modulo r")
    bad = int(ext.first_unreduced(witness))
    if bad >= 0:
        raise ValueError(f"witness element {bad} is not reduced modulo r")
    a = np.zeros((domain_size, 8), np.uint32)
    b = np.zeros((domain_size, 8), np.uint32)
    c = np.empty((domain_size, 8), np.uint32)
    t = min(_MAX_THREADS, threads_for_rows(threads, domain_size))
    ext.build_abc(matrix, constraint, signal, values, witness, a, b, c, t, _fast())
    return a, b, c


def h_plan(log_n: int, threads: int) -> tuple[int, int]:
    """(groups, threads per group) for H's three NTT chains: three groups (a, b, c each on its own
    threads) from three threads up, else one group whose threads split every transform by
    butterflies; one thread below 2^12 rows. Threads per group are a power of two."""
    if (1 << log_n) < MIN_PARALLEL_ROWS or threads < 2:
        return 1, 1
    groups = 3 if threads >= 3 else 1
    tp = 1
    while tp * 2 * groups <= threads and tp * 2 <= 1 << (log_n - 1):
        tp *= 2
    return groups, tp


def h_bytes(log_n: int, threads: int | None = None) -> int:
    """Peak bytes :func:`h_evaluations` holds, its result included: the result, the twiddles
    (n/2), B's and C's odd-coset values, and one scratch vector per group of the plan."""
    n = 1 << log_n
    groups, _ = h_plan(log_n, _threads(threads))
    return 32 * (n + n // 2 + (2 + groups) * n)


def _mont_bytes(x: int) -> bytes:
    return (x * _MONT % _R).to_bytes(32, "little")


def h_evaluations(a: np.ndarray, b: np.ndarray, c: np.ndarray, log_n: int,
                  threads: int | None = None) -> np.ndarray:
    """(A*B - C) on the odd coset, (n, 8) uint32 NORMAL form: the scalars of the H MSM, as
    ``kernels.qap.h_evaluations``. a, b, c: (n, 8) Montgomery evaluations on the domain."""
    ext = _ext()
    if not 1 <= log_n <= 24:
        raise ValueError(f"NTT size 2^{log_n} outside 2^1..2^24")
    n = 1 << log_n
    rows = []
    for name, x in (("a", a), ("b", b), ("c", c)):
        x = _fr_rows(x)
        if x.shape[0] != n:
            raise ValueError(f"{name} has {x.shape[0]} rows, expected 2^{log_n}")
        rows.append(x)
    # snarkjs groth16_prove: inc = Fr.w[power+1], or Fr.shift (nqr^2) at the two-adicity limit
    coset = (BLS12_381.root_of_unity(log_n + 1) if log_n < BLS12_381.two_adicity
             else BLS12_381.nqr**2 % _R)
    consts = (_mont_bytes(BLS12_381.root_of_unity(log_n)) + _mont_bytes(pow(n, -1, _R))
              + _mont_bytes(coset))
    groups, tp = h_plan(log_n, _threads(threads))
    out = np.empty((n, 8), np.uint32)
    ext.h_evaluations(rows[0], rows[1], rows[2], out, log_n, consts, groups, tp, _fast())
    return out
