"""Reader and writer for ``.wtns`` witness files (iden3 container, magic ``wtns``, version 2).

Sections: 1 header (u32 n8, prime r in n8 bytes, u32 nWitness), 2 values (nWitness x n8 bytes,
normal form, little-endian). The writer emits exactly the bytes ``snarkjs wtns calculate``
writes (version 2, sections 1 then 2), so files can be compared byte for byte.

A file is self-delimiting (its section headers give every size), so several witnesses sent
back to back (one per partition, ``POST /v1/proofs/witness``) are told apart without any
framing: :func:`split_wtns` walks them, :func:`parse_wtns` reads one from memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from cuzk.curves import Curve
from cuzk.errors import FormatError
from cuzk.formats.binfile import (
    BinFile,
    index_binfile,
    read_binfile,
    read_u32,
    u32_view,
    write_binfile,
)
from cuzk.formats.limbs import limbs_less_than

HEADER, VALUES = 1, 2
_FILE_HEADER = 12  # magic, version, section count
_SECTION_HEADER = 12  # id u32, size u64
CHECK_ROWS = 1 << 16
"""Values checked against the prime at a time: the check's temporaries stay small (a few
MB) however large the witness."""


def wtns_file_bytes(n_vars: int, n8: int) -> int:
    """The exact size of a .wtns file of ``n_vars`` values of ``n8`` bytes as snarkjs and
    circom's generators write it (header section, values section)."""
    header = 4 + n8 + 4
    return _FILE_HEADER + 2 * _SECTION_HEADER + header + n_vars * n8


@dataclass
class Witness:
    curve: Curve
    values: np.ndarray  # (n, n8/4) uint32, normal form

    def __len__(self) -> int:
        return int(self.values.shape[0])


def read_wtns(path: str | os.PathLike[str]) -> Witness:
    """Read a witness file; values are a zero-copy view of the file buffer."""
    return _witness(read_binfile(path, "wtns", 2))


def parse_wtns(data: np.ndarray, source: str) -> Witness:
    """A witness file already in memory (uint8 ``data``, an mmap slice is fine: the values
    stay a view of it); ``source`` names it in errors."""
    return _witness(index_binfile(source, data, "wtns", 2))


def split_wtns(data: np.ndarray, source: str) -> list[tuple[int, int]]:
    """(offset, size) of each .wtns file in ``data``, files laid back to back. Only the file
    and section headers are read; a file cut short or trailing bytes are a FormatError that
    says where (``source``: what to call the whole)."""
    total = int(data.shape[0])
    out: list[tuple[int, int]] = []
    pos = 0
    while pos < total:
        start = pos
        where = f"{source}: witness {len(out)} (at byte {start})"
        if total - pos < _FILE_HEADER:
            raise FormatError(where, f"truncated: {total - pos} bytes, not even a wtns header")
        found = bytes(data[pos : pos + 4])
        if found != b"wtns":
            raise FormatError(where, f"not a wtns file (bad magic {found!r})")
        n_sections = read_u32(data, pos + 8)
        pos += _FILE_HEADER
        for i in range(n_sections):
            if total - pos < _SECTION_HEADER:
                raise FormatError(
                    where, f"truncated: header of section {i + 1} of {n_sections} lies past "
                    "the end of the body")
            size = int.from_bytes(data[pos + 4 : pos + 12].tobytes(), "little")
            pos += _SECTION_HEADER + size
            if pos > total:
                raise FormatError(
                    where, f"truncated: section {i + 1} of {n_sections} declares {size} bytes, "
                    f"the body ends {pos - total} bytes short")
        out.append((start, pos - start))
    return out


def _witness(bf: BinFile) -> Witness:
    hdr = bf.payload(HEADER, "header")
    n8, curve = bf.scalar_field(hdr, rest=4)  # the value count
    n = read_u32(hdr, 4 + n8)
    payload = bf.payload(VALUES, "witness values", expected_size=n * n8)
    values = u32_view(payload, 0, n * (n8 // 4)).reshape(n, n8 // 4)
    for first in range(0, n, CHECK_ROWS):
        ok = limbs_less_than(values[first : first + CHECK_ROWS], curve.r)
        if not ok.all():
            raise bf.error(
                f"witness value {first + int(np.argmin(ok))} is not below the field prime")
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
