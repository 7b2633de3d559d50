"""The index checks of snarkjs's buildABC1 inputs (numpy only, no numba), shared by the numba
kernels (``kernels.qap``) and the native extension's wrapper (``cuzk.prover.native_qap``): a
corrupt key or witness gets the same clear error from either, before any row is touched."""

from __future__ import annotations

import numpy as np


def check_abc_indices(matrix: np.ndarray, constraint: np.ndarray, signal: np.ndarray,
                      n_values: int, n_witness: int, domain_size: int) -> None:
    """ValueError naming the first coefficient whose matrix is not A (0) or B (1), whose
    constraint lies outside the domain or whose signal outside the witness."""
    m = matrix.shape[0]
    if not (constraint.shape == signal.shape == (m,) and n_values == m):
        raise ValueError("coefficient arrays have different lengths")
    if not m:
        return
    if int(matrix.max()) > 1:
        i = int(np.argmax(matrix > 1))
        raise ValueError(f"coefficient {i}: matrix must be 0 (A) or 1 (B)")
    if int(constraint.max()) >= domain_size:
        i = int(np.argmax(constraint >= domain_size))
        raise ValueError(
            f"coefficient {i}: constraint {int(constraint[i])} >= domain size {domain_size}"
        )
    if int(signal.max()) >= n_witness:
        i = int(np.argmax(signal >= n_witness))
        raise ValueError(f"coefficient {i}: signal {int(signal[i])} >= witness length {n_witness}")
