"""Fixed-base scalar multiplication with a byte-window table.

Key generation multiplies one generator by tens of thousands of scalars. A generic
``point * scalar`` costs ~170 us (G1) / ~510 us (G2) here; with a table of base * d * 256^w
each product is at most 32 additions (~0.7 us / ~2.2 us each), several times faster.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from py_arkworks_bls12381 import G1Point, G2Point

P = TypeVar("P", G1Point, G2Point)

_WINDOWS = 32  # 32 bytes cover any scalar below 2^256


class FixedBaseTable(Generic[P]):
    def __init__(self, base: P) -> None:
        self._identity: P = type(base).identity()
        self._table: list[list[P]] = []
        step = base
        for _ in range(_WINDOWS):
            row = [self._identity, step]
            for _ in range(2, 256):
                row.append(row[-1] + step)
            self._table.append(row)
            step = row[-1] + step  # base * 256^(w+1)

    def mul(self, k: int) -> P:
        acc = self._identity
        for row, digit in zip(self._table, k.to_bytes(_WINDOWS, "little"), strict=True):
            if digit:
                acc = acc + row[digit]
        return acc


_TABLES: dict[str, FixedBaseTable[Any]] = {}


def xy_bytes_of_multiples(group: Literal["g1", "g2"], scalars: list[int]) -> bytes:
    """``generator * k`` for each scalar, as the points' ``to_xy_bytes_le`` concatenated (what
    keygen's worker processes return; the table is built once per process and group)."""
    table = _TABLES.get(group)
    if table is None:
        table = _TABLES[group] = FixedBaseTable(G1Point() if group == "g1" else G2Point())
    return b"".join(table.mul(k).to_xy_bytes_le() for k in scalars)
