"""The CPU backend: numba NTT for H, arkworks MSMs split across cores."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from py_arkworks_bls12381 import G1Point

from kernels import qap

if TYPE_CHECKING:
    from cuzk.prover.keys import ProvingKey


class CpuBackend:
    name = "cpu"
    device = "cpu"

    def upload_key(self, key: ProvingKey) -> int:
        return 0

    def drop_key(self, key: ProvingKey) -> None:
        return None

    def h_evaluations(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray
    ) -> np.ndarray:
        return qap.h_evaluations(a, b, c, key.sizes.log_domain)

    def msm_g1(self, key: ProvingKey, section: str, scalars: np.ndarray) -> G1Point:
        return key.msm_g1(section, scalars)
