"""The proving key the engine keeps resident: a zkey loaded once, in the shape the steps use.

The point sections stay memory-mapped: the native CPU MSM (``cuzk.prover.native_msm``) and the
GPU upload read them in place, so loading a key checks every point (on its curve, in C) and
converts none. Only where the native extension is missing are the points turned into arkworks
objects for py_arkworks_bls12381's multiexp. With ``tables`` each MSM section also gets its
precomputed window table (``native_msm.build_table``), built here once and held in memory.
``host_bytes`` is what the key costs: the heap it holds (tables included) plus the mapped
point sections (which become resident as the MSMs read them), computed from the key's layout
(``cuzk.prover.key_layout``) by the same function the engine uses before the key is loaded, so
the budget refuses at submit what it could never load; a test counts the loaded key object by
object against it.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.curves import Curve
from cuzk.errors import FormatError
from cuzk.formats import zkey as zkey_format
from cuzk.prover import native_msm
from cuzk.prover.cpu_schedule import cores
from cuzk.prover.key_layout import CircuitSizes, KeyLayout
from cuzk.prover.msm import msm
from cuzk.prover.points import g1_from_mont_array, g2_from_mont_array
from cuzk.prover.verify import VerificationKey

PointConverter = Callable[[Curve, np.ndarray], Sequence[Any]]
"""Montgomery rows to arkworks points (``g1_from_mont_array`` or ``g2_from_mont_array``)."""


def _points_bytes(points: np.ndarray | Sequence[Any]) -> int:
    """The container's own memory plus one (fixed-size) object per distinct point."""
    own = points.nbytes if isinstance(points, np.ndarray) else sys.getsizeof(points)
    if len(points) == 0:
        return own
    return own + len({id(p) for p in points}) * sys.getsizeof(points[0])


# zkey section id and name of each point array (zkey_format's module doc has the layout).
_SECTIONS = {
    "alpha1": (zkey_format.S_GROTH, "Groth16 header"),
    "beta1": (zkey_format.S_GROTH, "Groth16 header"),
    "beta2": (zkey_format.S_GROTH, "Groth16 header"),
    "gamma2": (zkey_format.S_GROTH, "Groth16 header"),
    "delta1": (zkey_format.S_GROTH, "Groth16 header"),
    "delta2": (zkey_format.S_GROTH, "Groth16 header"),
    "ic": (zkey_format.S_IC, "IC"),
    "a": (zkey_format.S_A, "A"),
    "b1": (zkey_format.S_B1, "B1"),
    "b2": (zkey_format.S_B2, "B2"),
    "c": (zkey_format.S_C, "C"),
    "h": (zkey_format.S_H, "H"),
}


@dataclass(frozen=True)
class KeyPlace:
    """One point array of a zkey file, so a point that is not on its curve is reported with
    the file, the section and the point's index instead of arkworks's bare ValueError."""

    path: object
    array: str

    def convert(self, curve: Curve, arr: np.ndarray, convert: PointConverter) -> list[Any]:
        try:
            return list(convert(curve, arr))
        except ValueError:
            pass
        # Slow path, only for a broken key: find the first point that does not convert.
        group = "G2" if arr.ndim == 4 else "G1"
        in_header = _SECTIONS[self.array][0] == zkey_format.S_GROTH
        for i in range(arr.shape[0]):
            try:
                convert(curve, arr[i : i + 1])
            except ValueError:
                what = self.array if in_header else f"point {i}"
                raise self.error(
                    f"{what} is not on the {group} curve: the key is corrupt"
                ) from None
        raise self.error("a point does not decode: the key is corrupt")

    def error(self, problem: str) -> FormatError:
        sid, name = _SECTIONS[self.array]
        error = FormatError(self.path, f"section {sid} ({name}): {problem}")
        error.section = sid  # the API reports it as its own field
        return error


def _header_point(path: object, curve: Curve, name: str, arr: np.ndarray, g2: bool) -> Any:
    if g2:
        (point,) = KeyPlace(path, name).convert(curve, arr.reshape(1, 2, 2, -1), g2_from_mont_array)
    else:
        (point,) = KeyPlace(path, name).convert(curve, arr.reshape(1, 2, -1), g1_from_mont_array)
    return point


