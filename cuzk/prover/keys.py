"""The proving key the engine keeps resident: a zkey loaded once, in the shape the steps use.

Points are held as arkworks objects (what the CPU MSMs consume); the raw zkey sections stay
memory-mapped for the GPU backend to upload. ``host_bytes`` is the exact heap size of what is
held, counted object by object, so the memory budget reserves what the key really costs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.curves import Curve
from cuzk.formats import zkey as zkey_format
from cuzk.prover.points import g1_from_mont_array, g2_from_mont_array
from cuzk.prover.verify import VerificationKey


def _points_bytes(points: list) -> int:
    """A list's own array plus one (shared-type, fixed-size) object per distinct point."""
    if not points:
        return sys.getsizeof(points)
    return sys.getsizeof(points) + len({id(p) for p in points}) * sys.getsizeof(points[0])


@dataclass(frozen=True)
class CircuitSizes:
    n_vars: int
    n_public: int
    domain_size: int
    n_coefficients: int

    @property
    def log_domain(self) -> int:
        return self.domain_size.bit_length() - 1

    def to_dict(self) -> dict[str, int]:
        return {
            "n_vars": self.n_vars,
            "n_public": self.n_public,
            "domain_size": self.domain_size,
            "n_coefficients": self.n_coefficients,
        }


class ProvingKey:
    def __init__(self, path: Path, zk: zkey_format.ZKey) -> None:
        curve: Curve = zk.curve
        self.path = path
        self.curve = curve
        self.zkey = zk
        self.sizes = CircuitSizes(
            n_vars=zk.n_vars,
            n_public=zk.n_public,
            domain_size=zk.domain_size,
            n_coefficients=len(zk.coeffs),
        )
        self.coef_matrix = np.ascontiguousarray(zk.coeffs["matrix"], dtype=np.uint32)
        self.coef_constraint = np.ascontiguousarray(zk.coeffs["constraint"], dtype=np.uint32)
        self.coef_signal = np.ascontiguousarray(zk.coeffs["signal"], dtype=np.uint32)
        self.coef_value = np.ascontiguousarray(zk.coeffs["value"], dtype=np.uint32)
        (self.alpha1,) = g1_from_mont_array(curve, zk.alpha1.reshape(1, 2, -1))
        (self.beta1,) = g1_from_mont_array(curve, zk.beta1.reshape(1, 2, -1))
        (self.delta1,) = g1_from_mont_array(curve, zk.delta1.reshape(1, 2, -1))
        (self.beta2,) = g2_from_mont_array(curve, zk.beta2.reshape(1, 2, 2, -1))
        (self.gamma2,) = g2_from_mont_array(curve, zk.gamma2.reshape(1, 2, 2, -1))
        (self.delta2,) = g2_from_mont_array(curve, zk.delta2.reshape(1, 2, 2, -1))
        self._g1: dict[str, list[G1Point]] = {
            "A": g1_from_mont_array(curve, zk.a),
            "B1": g1_from_mont_array(curve, zk.b1),
            "C": g1_from_mont_array(curve, zk.c),
            "H": g1_from_mont_array(curve, zk.h),
        }
        self.b2_points: list[G2Point] = g2_from_mont_array(curve, zk.b2)
        self.verification_key = VerificationKey(
            curve=curve,
            alpha1=self.alpha1,
            beta2=self.beta2,
            gamma2=self.gamma2,
            delta2=self.delta2,
            ic=tuple(g1_from_mont_array(curve, zk.ic)),
        )
        self.host_bytes = self._measure()

    @classmethod
    def load(cls, path: str | Path) -> ProvingKey:
        p = Path(path)
        return cls(p, zkey_format.read_zkey(p, mmap=True))

    def g1_points(self, section: str) -> list[G1Point]:
        return self._g1[section]

    def g1_section_array(self, section: str) -> np.ndarray:
        """The raw (n, 2, limbs) Montgomery section, for device upload."""
        return {"A": self.zkey.a, "B1": self.zkey.b1, "C": self.zkey.c, "H": self.zkey.h}[section]

    def _measure(self) -> int:
        arrays = (self.coef_matrix, self.coef_constraint, self.coef_signal, self.coef_value)
        total = sum(a.nbytes for a in arrays)
        total += sum(_points_bytes(pts) for pts in self._g1.values())
        total += _points_bytes(self.b2_points)
        total += _points_bytes(list(self.verification_key.ic))
        return total
