"""The wasm witness runner: snarkjs equality, inputs, errors that name the signal, threads."""

from __future__ import annotations

import copy
import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from cuzk.circuits.registry import bundled_circuits
from cuzk.curves import BLS12_381
from cuzk.errors import FormatError, WitnessError
from cuzk.formats.limbs import limbs_to_ints
from cuzk.formats.wtns import read_wtns
from cuzk.witness.wasm import WitnessCalculator, fnv1a_64

DATA = Path(__file__).with_name("data")
TINY_WASM = DATA / "tiny_js" / "tiny.wasm"
R = BLS12_381.r
CIRCUITS = bundled_circuits()


def tiny_expected(a: int, b: int, c: int) -> list[int]:
    """tiny.circom: wires [1, out = a*b*c + a, a, b, c, ab = a*b]."""
    a, b, c = a % R, b % R, c % R
    return [1, (a * b % R * c + a) % R, a, b, c, a * b % R]


@pytest.fixture(scope="module")
def tiny() -> WitnessCalculator:
    return WitnessCalculator(TINY_WASM)


@pytest.fixture(scope="module")
def winning() -> WitnessCalculator:
    return WitnessCalculator(CIRCUITS["winning-post"].wasm_path)


@pytest.fixture()
def sample() -> dict:
    return json.loads(CIRCUITS["winning-post"].sample_input_path.read_text())


def test_fnv_hash_matches_circom() -> None:
    # circom_runtime's fnvHash("a") == "af63dc4c8601ec8c" (FNV-1a 64)
    assert fnv1a_64("a") == 0xAF63DC4C8601EC8C
    assert fnv1a_64("") == 0xCBF29CE484222325


def test_tiny_values_and_sym_discovery(tiny: WitnessCalculator) -> None:
    assert tiny.curve is BLS12_381 and tiny.n_vars == 6 and tiny.input_size == 3
    assert tiny.input_signals == {
        "a": 1,
        "b": 1,
        "c": 1,
    }  # from tiny.sym; out and ab are not inputs
    w = tiny.calculate({"a": 3, "b": 5, "c": 7})
    assert w.dtype == np.uint32 and w.shape == (6, 8)
    assert limbs_to_ints(w) == tiny_expected(3, 5, 7)


def test_input_value_forms(tiny: WitnessCalculator) -> None:
    ref = tiny.calculate({"a": 3, "b": 5, "c": 7})
    for inp in (
        {"a": "3", "b": "0x5", "c": 7.0},
        {"a": [3], "b": [[5]], "c": " 7 "},
    ):
        assert (tiny.calculate(inp) == ref).all(), inp
    neg = tiny.calculate({"a": -1, "b": "-2", "c": 1})
    assert limbs_to_ints(neg) == tiny_expected(-1, -2, 1)
    edge = tiny.calculate({"a": R - 1, "b": -(R - 1), "c": 1})
    assert limbs_to_ints(edge) == tiny_expected(R - 1, -(R - 1), 1)


@pytest.mark.parametrize("value", [R, 3 + R, -R, str(R), hex(R), str(2 * R + 1)])
def test_a_value_not_below_r_is_refused_not_reduced(tiny: WitnessCalculator, value) -> None:
    """As the server refuses it (cuzk.api.signals): a local proof must not silently prove a
    different input than the one given."""
    with pytest.raises(WitnessError, match=r"input signal 'a'.*not below r"):
        tiny.calculate({"a": value, "b": 5, "c": 7})


def test_matches_snarkjs_file(tiny: WitnessCalculator, tmp_path: Path) -> None:
    out = tmp_path / "tiny.wtns"
    tiny.calculate_wtns({"a": 3, "b": 5, "c": 7}, out)
    assert out.read_bytes() == (DATA.parent.parent / "formats" / "data" / "tiny.wtns").read_bytes()


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(CIRCUITS))
def test_bundled_witness_equals_snarkjs(kind: str, tmp_path: Path, snarkjs) -> None:
    c = CIRCUITS[kind]
    theirs = tmp_path / "snarkjs.wtns"
    snarkjs("wtns", "calculate", c.wasm_path, c.sample_input_path, theirs)
    calc = WitnessCalculator(c.wasm_path)
    ours = tmp_path / "ours.wtns"
    w = calc.calculate_wtns(json.loads(c.sample_input_path.read_text()), ours)
    assert ours.read_bytes() == theirs.read_bytes()
    assert (w == read_wtns(theirs).values).all()
    # a pooled instance, reused, gives the same answer
    assert (calc.calculate(json.loads(c.sample_input_path.read_text())) == w).all()


