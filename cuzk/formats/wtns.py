"""Reader and writer for ``.wtns`` witness files (iden3 container, magic ``wtns``, version 2).

Sections: 1 header (u32 n8, prime r in n8 bytes, u32 nWitness), 2 values (nWitness x n8 bytes,
normal form, little-endian). The writer emits exactly the bytes ``snarkjs wtns calculate``
writes (version 2, sections 1 then 2), so files can be compared byte for byte.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from cuzk.curves import Curve
from cuzk.formats.binfile import read_binfile, read_u32, u32_view, write_binfile
from cuzk.formats.limbs import limbs_less_than

HEADER, VALUES = 1, 2


@dataclass
class Witness:
    curve: Curve
    values: np.ndarray  # (n, n8/4) uint32, normal form

    def __len__(self) -> int:
        return int(self.values.shape[0])


def read_wtns(path: str | os.PathLike[str]) -> Witness:
    """Read a witness file; values are a zero-copy view of the file buffer."""
    bf = read_binfile(path, "wtns", 2)
    hdr = bf.payload(HEADER, "header")
    n8, curve = bf.scalar_field(hdr, rest=4)  # the value count
    n = read_u32(hdr, 4 + n8)
    payload = bf.payload(VALUES, "witness values", expected_size=n * n8)
    values = u32_view(payload, 0, n * (n8 // 4)).reshape(n, n8 // 4)
    ok = limbs_less_than(values, curve.r)
    if not ok.all():
        raise bf.error(f"witness value {int(np.argmin(ok))} is not below the field prime")
    return Witness(curve=curve, values=values)


def write_wtns(path: str | os.PathLike[str], values: np.ndarray, curve: Curve) -> None:
    """Write ``values`` ((n, n8/4) uint32, normal form) as snarkjs does."""
    arr = np.ascontiguousarray(values, dtype="<u4")
    if arr.ndim != 2 or arr.shape[1] != curve.fr_limbs:
        raise ValueError(f"witness must be (n, {curve.fr_limbs}) uint32, got {arr.shape}")
    header = (
        curve.n8r.to_bytes(4, "little")
        + curve.r.to_bytes(curve.n8r, "little")
        + arr.shape[0].to_bytes(4, "little")
    )
    write_binfile(path, "wtns", 2, [(HEADER, [header]), (VALUES, [arr])])
