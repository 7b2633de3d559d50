"""r1cs reader: header fields, constraint arrays, and corrupt files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuzk.curves import BLS12_381
from cuzk.errors import FormatError
from cuzk.formats.limbs import limbs_to_ints
from cuzk.formats.r1cs import MATRIX_A, MATRIX_B, MATRIX_C, read_r1cs

DATA = Path(__file__).with_name("data")
R = BLS12_381.r


def test_tiny_header_and_constraints() -> None:
    # tiny.circom: ab <== a*b; out <== ab*c + a  (wires: 1, out, a, b, c, ab)
    r1cs = read_r1cs(DATA / "tiny.r1cs")
    assert r1cs.curve is BLS12_381 and r1cs.prime == R and r1cs.n8 == 32
    assert (r1cs.n_wires, r1cs.n_pub_out, r1cs.n_pub_in, r1cs.n_prv_in) == (6, 1, 1, 2)
    assert (r1cs.n_labels, r1cs.n_constraints, r1cs.n_public) == (6, 2, 2)
    assert r1cs.domain_size == 8  # 2 constraints + 2 public = 4 -> next power of two above is 8
    c = r1cs.constraints
    assert c is not None and c.value.shape == (7, 8) and c.value.dtype == np.uint32
    terms = list(
        zip(
            c.matrix.tolist(),
            c.constraint.tolist(),
            c.signal.tolist(),
            limbs_to_ints(c.value),
            strict=True,
        )
    )
    # circom writes A*B - C = 0 as (-a)*(b) = -(ab): coefficients are r-1 = -1
    assert terms == [
        (MATRIX_A, 0, 2, R - 1),
        (MATRIX_B, 0, 3, 1),
        (MATRIX_C, 0, 5, R - 1),
        (MATRIX_A, 1, 5, R - 1),
        (MATRIX_B, 1, 4, 1),
        (MATRIX_C, 1, 1, R - 1),
        (MATRIX_C, 1, 2, 1),
    ]
    assert len(c.of(MATRIX_B)) == 2
    assert r1cs.wire_to_label().tolist() == [0, 1, 2, 3, 4, 5]


def test_header_only() -> None:
    r1cs = read_r1cs(DATA / "tiny.r1cs", load_constraints=False)
    assert r1cs.constraints is None and r1cs.n_constraints == 2


def _patched(tmp_path: Path, offset: int, new: bytes, name: str = "bad.r1cs") -> Path:
    raw = bytearray((DATA / "tiny.r1cs").read_bytes())
    raw[offset : offset + len(new)] = new
    p = tmp_path / name
    p.write_bytes(bytes(raw))
    return p


def _section_offset(section_id: int) -> int:
    from cuzk.formats.binfile import read_binfile

    return read_binfile(DATA / "tiny.r1cs", "r1cs", 1).section(section_id).offset


def test_unknown_prime(tmp_path: Path) -> None:
    bn254_r = 21888242871839275222246405745257275088548364400416034343698204186575808495617
    p = _patched(tmp_path, _section_offset(1) + 4, bn254_r.to_bytes(32, "little"))
    with pytest.raises(
        FormatError,
        match=r"bad\.r1cs: compiled for bn128 \(circom's default prime\), but cuzk proves on"
        r" bls12381 only: compile with --prime bls12381",
    ):
        read_r1cs(p)


def test_wrong_constraint_count(tmp_path: Path) -> None:
    # nConstraints is the last u32 of the 64-byte header: claim 3 instead of 2
    p = _patched(tmp_path, _section_offset(1) + 60, (3).to_bytes(4, "little"))
    with pytest.raises(FormatError, match="constraints section truncated"):
        read_r1cs(p)
    p = _patched(tmp_path, _section_offset(1) + 60, (1).to_bytes(4, "little"))
    with pytest.raises(FormatError, match="bytes after the 1 constraints"):
        read_r1cs(p)


def test_wire_out_of_range(tmp_path: Path) -> None:
    p = _patched(tmp_path, _section_offset(2) + 4, (99).to_bytes(4, "little"))
    with pytest.raises(FormatError, match="refers to wire 99, but there are only 6 wires"):
        read_r1cs(p)


def test_zkey_is_not_r1cs() -> None:
    with pytest.raises(FormatError, match="this is a zkey file, expected a r1cs file"):
        read_r1cs(DATA / "tiny.zkey")
