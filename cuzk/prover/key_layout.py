"""What a resident proving key costs in host memory, known before the key is loaded.

The memory budget charges a resident key its exact heap size, and the engine refuses at submit
(507) a kind whose key plus working memory can never fit. Both figures must be the same number,
so it is computed once, here, from a key's layout: how many rows each point section has and how
many of them are not the point at infinity (every infinity shares one identity object once
loaded). The layout is read from a zkey's sections (memory-mapped, nothing converted) or, before
a development key exists, derived from the circuit's r1cs: ``cuzk.prover.keygen`` gives a
variable a point at infinity exactly where its column of A, B (and, for C, of A, B and C) is
empty, up to a random setup value hitting a root (probability about ``domain / r``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.formats import zkey as zkey_format
from cuzk.formats.r1cs import MATRIX_A, MATRIX_B, MATRIX_C, R1CS

if TYPE_CHECKING:
    from cuzk.prover.native_msm import TablePlan

_PTR = 8  # an object array's slot
_COEF_INDEX_BYTES = 3 * 4  # matrix, constraint, signal: a uint32 each per coefficient
_G1_OBJECT = sys.getsizeof(G1Point.identity())
_G2_OBJECT = sys.getsizeof(G2Point.identity())
_G1_MONT_BYTES = 2 * 48  # a G1 point in a zkey section: x, y in Montgomery form (G2: twice)


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


@dataclass(frozen=True)
class Section:
    """A point section: its rows, and how many of them are not the point at infinity."""

    rows: int
    present: int

    def objects(self) -> int:
        """Distinct point objects once loaded: one per present point, one shared identity."""
        return self.present + (1 if self.present < self.rows else 0)


def _present(points: np.ndarray) -> int:
    return int(points.reshape(points.shape[0], -1).any(axis=1).sum()) if len(points) else 0


@dataclass(frozen=True)
class KeyLayout:
    """The shape of a proving key: everything its host size and a partition's needs depend on."""

    n_vars: int
    n_public: int
    domain_size: int
    n_coefficients: int
    n8r: int  # bytes of a scalar: each coefficient's value
    a: Section
    b: Section  # B1 and B2 alike (both are the B column)
    c: Section
    h: Section
    ic: Section

    @classmethod
    def of_zkey(cls, zk: zkey_format.ZKey) -> KeyLayout:
        return cls(
            n_vars=zk.n_vars,
            n_public=zk.n_public,
            domain_size=zk.domain_size,
            n_coefficients=len(zk.coeffs),
            n8r=zk.curve.n8r,
            a=Section(len(zk.a), _present(zk.a)),
            b=Section(len(zk.b1), _present(zk.b1)),
            c=Section(len(zk.c), _present(zk.c)),
            h=Section(len(zk.h), _present(zk.h)),
            ic=Section(len(zk.ic), _present(zk.ic)),
        )

    @classmethod
    def of_r1cs(cls, r1cs: R1CS) -> KeyLayout:
        """The layout ``cuzk keygen`` gives this circuit's key (see the module doc)."""
        cons = r1cs.constraints
        if cons is None:
            raise ValueError("r1cs was read without constraints")
        n_vars, n_public = r1cs.n_wires, r1cs.n_public
        used = np.zeros((3, n_vars), dtype=bool)
        for m in (MATRIX_A, MATRIX_B, MATRIX_C):
            used[m, cons.signal[cons.matrix == m]] = True
        used[MATRIX_A, : n_public + 1] = True  # the public-input binding rows
        any_column = np.asarray(used.any(axis=0))
        n_ab = int((cons.matrix != MATRIX_C).sum()) + n_public + 1
        domain = r1cs.domain_size
        return cls(
            n_vars=n_vars,
            n_public=n_public,
            domain_size=domain,
            n_coefficients=n_ab,
            n8r=r1cs.curve.n8r,
            a=Section(n_vars, int(used[MATRIX_A].sum())),
            b=Section(n_vars, int(used[MATRIX_B].sum())),
            c=Section(n_vars - n_public - 1, int(any_column[n_public + 1 :].sum())),
            h=Section(domain, domain),
            ic=Section(n_public + 1, int(any_column[: n_public + 1].sum())),
        )

    @property
    def sizes(self) -> CircuitSizes:
        return CircuitSizes(
            n_vars=self.n_vars,
            n_public=self.n_public,
            domain_size=self.domain_size,
            n_coefficients=self.n_coefficients,
            a_points=self.a.present,
            b_points=self.b.present,
            c_points=self.c.present,
        )

    @property
    def host_bytes(self) -> int:
        """What the budget charges the loaded key in this process (native MSM or not), without
        window tables (:meth:`host_bytes_for` with ``tables``)."""
        from cuzk.prover import native_msm

        return self.host_bytes_for(native=native_msm.available())

    def table_plans(self) -> dict[str, TablePlan]:
        """The window table of each MSM section (A, B1, C, H in G1; B2), from its points not at
        infinity: what ``ProvingKey`` builds when tables are on."""
        from cuzk.prover.native_msm import table_plan

        return {name: table_plan(s.present) for name, s in self._msm_sections().items()}

    @property
    def table_bytes(self) -> int:
        """Bytes of the key's window tables (the copies beyond the mapped section itself)."""
        plans = self.table_plans()
        return sum(plans[name].table_bytes(s.rows, _G1_MONT_BYTES * (2 if name == "B2" else 1))
                   for name, s in self._msm_sections().items())

    def _msm_sections(self) -> dict[str, Section]:
        return {"A": self.a, "B1": self.b, "C": self.c, "H": self.h, "B2": self.b}

    def host_bytes_for(self, native: bool, tables: bool = False) -> int:
        """Bytes the loaded key holds (``cuzk.prover.keys.ProvingKey``): the coefficient arrays;
        per point section its presence mask and either its memory-mapped rows (``native``: the
        native MSM reads them in place) or an object array and the point objects; the
        verification key's IC tuple and points; with ``tables`` (native only) the window
        tables. The budget charges exactly this."""
        total = (_COEF_INDEX_BYTES + self.n8r) * self.n_coefficients
        if native and tables:
            total += self.table_bytes

        def section(s: Section, obj: int, mapped_row: int) -> int:
            if native:
                return s.rows * (1 + mapped_row)
            return s.rows * _PTR + s.rows + s.objects() * obj

        total += sum(section(s, _G1_OBJECT, _G1_MONT_BYTES)
                     for s in (self.a, self.b, self.c, self.h))
        total += section(self.b, _G2_OBJECT, 2 * _G1_MONT_BYTES)
        total += sys.getsizeof((None,) * self.ic.rows) + self.ic.objects() * _G1_OBJECT
        return total