def test_bundled_schema(winning: WitnessCalculator) -> None:
    assert winning.input_signals == {"root": 1, "challenge": 1, "leaf": 1, "siblings": 7}


def test_missing_signal(winning: WitnessCalculator, sample: dict) -> None:
    del sample["leaf"]
    with pytest.raises(WitnessError, match=r"missing input signal 'leaf' \(1 values\)"):
        winning.calculate(sample)


def test_extra_signal(winning: WitnessCalculator, sample: dict) -> None:
    sample["nonce"] = 1
    with pytest.raises(WitnessError, match="unknown input signal 'nonce'"):
        winning.calculate(sample)


def test_an_unknown_signal_name_is_echoed_on_one_line(
    winning: WitnessCalculator, sample: dict
) -> None:
    """A 422 quotes the name the client sent: a raw newline in it would split the error (and a
    log line) in two, so it is escaped as every other client-chosen string is (issue 28)."""
    sample["evil\nINFO forged line\x1b[2J"] = 1
    with pytest.raises(WitnessError) as caught:
        winning.calculate(sample)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message
    assert "'evil\\nINFO forged line\\x1b[2J'" in message


def test_wrong_length(winning: WitnessCalculator, sample: dict) -> None:
    sample["siblings"][0][0] = sample["siblings"][0][0][:-1]
    with pytest.raises(WitnessError, match="input signal 'siblings' needs 7 values, got 6"):
        winning.calculate(sample)


@pytest.mark.parametrize("bad", ["12abc", "", None, True, 1.5, {"x": 1}])
def test_not_a_number(winning: WitnessCalculator, sample: dict, bad: object) -> None:
    sample["siblings"][0][0][3] = bad
    with pytest.raises(WitnessError, match=r"input signal 'siblings\[0\]\[0\]\[3\]' is not"):
        winning.calculate(sample)


def test_wrong_root_fails(winning: WitnessCalculator, sample: dict) -> None:
    sample["root"][0] = str(int(sample["root"][0]) + 1)
    with pytest.raises(WitnessError, match="root mismatch: public input root of tree 0") as e:
        winning.calculate(sample)
    assert "assert failed" in str(e.value)


def test_wrong_leaf_fails(winning: WitnessCalculator, sample: dict) -> None:
    sample["leaf"][0][0] = "1"
    with pytest.raises(WitnessError, match="root mismatch"):
        winning.calculate(sample)


def test_calculator_recovers_after_errors(winning: WitnessCalculator, sample: dict) -> None:
    good = winning.calculate(copy.deepcopy(sample))
    bad = copy.deepcopy(sample)
    bad["root"][0] = "5"
    with pytest.raises(WitnessError):
        winning.calculate(bad)
    assert (winning.calculate(sample) == good).all()


def test_no_schema_still_detects_missing(tmp_path: Path) -> None:
    wasm = tmp_path / "alone.wasm"
    shutil.copy(TINY_WASM, wasm)
    calc = WitnessCalculator(wasm)
    assert calc.input_signals is None
    with pytest.raises(WitnessError, match="missing input signals: 2 of 3 input values given"):
        calc.calculate({"a": 1, "b": 2})
    with pytest.raises(WitnessError, match="unknown input signal 'd'"):
        calc.calculate({"a": 1, "b": 2, "c": 3, "d": 4})


def test_bad_schema_sidecar(tmp_path: Path) -> None:
    wasm = tmp_path / "circuit.wasm"
    shutil.copy(TINY_WASM, wasm)
    (tmp_path / "circuit.inputs.json").write_text(json.dumps({"signals": {"a": 1, "zz": 1}}))
    with pytest.raises(FormatError, match="lists input signal 'zz'"):
        WitnessCalculator(wasm)


def test_not_a_wasm(tmp_path: Path) -> None:
    p = tmp_path / "circuit.wasm"
    p.write_bytes(b"\x00asm garbage")
    with pytest.raises(FormatError, match=r"circuit\.wasm: not a valid wasm module"):
        WitnessCalculator(p)
    with pytest.raises(FormatError, match="file not found"):
        WitnessCalculator(tmp_path / "missing.wasm")


def test_threads_get_their_own_results(tiny: WitnessCalculator) -> None:
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for j in range(20):
                a, b, c = seed * 1000 + j, seed + 7, j + 1
                if j % 5 == 4:
                    with pytest.raises(WitnessError):
                        tiny.calculate({"a": a, "b": b})
                    continue
                assert limbs_to_ints(tiny.calculate({"a": a, "b": b, "c": c})) == tiny_expected(
                    a, b, c
                )
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