def verification_key_of(zk: zkey_format.ZKey, path: object) -> VerificationKey:
    """The verification key of a zkey, converting only the few points it needs (not the MSM
    sections): what the server hands out without loading the whole key."""
    curve = zk.curve
    return VerificationKey(
        curve=curve,
        alpha1=_header_point(path, curve, "alpha1", zk.alpha1, g2=False),
        beta2=_header_point(path, curve, "beta2", zk.beta2, g2=True),
        gamma2=_header_point(path, curve, "gamma2", zk.gamma2, g2=True),
        delta2=_header_point(path, curve, "delta2", zk.delta2, g2=True),
        ic=tuple(KeyPlace(path, "ic").convert(curve, zk.ic, g1_from_mont_array)),
    )


def read_verification_key(path: str | Path) -> VerificationKey:
    """``snarkjs zkey export verificationkey`` without node: the vk of the zkey at ``path``."""
    return verification_key_of(zkey_format.read_zkey(path, mmap=True), path)


@dataclass(frozen=True)
class PointSection:
    """A zkey point section as the CPU MSMs use it: the mapped Montgomery rows (what the native
    MSM reads), a mask of the points not at infinity, and, only without the native extension,
    the points as arkworks objects (every point at infinity sharing one identity object)."""

    raw: np.ndarray
    present: np.ndarray
    points: np.ndarray | None
    table: native_msm.WindowTable | None = None

    @classmethod
    def from_mont(
        cls, curve: Curve, arr: np.ndarray, convert: PointConverter, where: KeyPlace
    ) -> PointSection:
        present = np.asarray(arr.reshape(arr.shape[0], -1).any(axis=1))
        if native_msm.available():
            bad = native_msm.first_bad_point(arr)
            if bad >= 0:
                group = "G2" if arr.ndim == 4 else "G1"
                raise where.error(f"point {bad} is not on the {group} curve: the key is corrupt")
            return cls(arr, present, None)
        points = np.empty(arr.shape[0], dtype=object)
        points[:] = where.convert(curve, arr, convert)
        return cls(arr, present, points)

    @property
    def count(self) -> int:
        """Points not at infinity: the most scalars an MSM over this section converts."""
        return int(self.present.sum())

    def with_table(self, plan: native_msm.TablePlan, threads: int) -> PointSection:
        """This section with its window table built (native MSM only; a plan of one copy is no
        table)."""
        if self.points is not None or plan.copies < 2:
            return self
        return dataclasses.replace(self, table=native_msm.build_table(self.raw, plan, threads))

    @property
    def heap_bytes(self) -> int:
        held = 0 if self.points is None else _points_bytes(self.points)
        return held + self.present.nbytes + (0 if self.table is None else self.table.nbytes)

    @property
    def mapped_bytes(self) -> int:
        return int(self.raw.nbytes)

    def msm(self, scalars: np.ndarray, identity: Any, threads: int = 1) -> Any:
        if self.points is None:
            group = native_msm.msm_g2 if self.raw.ndim == 4 else native_msm.msm_g1
            return group(self.raw, scalars, threads, self.table)
        return msm(self.points, scalars, identity, self.present)


