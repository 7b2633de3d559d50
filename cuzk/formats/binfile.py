"""The iden3 binary section container shared by .r1cs, .wtns, .zkey (and .ptau) files.

Layout (all integers little-endian)::

    magic    4 bytes ASCII ("r1cs", "wtns", "zkey", ...)
    version  u32
    nSections u32
    nSections x { id u32, size u64, payload[size] }

Readers keep the whole file in one numpy buffer (or an mmap) and hand out zero-copy views of
section payloads, so a multi-megabyte point section costs no parsing. Every problem is a
``FormatError`` that names the file, so a user can tell which of several inputs is broken.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cuzk.curves import Curve, curve_for_scalar_prime, unknown_scalar_prime
from cuzk.errors import FormatError

_HEADER = 12
_SECTION_HEADER = 12
_KNOWN_MAGICS = {b"r1cs", b"wtns", b"zkey", b"ptau"}


@dataclass(frozen=True)
class Section:
    id: int
    offset: int  # byte offset of the payload in the file
    size: int


@dataclass
class BinFile:
    """A parsed container: the raw bytes plus where each section's payload lies."""

    path: str
    magic: str
    version: int
    data: np.ndarray  # uint8, the whole file
    sections: dict[int, list[Section]] = field(default_factory=dict)

    def error(self, problem: str) -> FormatError:
        return FormatError(self.path, problem)

    def section(self, section_id: int, name: str = "") -> Section:
        """The one section with this id; missing or duplicated sections are format errors."""
        found = self.sections.get(section_id)
        label = f"section {section_id}" + (f" ({name})" if name else "")
        if not found:
            raise self.error(f"missing {label}")
        if len(found) > 1:
            raise self.error(f"duplicated {label}")
        return found[0]

    def scalar_field(self, hdr: np.ndarray, rest: int) -> tuple[int, Curve]:
        """The (element size, curve) a header that starts with ``n8 u32, prime[n8]`` declares
        (.r1cs and .wtns), its size checked against ``4 + n8 + rest`` bytes; a prime of no
        curve this project proves on is named (BN254 among them) rather than refused blind."""
        if hdr.shape[0] < 4:
            raise self.error("header section too short")
        n8 = read_u32(hdr, 0)
        if n8 == 0 or n8 % 8:
            raise self.error(f"field element size {n8} is not a positive multiple of 8")
        if hdr.shape[0] != 4 + n8 + rest:
            raise self.error(f"header section is {hdr.shape[0]} bytes for field size {n8}, "
                             f"expected {4 + n8 + rest}")
        prime = read_bigint(hdr, 4, n8)
        try:
            curve = curve_for_scalar_prime(prime)
        except KeyError:
            raise self.error(unknown_scalar_prime(prime)) from None
        if n8 != curve.n8r:
            raise self.error(f"field element size {n8} does not match {curve.name} ({curve.n8r})")
        return n8, curve

    def has(self, section_id: int) -> bool:
        return bool(self.sections.get(section_id))

    def payload(
        self, section_id: int, name: str = "", expected_size: int | None = None
    ) -> np.ndarray:
        """Zero-copy uint8 view of a section's payload, optionally checking its exact size."""
        sec = self.section(section_id, name)
        if expected_size is not None and sec.size != expected_size:
            label = f"section {section_id}" + (f" ({name})" if name else "")
            raise self.error(f"{label} is {sec.size} bytes, expected {expected_size}")
        return self.data[sec.offset : sec.offset + sec.size]


def u32_view(buf: np.ndarray, byte_offset: int, count: int) -> np.ndarray:
    """``count`` little-endian u32 values from a uint8 buffer, without copying when aligned."""
    raw = buf[byte_offset : byte_offset + 4 * count]
    if raw.ctypes.data % 4:
        raw = raw.copy()  # numpy can view unaligned data, but numba kernels want it aligned
    return raw.view("<u4")


def read_u32(buf: np.ndarray, byte_offset: int) -> int:
    return int.from_bytes(buf[byte_offset : byte_offset + 4].tobytes(), "little")


