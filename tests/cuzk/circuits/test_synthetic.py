"""``cuzk circuit synth`` / :mod:`cuzk.circuits.synthetic`: the r1cs reads (cuzk, snarkjs), the
witness satisfies every constraint, the development key proves and the proof verifies (cuzk,
snarkjs), and the circuit is as dense as a circom one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from cuzk.circuits import synthetic
from cuzk.cli.main import main
from cuzk.errors import WitnessError
from cuzk.formats.r1cs import read_r1cs
from cuzk.formats.wtns import read_wtns

LOG2 = 8  # 253 constraints: the key takes well under a second


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    assert main(["circuit", "synth", "--constraints-log2", str(LOG2), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def proof_dir(synth_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("proof")
    args = ["prove", "--r1cs", synth_dir / "circuit.r1cs", "--zkey", synth_dir / "circuit.zkey",
            "--wtns", synth_dir / "witness.wtns", "--backend", "cpu", "--out", out]
    assert main([str(a) for a in args]) == 0
    return out


def test_writes_the_four_files_and_reports_each_step(synth_dir: Path, tmp_path: Path, capsys):
    names = {"circuit.r1cs", "witness.wtns", "circuit.zkey", "circuit.vk.json"}
    assert names <= {p.name for p in synth_dir.iterdir()}
    assert main(["circuit", "synth", "--constraints-log2", "6", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for step in ("r1cs", "witness", "keygen"):
        assert re.search(rf"^{step}: \d+\.\d\ds$", out, re.M), out
    assert "61 constraints, 67 signals, 2 public, domain 2^6" in out


def test_r1cs_header_and_domain(synth_dir: Path):
    r = read_r1cs(synth_dir / "circuit.r1cs")
    assert r.n_constraints == synthetic.n_constraints_for(LOG2) == (1 << LOG2) - 3
    assert r.domain_size == 1 << LOG2
    assert (r.n_pub_out, r.n_pub_in, r.n_prv_in) == (1, 1, 4)
    assert r.n_wires == r.n_constraints + 6 == len(read_wtns(synth_dir / "witness.wtns"))
    assert np.array_equal(r.wire_to_label(), np.arange(r.n_wires))


@pytest.mark.parametrize("log2", [5, LOG2, 10])
def test_witness_satisfies_every_constraint(log2: int, synth_dir: Path, tmp_path: Path):
    """cuzk's own check (a*b == c row by row, from the key's A/B and the r1cs's C)."""
    from cuzk.prover.circuit import Circuit
    from cuzk.prover.groth16 import synthesize_from_witness
    from cuzk.prover.keys import ProvingKey
    from cuzk.prover.keystore import generate_zkey

    if log2 == LOG2:
        d = synth_dir
    else:
        d = tmp_path
        synthetic.synthesize_files(d, log2, seed=7, key=False)
        generate_zkey(d / "circuit.r1cs", d / "circuit.zkey", vk=False)
    circuit = Circuit.load(d / "circuit.r1cs", None)
    key = ProvingKey.load(d / "circuit.zkey")
    circuit.check_key(key)
    witness = circuit.check_witness(read_wtns(d / "witness.wtns"), "witness.wtns")
    circuit.check_satisfied(witness, synthesize_from_witness(key, witness).abc[2])

    broken = witness.copy()  # and the check does look: one internal wire off by one
    broken[-10, 0] ^= 1
    with pytest.raises(WitnessError, match="does not satisfy constraint"):
        circuit.check_satisfied(broken, synthesize_from_witness(key, broken).abc[2])


def test_density_is_circom_like():
    """Rows of a few terms (circom circuits: A and B about 1, C about 2); most witness values
    0/1 or small integers, about a quarter full-size field elements; every gadget present."""
    c = synthetic.generate(10, seed=1)
    assert c.witness is not None
    gadgets = np.bincount(c.gadgets, minlength=len(synthetic.GADGET_NAMES))
    assert (gadgets > 0).all(), dict(zip(synthetic.GADGET_NAMES, gadgets.tolist(), strict=True))
    assert np.array_equal(c.gadgets[:-1] == synthetic.ISZ1, c.gadgets[1:] == synthetic.ISZ2)

    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.r1cs"
        synthetic.write_r1cs(path, c)
        r1cs = read_r1cs(path)
    dens = synthetic.density(r1cs, c.witness)
    a, b, cc = dens.terms_per_row
    assert 0.7 <= a <= 1.1 and 1.0 <= b <= 1.5 and 1.3 <= cc <= 2.0, dens.summary()
    assert dens.max_terms <= 1 + synthetic.MAX_PACK
    assert 0.45 <= dens.share_bool <= 0.7, dens.summary()
    assert 0.6 <= dens.share_bool + dens.share_small <= 0.85, dens.summary()
    assert 0.15 <= dens.share_big <= 0.4, dens.summary()
    cons = r1cs.constraints
    assert cons is not None
    per_row = np.bincount(cons.constraint, minlength=r1cs.n_constraints)
    assert per_row.min() >= 2  # no empty constraint
    # Coefficients: mostly 1 and -1 and small constants, a few full-size ones.
    small = ~cons.value[:, 1:].any(axis=1)
    assert 0.5 <= small.mean() < 1.0


def test_same_seed_same_files_other_seed_other_circuit(tmp_path: Path):
    one = synthetic.generate(7, seed=3)
    again = synthetic.generate(7, seed=3)
    other = synthetic.generate(7, seed=4)
    assert one.witness is not None and again.witness is not None and other.witness is not None
    assert np.array_equal(one.constraint_words, again.constraint_words)
    assert np.array_equal(one.witness, again.witness)
    assert not np.array_equal(one.gadgets, other.gadgets)


def test_cuzk_proves_with_the_development_key_and_verifies(synth_dir: Path, proof_dir: Path):
    public = json.loads((proof_dir / "public.json").read_text())
    assert len(public) == 2
    vk = synth_dir / "circuit.vk.json"
    assert main(["verify", "--vk", str(vk), str(proof_dir / "proof.json"),
                 str(proof_dir / "public.json")]) == 0


@pytest.mark.integration
def test_snarkjs_reads_the_r1cs_checks_the_witness_and_verifies(
    synth_dir: Path, proof_dir: Path, snarkjs
):
    info = snarkjs("r1cs", "info", synth_dir / "circuit.r1cs")
    assert re.search(rf"# of Constraints: {(1 << LOG2) - 3}\b", info), info
    assert re.search(rf"# of Wires: {(1 << LOG2) + 3}\b", info), info
    assert "WITNESS IS CORRECT" in snarkjs(
        "wtns", "check", synth_dir / "circuit.r1cs", synth_dir / "witness.wtns"
    )
    out = snarkjs("groth16", "verify", synth_dir / "circuit.vk.json",
                  proof_dir / "public.json", proof_dir / "proof.json")
    assert "OK" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--constraints-log2", "4"], "--constraints-log2 must be 5..28, got 4"),
        (["--constraints-log2", "8", "--seed", "-1"], "--seed must be 0 or more"),
    ],
    ids=["too-small", "negative-seed"],
)
def test_bad_arguments_are_refused_before_any_work(tmp_path: Path, capsys, args, expected):
    out = tmp_path / "out"
    assert main(["circuit", "synth", *args, "--out", str(out)]) == 2
    assert expected in capsys.readouterr().err
    assert not out.exists()
