"""A proving key checked where it is loaded: corrupt points name the file and the section, a
corrupt coefficient section is blamed on the key (not the witness), a key of another circuit is
refused. Fixtures: the snarkjs-made tiny circuit and key in tests/cuzk/formats/data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuzk.errors import FormatError
from cuzk.formats.binfile import read_binfile
from cuzk.formats.wtns import read_wtns
from cuzk.prover.circuit import Circuit
from cuzk.prover.keys import ProvingKey, read_verification_key

DATA = Path(__file__).resolve().parents[1] / "formats" / "data"
WASM = Path(__file__).resolve().parents[1] / "witness" / "data" / "tiny_js" / "tiny.wasm"
R1CS, ZKEY = DATA / "tiny.r1cs", DATA / "tiny.zkey"
SECTION_NAMES = {2: "Groth16 header", 3: "IC", 5: "A", 6: "B1", 7: "B2", 8: "C", 9: "H"}


def corrupt(src: Path, dst: Path, section: int, at: float = 0.5, length: int = 16) -> Path:
    """``length`` bytes of section ``section`` inverted, starting ``at`` of the way in."""
    bf = read_binfile(src, "zkey", 2)
    (sec,) = bf.sections[section]
    data = bytearray(src.read_bytes())
    start = sec.offset + int(sec.size * at)
    start = min(start, sec.offset + sec.size - length)
    for i in range(start, start + length):
        data[i] ^= 0xFF
    dst.write_bytes(bytes(data))
    return dst


@pytest.fixture(scope="module")
def circuit() -> Circuit:
    return Circuit.load(R1CS, WASM, "tiny")


def test_the_snarkjs_key_passes_every_check(circuit: Circuit):
    circuit.check_key(ProvingKey.load(ZKEY))


@pytest.mark.parametrize("section", sorted(SECTION_NAMES))
def test_corrupt_points_name_file_and_section(tmp_path: Path, section: int):
    bad = corrupt(ZKEY, tmp_path / "bad.zkey", section)
    with pytest.raises(FormatError) as info:
        ProvingKey.load(bad)
    message = str(info.value)
    assert message.startswith(f"{bad}: section {section} ({SECTION_NAMES[section]}): ")
    assert "is not on the G" in message and "the key is corrupt" in message
    assert "\n" not in message


def test_corrupt_points_in_the_vk_part_fail_the_vk_export_too(tmp_path: Path):
    bad = corrupt(ZKEY, tmp_path / "bad.zkey", 3)
    with pytest.raises(FormatError, match=r"section 3 \(IC\): point \d+ is not on the G1 curve"):
        read_verification_key(bad)


def test_corrupt_coefficients_are_blamed_on_the_key(tmp_path: Path, circuit: Circuit):
    # Inside one coefficient's 32-byte value (after the u32 count and its three u32 ids), in
    # the low limbs, so the value stays below r and the reader's range checks pass.
    bf = read_binfile(ZKEY, "zkey", 2)
    (sec,) = bf.sections[4]
    data = bytearray(ZKEY.read_bytes())
    entry = sec.offset + 4 + 44 * 2  # third coefficient
    for i in range(entry + 12, entry + 12 + 16):
        data[i] ^= 0xFF
    bad = tmp_path / "bad.zkey"
    bad.write_bytes(bytes(data))
    key = ProvingKey.load(bad)  # the points are fine
    with pytest.raises(FormatError) as info:
        circuit.check_key(key)
    message = str(info.value)
    assert message.startswith(f"{bad}: section 4 (coefficients): 1 of ")
    assert f"disagree with {R1CS}" in message and "entry 2" in message
    assert "the key is corrupt or was made for another circuit" in message
    assert "witness" not in message


def test_key_of_another_circuit_is_refused_with_what_differs(bundled, circuit: Circuit):
    other = bundled("winning-post").key
    with pytest.raises(
        FormatError, match=r"is not a key for circuit tiny: \d+ signals, circuit has 6; domain \d+"
    ):
        circuit.check_key(other)


def test_witness_of_another_circuit_is_refused(bundled, circuit: Circuit, tmp_path: Path):
    from cuzk.formats.wtns import write_wtns

    b = bundled("winning-post")
    wtns = tmp_path / "other.wtns"
    write_wtns(wtns, b.circuit.calculate_witness(b.inputs), b.key.curve)
    with pytest.raises(FormatError, match=r"other\.wtns: has \d+ signals, circuit tiny"):
        circuit.check_witness(read_wtns(wtns), wtns)
    ok = circuit.check_witness(read_wtns(DATA / "tiny.wtns"), DATA / "tiny.wtns")
    assert ok.shape == (circuit.r1cs.n_wires, 8)


def test_a_copied_key_is_still_good(tmp_path: Path, circuit: Circuit):
    """The checks are about content, not the path (guards against a test that always fails)."""
    copy = tmp_path / "copy.zkey"
    shutil.copy(ZKEY, copy)
    circuit.check_key(ProvingKey.load(copy))


def test_sixteen_corrupt_bytes_anywhere_in_sections_1_to_9_name_that_section(
    tmp_path: Path, circuit: Circuit
):
    """Every 16-byte-aligned window of every section the prover reads: a FormatError naming the
    file and that section, raised by loading or by the check against the r1cs. (Section 10, the
    ceremony transcript, is not read for proving; `snarkjs zkey verify` checks it.)"""
    bf = read_binfile(ZKEY, "zkey", 2)
    bad = tmp_path / "bad.zkey"
    tried = 0
    for section in range(1, 10):
        (sec,) = bf.sections[section]
        length = min(16, sec.size)
        for offset in range(0, sec.size - length + 1, 16):
            corrupt(ZKEY, bad, section, at=offset / sec.size, length=length)
            with pytest.raises(FormatError) as info:
                circuit.check_key(ProvingKey.load(bad))
            assert str(info.value).startswith(f"{bad}: section {section} ("), (offset, info.value)
            tried += 1
    assert tried > 100
