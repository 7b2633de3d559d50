"""The QAP steps of snarkjs's Groth16 prover (groth16_prove.js): buildABC1 and joinABC.

``build_abc`` turns the zkey's coefficient section and a witness into the evaluations of A, B, C
on the domain; ``h_evaluations`` moves them to the odd coset and forms (A*B - C), the scalars of
the H multi-exponentiation. Both reproduce snarkjs's buffers exactly (tests check against big-int
references; the prover's integration tests check proofs with snarkjs).
"""

from __future__ import annotations

import numba
import numpy as np

from kernels._threads import run_parallel, threads_for_rows
from kernels.abc_checks import check_abc_indices
from kernels.field import FR, fr_from_mont
from kernels.fr64 import fr_add64 as fr_add
from kernels.fr64 import fr_mont_mul64 as fr_mont_mul
from kernels.fr64 import fr_sub64 as fr_sub
from kernels.ntt import odd_coset_evaluations


@numba.njit(nogil=True, cache=True)
def _abc_rows(a, b, c, matrix, constraint, signal, values, witness, lo, hi):
    """Accumulate the coefficients whose constraint lies in [lo, hi) into a/b, then c = a*b there.

    Each thread scans every coefficient but touches only its own rows, so no locking is needed
    and the sums are added in the zkey's order, as snarkjs does.
    """
    t = np.empty(8, np.uint32)
    for i in range(matrix.shape[0]):
        row = constraint[i]
        if row < lo or row >= hi:
            continue
        # coef is c*R^2, witness is normal: the Montgomery product is Montgomery(c*w)
        fr_mont_mul(t, values[i], witness[signal[i]])
        if matrix[i] == 0:
            fr_add(a[row], a[row], t)
        else:
            fr_add(b[row], b[row], t)
    for row in range(lo, hi):
        fr_mont_mul(c[row], a[row], b[row])


@numba.njit(nogil=True, cache=True)
def _join_rows(out, a, b, c, lo, hi):
    """out = from_mont(a*b - c) (snarkjs qap_joinABC + frm_batchFromMontgomery)."""
    t = np.empty(8, np.uint32)
    u = np.empty(8, np.uint32)
    for i in range(lo, hi):
        fr_mont_mul(t, a[i], b[i])
        fr_sub(u, t, c[i])
        fr_from_mont(out[i], u)


def _split(fn, args: tuple, n: int, t: int) -> None:
    bounds = [n * k // t for k in range(t + 1)]
    run_parallel([(fn, (*args, bounds[k], bounds[k + 1])) for k in range(t)])


def build_abc(
    coef_matrix: np.ndarray,
    coef_constraint: np.ndarray,
    coef_signal: np.ndarray,
    coef_value_words: np.ndarray,
    witness: np.ndarray,
    domain_size: int,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evaluations of A, B, C on the domain (snarkjs buildABC1), (domain_size, 8) Montgomery each.

    coef_matrix / coef_constraint / coef_signal: (m,) integers (matrix 0 = A, 1 = B);
    coef_value_words: (m, 8) uint32, the zkey's c*R^2; witness: (nVars, 8) uint32, normal form.
    Raises ValueError on out-of-range indices or unreduced values (a corrupt zkey or witness):
    better a clear error here than a wrong proof.
    """
    matrix = np.ascontiguousarray(coef_matrix, dtype=np.uint32)
    constraint = np.ascontiguousarray(coef_constraint, dtype=np.uint32)
    signal = np.ascontiguousarray(coef_signal, dtype=np.uint32)
    values = FR.check(coef_value_words)
    witness = FR.check(witness)
    check_abc_indices(matrix, constraint, signal, values.shape[0], witness.shape[0], domain_size)
    bad = FR.first_unreduced(values)
    if bad >= 0:
        raise ValueError(f"coefficient {bad}: value is not reduced modulo r")
    bad = FR.first_unreduced(witness)
    if bad >= 0:
        raise ValueError(f"witness element {bad} is not reduced modulo r")
    a = np.zeros((domain_size, 8), np.uint32)
    b = np.zeros((domain_size, 8), np.uint32)
    c = np.empty((domain_size, 8), np.uint32)
    _split(_abc_rows, (a, b, c, matrix, constraint, signal, values, witness),
           domain_size, threads_for_rows(threads, domain_size))
    return a, b, c


def h_evaluations(a: np.ndarray, b: np.ndarray, c: np.ndarray, log_n: int,
                  threads: int | None = None) -> np.ndarray:
    """(A*B - C) on the odd coset, (n, 8) uint32 NORMAL form: the scalars of the H MSM.

    a, b, c: (n, 8) Montgomery evaluations on the domain, n = 2^log_n (snarkjs joinABC).
    """
    n = 1 << log_n
    for name, x in (("a", a), ("b", b), ("c", c)):
        if FR.check(x).shape[0] != n:
            raise ValueError(f"{name} has {x.shape[0]} rows, expected 2^{log_n}")
    a_odd = odd_coset_evaluations(a, threads)
    b_odd = odd_coset_evaluations(b, threads)
    c_odd = odd_coset_evaluations(c, threads)
    out = a_odd                       # each row is read before it is written
    _split(_join_rows, (out, a_odd, b_odd, c_odd), n, threads_for_rows(threads, n))
    return out
