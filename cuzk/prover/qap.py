"""The prover's QAP steps (A, B, C on the domain; H's scalars): the native extension
(:mod:`cuzk.prover.native_qap`) where it is built, else the numba kernels (``kernels/qap.py``),
imported only then so a prover with the extension never loads numba for them."""

from __future__ import annotations

import numpy as np

from cuzk.prover import native_qap


def native() -> bool:
    """The native QAP code runs (False: numba's kernels)."""
    return native_qap.available()


def build_abc(
    coef_matrix: np.ndarray,
    coef_constraint: np.ndarray,
    coef_signal: np.ndarray,
    coef_value_words: np.ndarray,
    witness: np.ndarray,
    domain_size: int,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """snarkjs buildABC1: see ``kernels.qap.build_abc`` (same results and errors either way)."""
    if native_qap.available():
        return native_qap.build_abc(coef_matrix, coef_constraint, coef_signal, coef_value_words,
                                    witness, domain_size, threads)
    from kernels import qap

    return qap.build_abc(coef_matrix, coef_constraint, coef_signal, coef_value_words, witness,
                         domain_size, threads)


def h_evaluations(a: np.ndarray, b: np.ndarray, c: np.ndarray, log_n: int,
                  threads: int | None = None) -> np.ndarray:
    """snarkjs joinABC's scalars: see ``kernels.qap.h_evaluations`` (bit-identical either way)."""
    if native_qap.available():
        return native_qap.h_evaluations(a, b, c, log_n, threads)
    from kernels import qap

    return qap.h_evaluations(a, b, c, log_n, threads)


def h_bytes(log_n: int, threads: int | None = None) -> int:
    """Peak bytes ``h_evaluations`` holds, its result included (numba's: the result and three
    more vectors: the odd-coset values of A, B, C and the coefficients being transformed)."""
    if native_qap.available():
        return native_qap.h_bytes(log_n, threads)
    return 4 * 32 * (1 << log_n)
