"""``cuzk prove`` from a zkey and a witness alone, and in rapidsnark's order
(``cuzk prove CIRCUIT.zkey WITNESS.wtns PROOF.json PUBLIC.json``), run as a user runs it: the
proof is checked by snarkjs, and every misuse is one line with a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cuzk.cli._cli import cuzk, said
from tests.cuzk.cli._ran import ok
from tests.cuzk.prover.test_prover_keycheck import R1CS, ZKEY

WTNS = R1CS.parent / "tiny.wtns"
FORM = "cuzk prove CIRCUIT.zkey WITNESS.wtns PROOF.json PUBLIC.json"


@pytest.fixture(scope="module")
def snarkjs_vk(tmp_path_factory, snarkjs) -> Path:
    """The verification key as snarkjs itself exports it from the zkey."""
    vk = tmp_path_factory.mktemp("vk") / "verification_key.json"
    snarkjs("zkey", "export", "verificationkey", ZKEY, vk)
    return vk


def test_rapidsnarks_call_as_is_writes_a_proof_snarkjs_verifies(tmp_path: Path, snarkjs,
                                                                 snarkjs_vk: Path):
    proof, public = tmp_path / "out" / "proof.json", tmp_path / "public.json"
    out = ok(cuzk(tmp_path, "prove", ZKEY, WTNS, proof, public, "--backend", "cpu"))
    assert "tiny: proof verified=True" in out and f"-> {proof}" in out
    inputs = json.loads((R1CS.parent / "tiny.input.json").read_text())
    a, b, c = inputs["a"], inputs["b"], inputs["c"]
    assert json.loads(public.read_text()) == [str(a * b * c + a), str(a)]
    assert "OK!" in snarkjs("groth16", "verify", snarkjs_vk, public, proof)


def test_zkey_and_wtns_options_need_no_r1cs(tmp_path: Path, snarkjs, snarkjs_vk: Path):
    ok(cuzk(tmp_path, "prove", "--zkey", ZKEY, "--wtns", WTNS, "--backend", "cpu", "--out", "o"))
    out = tmp_path / "o"
    assert "OK!" in snarkjs("groth16", "verify", snarkjs_vk, out / "public.json",
                            out / "proof.json")


def _flipped(tmp_path: Path) -> Path:
    """tiny.wtns with its last signal off by one bit: a constraint no longer holds."""
    from cuzk.formats.wtns import read_wtns, write_wtns

    witness = read_wtns(WTNS)
    values = witness.values.copy()
    values[-1, 0] ^= 1
    bad = tmp_path / "bad.wtns"
    write_wtns(bad, values, witness.curve)
    return bad


def test_a_witness_that_breaks_the_circuit_writes_nothing_and_says_r1cs_would_tell(
    tmp_path: Path,
):
    bad = _flipped(tmp_path)
    proc = cuzk(tmp_path, "prove", ZKEY, bad, "proof.json", "public.json", "--backend", "cpu")
    line = said(proc, "prove")
    assert proc.returncode == 2
    assert f"{bad} does not satisfy the circuit {ZKEY} was made for" in line, line
    assert "give --r1cs" in line
    assert not (tmp_path / "proof.json").exists() and not (tmp_path / "public.json").exists()
    # With --r1cs, the constraint is named.
    proc = cuzk(tmp_path, "prove", "--r1cs", R1CS, ZKEY, bad, "proof.json", "public.json",
                "--backend", "cpu")
    assert "does not satisfy constraint" in said(proc, "prove")


def test_a_witness_of_another_circuit_is_refused_before_proving(tmp_path: Path):
    from cuzk.formats.wtns import read_wtns, write_wtns

    witness = read_wtns(WTNS)
    short = tmp_path / "short.wtns"
    write_wtns(short, witness.values[:-1], witness.curve)
    line = said(cuzk(tmp_path, "prove", ZKEY, short, "p.json", "q.json"), "prove")
    assert f"{short}: has 5 signals, {ZKEY} needs 6: a witness of another circuit" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([ZKEY, WTNS, "p.json"], f"expected four files in rapidsnark's order: {FORM}"),
        ([ZKEY, WTNS, "p.json", "q.json", "--out", "o"], "--out does not go with"),
        ([ZKEY, WTNS, "p.json", "q.json", "--zkey", ZKEY], "--zkey does not go with"),
        (["winning-post", "extra"], "unexpected argument extra after proof kind winning-post"),
        ([ZKEY, "missing.wtns", "p.json", "q.json"], "WITNESS.wtns missing.wtns: no such file"),
        (["--zkey", ZKEY, "--input", "x.json"], "or --zkey with --wtns"),
        ([ZKEY, WTNS, "p.json", "p.json"], "PROOF.json and PUBLIC.json are the same file"),
        ([ZKEY, "w.wtns", "w.wtns", "q.json"], "PROOF.json w.wtns is the WITNESS.wtns given"),
    ],
    ids=["three-files", "out", "zkey", "kind-and-more", "missing-wtns", "zkey-no-wtns",
         "same-outputs", "output-is-an-input"],
)
def test_misuse_is_one_line_and_writes_nothing(tmp_path: Path, args, expected):
    witness = tmp_path / "w.wtns"  # a copy: an input named as an output must survive
    witness.write_bytes(WTNS.read_bytes())
    proc = cuzk(tmp_path, "prove", *args)
    line = said(proc, "prove")
    assert expected in line, line
    assert proc.returncode == 2
    assert not list(tmp_path.glob("*.json"))
    assert witness.read_bytes() == WTNS.read_bytes()