def read_bigint(buf: np.ndarray, byte_offset: int, n8: int) -> int:
    return int.from_bytes(buf[byte_offset : byte_offset + n8].tobytes(), "little")


def read_binfile(
    path: str | os.PathLike[str], magic: str, max_version: int, *, mmap: bool = False
) -> BinFile:
    """Open and index a container, checking magic, version and that every section fits.

    ``mmap=True`` maps the file instead of reading it (pages are then shared with the page cache).
    """
    spath = str(path)
    try:
        if mmap and os.path.getsize(spath) > 0:
            data: np.ndarray = np.memmap(spath, dtype=np.uint8, mode="r")
        else:
            data = np.fromfile(spath, dtype=np.uint8)
    except FileNotFoundError:
        raise FormatError(spath, "file not found") from None
    except IsADirectoryError:
        raise FormatError(spath, "is a directory, not a file") from None
    except OSError as e:
        raise FormatError(spath, f"cannot read: {e.strerror or e}") from None
    return index_binfile(spath, data, magic, max_version)


def index_binfile(spath: str, data: np.ndarray, magic: str, max_version: int) -> BinFile:
    """Index a container already in memory (uint8 ``data``; ``spath`` names it in errors),
    checking magic, version and that every section fits."""
    total = int(data.shape[0])
    if total < _HEADER:
        raise FormatError(spath, f"truncated: {total} bytes, not even a {magic} file header")
    found = bytes(data[:4])
    if found != magic.encode():
        if found in _KNOWN_MAGICS:
            raise FormatError(spath, f"this is a {found.decode()} file, expected a {magic} file")
        raise FormatError(spath, f"not a {magic} file (bad magic {found!r})")
    version = read_u32(data, 4)
    if version == 0 or version > max_version:
        raise FormatError(
            spath, f"unsupported {magic} version {version} (this reader knows 1..{max_version})"
        )
    n_sections = read_u32(data, 8)

    bf = BinFile(path=spath, magic=magic, version=version, data=data)
    pos = _HEADER
    for i in range(n_sections):
        if pos + _SECTION_HEADER > total:
            raise FormatError(
                spath,
                f"truncated: header of section {i + 1} of {n_sections} lies past the end "
                f"({total} bytes)",
            )
        sid = read_u32(data, pos)
        size = int.from_bytes(data[pos + 4 : pos + 12].tobytes(), "little")
        start = pos + _SECTION_HEADER
        if start + size > total:
            raise FormatError(
                spath,
                f"truncated: section {sid} declares {size} bytes at offset {start}, "
                f"but the file has only {total - start} bytes left",
            )
        bf.sections.setdefault(sid, []).append(Section(sid, start, size))
        pos = start + size
    return bf


def write_binfile(
    path: str | os.PathLike[str],
    magic: str,
    version: int,
    sections: Iterable[tuple[int, Iterable[bytes | np.ndarray]]],
) -> None:
    """Write a container; each section is an id and a list of byte chunks written in order.

    Written to a temporary name and renamed, so a crash never leaves a half-written key behind.
    """
    if len(magic) != 4:
        raise ValueError("magic must be 4 ASCII characters")
    materialized = [(sid, [_as_bytes(c) for c in chunks]) for sid, chunks in sections]
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(magic.encode())
        f.write(version.to_bytes(4, "little"))
        f.write(len(materialized).to_bytes(4, "little"))
        for sid, chunks in materialized:
            size = sum(len(c) for c in chunks)
            f.write(sid.to_bytes(4, "little"))
            f.write(size.to_bytes(8, "little"))
            for c in chunks:
                f.write(c)
    os.replace(tmp, target)


def _as_bytes(chunk: bytes | np.ndarray) -> memoryview | bytes:
    if isinstance(chunk, np.ndarray):
        flat = np.ascontiguousarray(chunk).reshape(-1)
        return flat.view(np.uint8).data
    return chunk
