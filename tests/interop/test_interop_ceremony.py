"""cuzk and snarkjs on a key from a real snarkjs ceremony for a circuit outside the bundle:
cuzk proves and snarkjs verifies, snarkjs proves and cuzk verifies, the public signals are
snarkjs's, and cuzk's exported verification key is snarkjs's, byte for byte as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuzk.cli.main import main
from cuzk.prover.keys import read_verification_key
from tests.interop.conftest import Ceremony, run, write_json

pytestmark = pytest.mark.integration


def test_cuzk_vk_export_equals_snarkjs(ceremony: Ceremony):
    ours = read_verification_key(ceremony.zkey).to_json()
    assert ours == json.loads(ceremony.vk.read_text())
    assert list(ours) == list(json.loads(ceremony.vk.read_text()))  # same key order too


def test_circuit_check_accepts_the_ceremony_files(ceremony: Ceremony, capsys):
    args = ["circuit", "check", "--r1cs", ceremony.r1cs, "--wasm", ceremony.wasm, "--zkey",
            ceremony.zkey]  # fmt: skip
    assert main([str(a) for a in args]) == 0
    out = capsys.readouterr().out
    assert "belong together" in out
    assert len(ceremony.circuit_hash) == 128
    assert f"1 phase-2 contribution, circuit hash {ceremony.circuit_hash})" in out


@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_cuzk_proves_snarkjs_verifies(ceremony: Ceremony, tmp_path: Path, backend: str):
    inputs = ceremony.inputs(3)
    out = tmp_path / "cuzk"
    args = ["prove", "--r1cs", ceremony.r1cs, "--wasm", ceremony.wasm, "--zkey", ceremony.zkey,
            "--input", write_json(tmp_path / "in.json", inputs), "--backend", backend,
            "--out", out]  # fmt: skip
    assert main([str(a) for a in args]) == 0
    run(ceremony.snarkjs, "groth16", "verify", ceremony.vk, out / "public.json", out / "proof.json")
    # The same public signals snarkjs computes for these inputs.
    sj = tmp_path / "sj"
    sj.mkdir()
    run(ceremony.snarkjs, "groth16", "fullprove", tmp_path / "in.json", ceremony.wasm,
        ceremony.zkey, sj / "proof.json", sj / "public.json")  # fmt: skip
    public = json.loads((out / "public.json").read_text())
    assert public == json.loads((sj / "public.json").read_text())
    assert public == ceremony.expected_public(inputs)


def test_snarkjs_proves_cuzk_verifies(ceremony: Ceremony, tmp_path: Path, capsys):
    inputs = write_json(tmp_path / "in.json", ceremony.inputs(5))
    proof, public = tmp_path / "proof.json", tmp_path / "public.json"
    run(ceremony.snarkjs, "groth16", "fullprove", inputs, ceremony.wasm, ceremony.zkey, proof,
        public)  # fmt: skip
    assert main(["verify", "--vk", str(ceremony.vk), str(proof), str(public)]) == 0
    assert main(["verify", "--zkey", str(ceremony.zkey), str(proof), str(public)]) == 0
    # ... and refuses it with one public signal changed.
    values = json.loads(public.read_text())
    values[0] = str(int(values[0]) + 1)
    assert main(["verify", "--vk", str(ceremony.vk), str(proof),
                 str(write_json(tmp_path / "bad.json", values))]) == 1  # fmt: skip


def test_cuzk_proves_from_a_snarkjs_witness(ceremony: Ceremony, tmp_path: Path):
    inputs = write_json(tmp_path / "in.json", ceremony.inputs(8))
    wtns = tmp_path / "witness.wtns"
    run(ceremony.snarkjs, "wtns", "calculate", ceremony.wasm, inputs, wtns)
    out = tmp_path / "out"
    args = ["prove", "--r1cs", ceremony.r1cs, "--zkey", ceremony.zkey, "--wtns", wtns,
            "--out", out]  # fmt: skip
    assert main([str(a) for a in args]) == 0
    run(ceremony.snarkjs, "groth16", "verify", ceremony.vk, out / "public.json", out / "proof.json")
    expected = ceremony.expected_public(json.loads(inputs.read_text()))
    assert json.loads((out / "public.json").read_text()) == expected
