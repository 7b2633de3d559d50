"""The iden3 container: every way a file can be broken is a FormatError naming file and problem."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuzk.errors import FormatError
from cuzk.formats.binfile import read_binfile, write_binfile

DATA = Path(__file__).with_name("data")


def test_round_trip_sections(tmp_path: Path) -> None:
    p = tmp_path / "x.wtns"
    arr = np.arange(6, dtype=np.uint32).reshape(3, 2)
    write_binfile(p, "wtns", 2, [(1, [b"abcd"]), (2, [arr, b"tail"]), (2, [b""])])
    bf = read_binfile(p, "wtns", 2)
    assert (bf.magic, bf.version) == ("wtns", 2)
    assert bytes(bf.payload(1)) == b"abcd"
    assert len(bf.sections[2]) == 2
    with pytest.raises(FormatError, match="duplicated section 2"):
        bf.payload(2)
    with pytest.raises(FormatError, match="missing section 7"):
        bf.payload(7)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="file not found") as e:
        read_binfile(tmp_path / "nope.zkey", "zkey", 1)
    assert e.value.path.endswith("nope.zkey")


def test_truncated_header(tmp_path: Path) -> None:
    p = tmp_path / "short.zkey"
    p.write_bytes(b"zkey\x01\x00")
    with pytest.raises(FormatError, match=r"short\.zkey: truncated"):
        read_binfile(p, "zkey", 1)


def test_truncated_section(tmp_path: Path) -> None:
    raw = (DATA / "tiny.zkey").read_bytes()
    p = tmp_path / "cut.zkey"
    p.write_bytes(raw[: len(raw) - 10])
    with pytest.raises(FormatError, match=r"cut\.zkey: truncated: section 10 declares 68 bytes"):
        read_binfile(p, "zkey", 1)


def test_other_file_type_is_named(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="this is a r1cs file, expected a zkey file") as e:
        read_binfile(DATA / "tiny.r1cs", "zkey", 1)
    assert "tiny.r1cs" in str(e.value)


def test_bad_magic(tmp_path: Path) -> None:
    p = tmp_path / "junk.zkey"
    p.write_bytes(b"PK\x03\x04" + bytes(40))
    with pytest.raises(FormatError, match=r"junk\.zkey: not a zkey file \(bad magic"):
        read_binfile(p, "zkey", 1)


def test_unsupported_version(tmp_path: Path) -> None:
    p = tmp_path / "v9.wtns"
    write_binfile(p, "wtns", 9, [])
    with pytest.raises(FormatError, match="unsupported wtns version 9"):
        read_binfile(p, "wtns", 2)
