"""Reader for circom's ``.r1cs`` constraint system files (iden3 container, magic ``r1cs``).

Sections: 1 header (n8, prime r, nWires, nPubOut, nPubIn, nPrvIn, nLabels u64, nConstraints),
2 constraints (per constraint three linear combinations A, B, C; each is a u32 term count then
``count x (u32 wire, n8-byte value)``), 3 wire-to-label map (u64 per wire), 4/5 custom gates
(PLONK only). Values are plain (normal-form) little-endian field elements.

Constraints come back as flat numpy arrays with one row per non-zero term, in file order, so
the prover can build a/b/c with vectorized gathers. Only the walk over linear-combination headers
is a Python loop (three per constraint): term data is never touched element by element.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from cuzk.curves import Curve
from cuzk.formats.binfile import BinFile, read_binfile, read_u32, u32_view
from cuzk.formats.limbs import limbs_less_than

HEADER, CONSTRAINTS, WIRE_MAP, CUSTOM_GATES_LIST, CUSTOM_GATES_USES = 1, 2, 3, 4, 5
MATRIX_A, MATRIX_B, MATRIX_C = 0, 1, 2


@dataclass(frozen=True)
class R1CSConstraints:
    """All non-zero terms of A, B and C: term i is ``value[i] * w[signal[i]]`` in row
    ``constraint[i]`` of matrix ``matrix[i]`` (0 = A, 1 = B, 2 = C)."""

    matrix: np.ndarray  # (m,) uint8
    constraint: np.ndarray  # (m,) uint32
    signal: np.ndarray  # (m,) uint32
    value: np.ndarray  # (m, n8/4) uint32, normal form

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def of(self, matrix: int) -> R1CSConstraints:
        """The terms of one matrix (MATRIX_A, MATRIX_B or MATRIX_C), in file order."""
        sel = self.matrix == matrix
        return R1CSConstraints(
            self.matrix[sel], self.constraint[sel], self.signal[sel], self.value[sel]
        )


@dataclass
class R1CS:
    path: str
    curve: Curve
    prime: int
    n8: int
    n_wires: int
    n_pub_out: int
    n_pub_in: int
    n_prv_in: int
    n_labels: int
    n_constraints: int
    constraints: R1CSConstraints | None
    _file: BinFile

    @property
    def n_public(self) -> int:
        """Public signals excluding the constant ONE wire (snarkjs's nPublic)."""
        return self.n_pub_out + self.n_pub_in

    @property
    def domain_size(self) -> int:
        """The Groth16 domain snarkjs picks: the next power of two strictly above
        nConstraints + nPublic (the extra rows bind the public inputs)."""
        return 1 << (self.n_constraints + self.n_public).bit_length()

    def wire_to_label(self) -> np.ndarray:
        """Section 3 as a uint64 array (label id of every wire); zero-copy."""
        payload = self._file.payload(WIRE_MAP, "wire map", expected_size=8 * self.n_wires)
        return payload.view("<u8") if payload.ctypes.data % 8 == 0 else payload.copy().view("<u8")


def read_r1cs(path: str | os.PathLike[str], *, load_constraints: bool = True) -> R1CS:
    """Read an ``.r1cs`` file; every inconsistency is a FormatError naming the file."""
    bf = read_binfile(path, "r1cs", 1)
    hdr = bf.payload(HEADER, "header")
    n8, curve = bf.scalar_field(hdr, rest=28)  # wires, 3 input counts, labels u64, constraints
    o = 4 + n8
    n_wires, n_pub_out, n_pub_in, n_prv_in = (read_u32(hdr, o + 4 * i) for i in range(4))
    n_labels = int.from_bytes(hdr[o + 16 : o + 24].tobytes(), "little")
    n_constraints = read_u32(hdr, o + 24)
    if 1 + n_pub_out + n_pub_in + n_prv_in > n_wires:
        raise bf.error(
            f"header says {n_pub_out}+{n_pub_in}+{n_prv_in} input/output wires plus ONE "
            f"but only {n_wires} wires"
        )
    if bf.has(CUSTOM_GATES_LIST) or bf.has(CUSTOM_GATES_USES):
        raise bf.error("uses custom gates (PLONK only); Groth16 cannot prove it")

    constraints = _read_constraints(bf, curve, n_constraints, n_wires) if load_constraints else None
    if not load_constraints:
        bf.section(CONSTRAINTS, "constraints")  # still require it to exist
    return R1CS(
        path=bf.path,
        curve=curve,
        prime=curve.r,
        n8=n8,
        n_wires=n_wires,
        n_pub_out=n_pub_out,
        n_pub_in=n_pub_in,
        n_prv_in=n_prv_in,
        n_labels=n_labels,
        n_constraints=n_constraints,
        constraints=constraints,
        _file=bf,
    )


def _read_constraints(
    bf: BinFile, curve: Curve, n_constraints: int, n_wires: int
) -> R1CSConstraints:
    payload = bf.payload(CONSTRAINTS, "constraints")
    if payload.shape[0] % 4:
        raise bf.error(
            f"constraints section is {payload.shape[0]} bytes, not a whole number of words"
        )
    n32 = curve.fr_limbs
    n_words = payload.shape[0] // 4
    words = u32_view(payload, 0, n_words)
    stride = 1 + n32  # one term: wire index then the value's limbs

    n_lc = 3 * n_constraints
    starts: list[int] = [0] * n_lc
    counts: list[int] = [0] * n_lc
    mv = words.data  # a memoryview of the u32 words
    pos = 0
    for k in range(n_lc):  # one iteration per linear combination header, never per term
        if pos >= n_words:
            raise bf.error(
                f"constraints section truncated: ends inside constraint {k // 3} of {n_constraints}"
            )
        n = mv[pos]
        starts[k] = pos + 1
        counts[k] = n
        pos += 1 + n * stride
    if pos != n_words:
        if pos > n_words:
            raise bf.error(
                f"constraints section truncated: ends inside constraint {n_constraints - 1}"
            )
        raise bf.error(
            f"constraints section has {4 * (n_words - pos)} bytes after the "
            f"{n_constraints} constraints "
            "the header declares"
        )

    cnt = np.asarray(counts, dtype=np.int64)
    m = int(cnt.sum())
    lc_start = np.asarray(starts, dtype=np.int64)
    first_term = np.cumsum(cnt) - cnt
    within = np.arange(m, dtype=np.int64) - np.repeat(first_term, cnt)
    term_word = np.repeat(lc_start, cnt) + within * stride
    signal = words[term_word].astype(np.uint32)
    value = words[term_word[:, None] + np.arange(1, stride, dtype=np.int64)]
    lc_ids = np.arange(n_lc, dtype=np.int64)
    matrix = np.repeat((lc_ids % 3).astype(np.uint8), cnt)
    constraint = np.repeat((lc_ids // 3).astype(np.uint32), cnt)

    if m and int(signal.max()) >= n_wires:
        bad = int(np.argmax(signal >= n_wires))
        raise bf.error(
            f"constraint {int(constraint[bad])} refers to wire {int(signal[bad])}, "
            f"but there are only {n_wires} wires"
        )
    ok = limbs_less_than(value, curve.r)
    if not ok.all():
        bad = int(np.argmin(ok))
        raise bf.error(
            f"constraint {int(constraint[bad])} has a coefficient not below the field prime"
        )
    return R1CSConstraints(matrix=matrix, constraint=constraint, signal=signal, value=value)
