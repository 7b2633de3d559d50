"""wtns reader/writer: round trip, byte equality with snarkjs's file, corrupt files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuzk.curves import BLS12_381
from cuzk.errors import FormatError
from cuzk.formats.limbs import ints_to_limbs, limbs_to_ints
from cuzk.formats.wtns import read_wtns, write_wtns

DATA = Path(__file__).with_name("data")
R = BLS12_381.r


def test_read_snarkjs_witness() -> None:
    w = read_wtns(DATA / "tiny.wtns")  # a=3, b=5, c=7: [1, out=ab*c+a, a, b, c, ab]
    assert w.curve is BLS12_381
    assert limbs_to_ints(w.values) == [1, 108, 3, 5, 7, 15]


def test_write_is_byte_identical_to_snarkjs(tmp_path: Path) -> None:
    w = read_wtns(DATA / "tiny.wtns")
    out = tmp_path / "again.wtns"
    write_wtns(out, w.values, BLS12_381)
    assert out.read_bytes() == (DATA / "tiny.wtns").read_bytes()


def test_round_trip_edge_values(tmp_path: Path) -> None:
    vals = [0, 1, 2**32 - 1, 2**32, 2**254, R - 1, 12345678901234567890123456789]
    p = tmp_path / "w.wtns"
    write_wtns(p, ints_to_limbs(vals, 8), BLS12_381)
    back = read_wtns(p)
    assert limbs_to_ints(back.values) == vals
    assert back.values.dtype == np.uint32 and back.values.shape == (len(vals), 8)


def test_value_not_reduced(tmp_path: Path) -> None:
    p = tmp_path / "big.wtns"
    write_wtns(p, ints_to_limbs([1, R], 8), BLS12_381)
    with pytest.raises(
        FormatError, match=r"big\.wtns: witness value 1 is not below the field prime"
    ):
        read_wtns(p)


def test_wrong_section_size(tmp_path: Path) -> None:
    raw = bytearray((DATA / "tiny.wtns").read_bytes())
    raw[12 + 12 + 36 : 12 + 12 + 40] = (7).to_bytes(4, "little")  # nWitness 6 -> 7
    p = tmp_path / "short.wtns"
    p.write_bytes(bytes(raw))
    with pytest.raises(
        FormatError, match=r"short\.wtns: section 2 \(witness values\) is 192 bytes, expected 224"
    ):
        read_wtns(p)


def test_truncated(tmp_path: Path) -> None:
    p = tmp_path / "cut.wtns"
    p.write_bytes((DATA / "tiny.wtns").read_bytes()[:100])
    with pytest.raises(FormatError, match=r"cut\.wtns: truncated"):
        read_wtns(p)


def test_unknown_prime(tmp_path: Path) -> None:
    raw = bytearray((DATA / "tiny.wtns").read_bytes())
    raw[28:60] = (R + 2).to_bytes(32, "little")
    p = tmp_path / "prime.wtns"
    p.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=r"is not the scalar field of a supported curve \(bls"):
        read_wtns(p)


def test_writer_rejects_wrong_shape(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\(n, 8\)"):
        write_wtns(tmp_path / "x.wtns", np.zeros((3, 12), np.uint32), BLS12_381)


def test_witnesses_back_to_back_are_split_by_their_headers() -> None:
    """What ``POST /v1/proofs/witness`` receives: files laid end to end, no other framing."""
    from cuzk.formats.wtns import parse_wtns, split_wtns, wtns_file_bytes

    one = (DATA / "tiny.wtns").read_bytes()
    assert len(one) == wtns_file_bytes(6, 32)  # the exact size a kind's bound is made of
    body = np.frombuffer(one * 3, dtype=np.uint8)
    spans = split_wtns(body, "body")
    assert spans == [(0, len(one)), (len(one), len(one)), (2 * len(one), len(one))]
    for offset, size in spans:
        w = parse_wtns(body[offset : offset + size], "w")
        assert limbs_to_ints(w.values) == [1, 108, 3, 5, 7, 15]
    with pytest.raises(FormatError, match=r"body: witness 1 \(at byte 268\): truncated"):
        split_wtns(np.frombuffer(one + one[:-1], dtype=np.uint8), "body")
    with pytest.raises(FormatError, match=r"witness 1 \(at byte 268\): truncated: 3 bytes"):
        split_wtns(np.frombuffer(one + b"abc", dtype=np.uint8), "body")


def test_a_value_at_the_prime_is_refused_wherever_it_lies(tmp_path: Path) -> None:
    """The range check runs a slice at a time: a bad value past the first slice is found."""
    from cuzk.formats.wtns import CHECK_ROWS

    vals = ints_to_limbs([1] * (CHECK_ROWS + 5), 8)
    vals[CHECK_ROWS + 3] = ints_to_limbs([R], 8)[0]
    p = tmp_path / "w.wtns"
    write_wtns(p, vals, BLS12_381)
    with pytest.raises(FormatError, match=f"witness value {CHECK_ROWS + 3} is not below"):
        read_wtns(p)