class ProvingKey:
    def __init__(self, path: Path, zk: zkey_format.ZKey, tables: bool = False) -> None:
        curve: Curve = zk.curve
        self.path = path
        self.curve = curve
        self.zkey = zk
        self.coef_matrix = np.ascontiguousarray(zk.coeffs["matrix"], dtype=np.uint32)
        self.coef_constraint = np.ascontiguousarray(zk.coeffs["constraint"], dtype=np.uint32)
        self.coef_signal = np.ascontiguousarray(zk.coeffs["signal"], dtype=np.uint32)
        self.coef_value = np.ascontiguousarray(zk.coeffs["value"], dtype=np.uint32)
        self.beta1 = _header_point(path, curve, "beta1", zk.beta1, g2=False)
        self.delta1 = _header_point(path, curve, "delta1", zk.delta1, g2=False)
        self.verification_key = verification_key_of(zk, path)
        vk = self.verification_key
        self.alpha1, self.beta2, self.gamma2, self.delta2 = (
            vk.alpha1,
            vk.beta2,
            vk.gamma2,
            vk.delta2,
        )
        self._g1 = {
            name: PointSection.from_mont(curve, arr, g1_from_mont_array, KeyPlace(path, field))
            for name, field, arr in (
                ("A", "a", zk.a),
                ("B1", "b1", zk.b1),
                ("C", "c", zk.c),
                ("H", "h", zk.h),
            )
        }
        self._b2 = PointSection.from_mont(curve, zk.b2, g2_from_mont_array, KeyPlace(path, "b2"))
        self.sizes = CircuitSizes(
            n_vars=zk.n_vars,
            n_public=zk.n_public,
            domain_size=zk.domain_size,
            n_coefficients=len(zk.coeffs),
            a_points=self._g1["A"].count,
            b_points=self._g1["B1"].count,
            c_points=self._g1["C"].count,
        )
        self.layout = KeyLayout.of_zkey(zk)
        native = self._b2.points is None
        self.tables = tables and native
        if self.tables:  # built once here, on every core (the C code releases the GIL)
            plans, threads = self.layout.table_plans(), cores()
            self._g1 = {name: s.with_table(plans[name], threads) for name, s in self._g1.items()}
            self._b2 = self._b2.with_table(plans["B2"], threads)
        self.table_bytes = sum(
            0 if s.table is None else s.table.nbytes for s in (*self._g1.values(), self._b2))
        self.heap_bytes = self._measure()
        self.mapped_bytes = sum(s.mapped_bytes for s in self._g1.values()) + self._b2.mapped_bytes
        # The figure the budget charged before loading (equal to heap + mapped: tested).
        self.host_bytes = self.layout.host_bytes_for(native=native, tables=self.tables)

    @classmethod
    def load(cls, path: str | Path, tables: bool = False) -> ProvingKey:
        """Map and check the key at ``path``; ``tables``: also build the MSM window tables
        (``[prover] msm_precompute``; ignored without the native MSM)."""
        p = Path(path)
        return cls(p, zkey_format.read_zkey(p, mmap=True), tables)

    def msm_g1(self, section: str, scalars: np.ndarray, threads: int = 1) -> G1Point:
        """CPU MSM over one G1 section (A, B1, C, H); scalars match the section row for row.
        ``threads``: the native MSM's window split (the arkworks fallback chunks by itself)."""
        result: G1Point = self._g1[section].msm(scalars, G1Point.identity(), threads)
        return result

    def msm_b2(self, scalars: np.ndarray, threads: int = 1) -> G2Point:
        """CPU MSM over the B2 section (G2), with the witness as scalars."""
        result: G2Point = self._b2.msm(scalars, G2Point.identity(), threads)
        return result

    def msm_points(self, section: str) -> int:
        """Points not at infinity in a section (A, B1, B2, C, H): an MSM's real size."""
        return self._b2.count if section == "B2" else self._g1[section].count

    def g1_section_array(self, section: str) -> np.ndarray:
        """The raw (n, 2, limbs) Montgomery section, for device upload."""
        return {"A": self.zkey.a, "B1": self.zkey.b1, "C": self.zkey.c, "H": self.zkey.h}[section]

    def g2_section_array(self, section: str = "B2") -> np.ndarray:
        """The raw (n, 2, 2, limbs) Montgomery B2 section, for device upload."""
        if section != "B2":
            raise ValueError(f"unknown G2 section {section!r}")
        return self.zkey.b2

    def _measure(self) -> int:
        arrays = (self.coef_matrix, self.coef_constraint, self.coef_signal, self.coef_value)
        total = sum(a.nbytes for a in arrays)
        total += sum(s.heap_bytes for s in self._g1.values()) + self._b2.heap_bytes
        total += _points_bytes(self.verification_key.ic)
        return total
