"""zkey reader/writer against a key snarkjs made (tests/cuzk/formats/data/tiny.zkey)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cuzk.curves import BLS12_381
from cuzk.errors import FormatError
from cuzk.formats import zkey as zkey_module
from cuzk.formats.binfile import read_binfile
from cuzk.formats.limbs import limbs_to_ints
from cuzk.formats.r1cs import read_r1cs
from cuzk.formats.zkey import (
    coefficients_from_r1cs,
    decode_coefficients,
    distinct_rows,
    encode_coefficients,
    read_zkey,
    write_zkey,
)

DATA = Path(__file__).with_name("data")
TINY = DATA / "tiny.zkey"
Q, R = BLS12_381.q, BLS12_381.r


def _mont_to_int(limbs: np.ndarray) -> int:
    return limbs_to_ints(limbs.reshape(1, -1))[0] * pow(2**384, -1, Q) % Q


def test_header_and_shapes() -> None:
    z = read_zkey(TINY)
    assert z.curve is BLS12_381
    assert (z.n_vars, z.n_public, z.domain_size, z.power) == (6, 2, 8, 3)
    assert z.alpha1.shape == (2, 12) and z.beta2.shape == (2, 2, 12)
    assert z.ic.shape == (3, 2, 12) and z.a.shape == (6, 2, 12) and z.b1.shape == (6, 2, 12)
    assert z.b2.shape == (6, 2, 2, 12) and z.c.shape == (3, 2, 12) and z.h.shape == (8, 2, 12)
    assert z.a.dtype == np.uint32 and z.coeffs.dtype.itemsize == 44
    assert len(z.cs_hash) == 64
    # zkey_new writes the G1/G2 generators as gamma2 / delta1 / delta2 before any contribution
    # (the tiny key had none): points are Montgomery form in the file.
    assert (_mont_to_int(z.delta1[0]), _mont_to_int(z.delta1[1])) == BLS12_381.g1
    assert _mont_to_int(z.gamma2[0, 0]) == BLS12_381.g2[0][0]
    assert z.nbytes > 0


def test_views_are_zero_copy() -> None:
    z = read_zkey(TINY)
    assert z.h.base is not None and not z.h.flags.owndata


def test_coefficients_match_snarkjs_and_are_c_times_r_squared() -> None:
    z = read_zkey(TINY)
    r1cs = read_r1cs(DATA / "tiny.r1cs")
    ours = coefficients_from_r1cs(r1cs)
    assert ours.tobytes() == z.coeffs.tobytes()
    normal = limbs_to_ints(decode_coefficients(z.coeffs["value"], BLS12_381))
    stored = limbs_to_ints(z.coeffs["value"])
    r2 = pow(2, 512, R)
    assert stored == [c * r2 % R for c in normal]
    # last nPublic+1 rows bind the public inputs: A[nConstraints + s][s] = 1
    tail = z.coeffs[-3:]
    assert tail["constraint"].tolist() == [2, 3, 4] and tail["signal"].tolist() == [0, 1, 2]
    assert normal[-3:] == [1, 1, 1]
    vals = z.coeffs["value"]
    assert (encode_coefficients(decode_coefficients(vals, BLS12_381), BLS12_381) == vals).all()


def _many_coefficients(seed: int) -> np.ndarray:
    """Rows as circuits have them: a few distinct values (0, 1, r-1, small, random), repeated."""
    rng = np.random.default_rng(seed)
    values = [0, 1, R - 1, 2, 2**253, *(int(x) for x in rng.integers(0, 2**63, 20))]
    limbs = np.array([[(v >> (32 * j)) & 0xFFFFFFFF for j in range(8)] for v in values],
                     dtype=np.uint32)
    return limbs[rng.integers(0, len(values), 5000)]


def test_distinct_rows_is_exact(monkeypatch) -> None:
    rows = _many_coefficients(1)
    for hashes in (zkey_module.row_hashes, lambda a: np.zeros(a.shape[0], np.uint64)):
        # the second hash makes every row collide: the exact sort must take over
        monkeypatch.setattr(zkey_module, "row_hashes", hashes)
        uniq, inverse = distinct_rows(rows)
        assert (uniq[inverse] == rows).all()
        assert len({r.tobytes() for r in uniq}) == len(uniq) == len(np.unique(rows, axis=0))


def test_encode_coefficients_matches_big_ints() -> None:
    rows = _many_coefficients(2)
    got = limbs_to_ints(encode_coefficients(rows, BLS12_381))
    r2 = pow(2, 512, R)
    assert got == [c * r2 % R for c in limbs_to_ints(rows)]


def test_round_trip_is_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "copy.zkey"
    write_zkey(out, read_zkey(TINY))
    assert out.read_bytes() == TINY.read_bytes()


def test_round_trip_fresh_key(tmp_path: Path) -> None:
    z = replace(read_zkey(TINY), mpc_params=None)
    out = tmp_path / "fresh.zkey"
    write_zkey(out, z)
    back = read_zkey(out)
    for name in (
        "alpha1",
        "beta1",
        "beta2",
        "gamma2",
        "delta1",
        "delta2",
        "ic",
        "coeffs",
        "a",
        "b1",
        "b2",
        "c",
        "h",
    ):
        assert getattr(back, name).tobytes() == getattr(z, name).tobytes(), name
    assert (back.n_vars, back.n_public, back.domain_size) == (z.n_vars, z.n_public, z.domain_size)
    assert back.mpc_params is not None and back.mpc_params[64:] == bytes(4)  # no contributions
    assert back.cs_hash != bytes(64)


def test_writer_checks_shapes(tmp_path: Path) -> None:
    z = read_zkey(TINY)
    with pytest.raises(ValueError, match="zkey h: shape"):
        write_zkey(tmp_path / "x.zkey", replace(z, h=z.h[:4]))


def _patch(tmp_path: Path, section: int, offset: int, new: bytes) -> Path:
    bf = read_binfile(TINY, "zkey", 1)
    start = bf.section(section).offset + offset
    raw = bytearray(TINY.read_bytes())
    raw[start : start + len(new)] = new
    p = tmp_path / "bad.zkey"
    p.write_bytes(bytes(raw))
    return p


def test_unknown_base_prime(tmp_path: Path) -> None:
    p = _patch(tmp_path, 2, 4, (Q - 2).to_bytes(48, "little"))
    with pytest.raises(
        FormatError,
        match=r"bad\.zkey: section 2 \(Groth16 header\): base field prime 0x.* is not a"
        r" supported curve's \(bls12381\)",
    ):
        read_zkey(p)


def test_wrong_scalar_prime(tmp_path: Path) -> None:
    p = _patch(tmp_path, 2, 56, (R + 2).to_bytes(32, "little"))
    with pytest.raises(FormatError, match=r"scalar field prime .* does not match bls12381"):
        read_zkey(p)


def test_not_groth16(tmp_path: Path) -> None:
    p = _patch(tmp_path, 1, 0, (2).to_bytes(4, "little"))
    with pytest.raises(FormatError, match=r"not a Groth16 key \(plonk\)"):
        read_zkey(p)


def test_header_counts_disagree_with_sections(tmp_path: Path) -> None:
    p = _patch(tmp_path, 2, 88, (7).to_bytes(4, "little"))  # nVars 6 -> 7
    with pytest.raises(FormatError, match=r"section 5 \(A\) is 576 bytes, expected 672"):
        read_zkey(p)
    p = _patch(tmp_path, 2, 96, (16).to_bytes(4, "little"))  # domain 8 -> 16
    with pytest.raises(FormatError, match=r"section 9 \(H\) is 768 bytes, expected 1536"):
        read_zkey(p)
    p = _patch(tmp_path, 2, 96, (12).to_bytes(4, "little"))
    with pytest.raises(FormatError, match="domain size 12 is not a power of two"):
        read_zkey(p)


def test_coefficient_count_and_values(tmp_path: Path) -> None:
    p = _patch(tmp_path, 4, 0, (8).to_bytes(4, "little"))
    with pytest.raises(
        FormatError, match=r"section 4 \(coefficients\) is 312 bytes, expected 356 for 8"
    ):
        read_zkey(p)
    p = _patch(tmp_path, 4, 4 + 8, (99).to_bytes(4, "little"))  # first coefficient's signal
    with pytest.raises(FormatError, match="refers to a signal beyond nVars"):
        read_zkey(p)
    p = _patch(tmp_path, 4, 4 + 12, R.to_bytes(32, "little"))
    with pytest.raises(FormatError, match="value is not below the scalar field prime"):
        read_zkey(p)


def test_wtns_is_not_a_zkey() -> None:
    with pytest.raises(FormatError, match="this is a wtns file, expected a zkey file"):
        read_zkey(DATA / "tiny.wtns")


@pytest.mark.integration
def test_snarkjs_uses_a_rewritten_key(tmp_path: Path, snarkjs) -> None:
    """A key written by write_zkey (fresh section 10) works in snarkjs: vk export, prove, verify."""
    key = tmp_path / "fresh.zkey"
    write_zkey(key, replace(read_zkey(TINY), mpc_params=None))
    snarkjs("zkey", "export", "verificationkey", TINY, tmp_path / "vk0.json")
    snarkjs("zkey", "export", "verificationkey", key, tmp_path / "vk.json")
    assert json.loads((tmp_path / "vk.json").read_text()) == json.loads(
        (tmp_path / "vk0.json").read_text()
    )
    snarkjs(
        "groth16",
        "prove",
        key,
        DATA / "tiny.wtns",
        tmp_path / "proof.json",
        tmp_path / "public.json",
    )
    out = snarkjs(
        "groth16", "verify", tmp_path / "vk.json", tmp_path / "public.json", tmp_path / "proof.json"
    )
    assert "OK" in out
    assert json.loads((tmp_path / "public.json").read_text()) == ["108", "3"]
