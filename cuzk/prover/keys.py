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
from cuzk.prover.msm import msm
from cuzk.prover.points import g1_from_mont_array, g2_from_mont_array
from cuzk.prover.verify import VerificationKey


def _points_bytes(points: np.ndarray | list) -> int:
    """The container's own memory plus one (fixed-size) object per distinct point."""
    own = points.nbytes if isinstance(points, np.ndarray) else sys.getsizeof(points)
    if len(points) == 0:
        return own
    return own + len({id(p) for p in points}) * sys.getsizeof(points[0])


@dataclass(frozen=True)
class PointSection:
    """A zkey point section as the CPU MSMs use it: the points (an object array, every point at
    infinity sharing one identity object) and a mask of those not at infinity."""

    points: np.ndarray
    present: np.ndarray

    @classmethod
    def from_mont(cls, curve: Curve, arr: np.ndarray, convert) -> PointSection:
        points = np.empty(arr.shape[0], dtype=object)
        points[:] = convert(curve, arr)
        return cls(points, arr.reshape(arr.shape[0], -1).any(axis=1))

    @property
    def count(self) -> int:
        """Points not at infinity: the most scalars an MSM over this section converts."""
        return int(self.present.sum())

    @property
    def nbytes(self) -> int:
        return _points_bytes(self.points) + self.present.nbytes


@dataclass(frozen=True)
class CircuitSizes:
    n_vars: int
    n_public: int
    domain_size: int
    n_coefficients: int
    # Points not at infinity in the A, B (B1 and B2 alike) and C sections: the MSMs' real sizes.
    a_points: int
    b_points: int
    c_points: int

    @property
    def log_domain(self) -> int:
        return self.domain_size.bit_length() - 1

    def to_dict(self) -> dict[str, int]:
        return {
            "n_vars": self.n_vars,
            "n_public": self.n_public,
            "domain_size": self.domain_size,
            "n_coefficients": self.n_coefficients,
            "a_points": self.a_points,
            "b_points": self.b_points,
            "c_points": self.c_points,
        }


class ProvingKey:
    def __init__(self, path: Path, zk: zkey_format.ZKey) -> None:
        curve: Curve = zk.curve
        self.path = path
        self.curve = curve
        self.zkey = zk
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
        self._g1 = {
            name: PointSection.from_mont(curve, arr, g1_from_mont_array)
            for name, arr in (("A", zk.a), ("B1", zk.b1), ("C", zk.c), ("H", zk.h))
        }
        self._b2 = PointSection.from_mont(curve, zk.b2, g2_from_mont_array)
        self.sizes = CircuitSizes(
            n_vars=zk.n_vars,
            n_public=zk.n_public,
            domain_size=zk.domain_size,
            n_coefficients=len(zk.coeffs),
            a_points=self._g1["A"].count,
            b_points=self._g1["B1"].count,
            c_points=self._g1["C"].count,
        )
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

    def msm_g1(self, section: str, scalars: np.ndarray) -> G1Point:
        """CPU MSM over one G1 section (A, B1, C, H); scalars match the section row for row."""
        s = self._g1[section]
        return msm(s.points, scalars, G1Point.identity(), s.present)

    def msm_b2(self, scalars: np.ndarray) -> G2Point:
        """CPU MSM over the B2 section (G2), with the witness as scalars."""
        return msm(self._b2.points, scalars, G2Point.identity(), self._b2.present)

    def g1_section_array(self, section: str) -> np.ndarray:
        """The raw (n, 2, limbs) Montgomery section, for device upload."""
        return {"A": self.zkey.a, "B1": self.zkey.b1, "C": self.zkey.c, "H": self.zkey.h}[section]

    def _measure(self) -> int:
        arrays = (self.coef_matrix, self.coef_constraint, self.coef_signal, self.coef_value)
        total = sum(a.nbytes for a in arrays)
        total += sum(s.nbytes for s in self._g1.values()) + self._b2.nbytes
        total += _points_bytes(list(self.verification_key.ic))
        return total
