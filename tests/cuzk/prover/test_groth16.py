"""End to end: our proofs against snarkjs, snarkjs's proofs against us, and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from py_arkworks_bls12381 import GT

from cuzk.errors import FormatError, ProofError, WitnessError
from cuzk.formats.wtns import write_wtns
from cuzk.prover import CpuBackend, ProvingKey, finalize, gpu_phase, synthesize, verify
from cuzk.prover.groth16 import synthesize_from_witness
from cuzk.prover.points import g1_from_json, g2_from_json
from cuzk.prover.session import prove_timed

KINDS = ["winning-post", "snap-update", "window-post", "porep-c2"]


@pytest.mark.parametrize("kind", KINDS)
def test_snarkjs_verifies_our_proof(kind, bundled, snarkjs, tmp_path: Path):
    b = bundled(kind)
    proof, _ = prove_timed(b.key, b.circuit, b.inputs, CpuBackend())
    assert proof.verified
    (tmp_path / "proof.json").write_text(json.dumps(proof.proof))
    (tmp_path / "public.json").write_text(json.dumps(proof.public))
    # The verification key as snarkjs itself reads it out of our zkey.
    snarkjs("zkey", "export", "verificationkey", b.zkey_path, tmp_path / "vk.json")
    out = snarkjs(
        "groth16", "verify", tmp_path / "vk.json", tmp_path / "public.json", tmp_path / "proof.json"
    )
    assert "OK" in out
    # And the verification key as we export it: snarkjs's, key for key (vk_alphabeta_12 too).
    ours = b.key.verification_key.to_json()
    assert ours == json.loads((tmp_path / "vk.json").read_text())
    (tmp_path / "our_vk.json").write_text(json.dumps(ours))
    out = snarkjs(
        "groth16",
        "verify",
        tmp_path / "our_vk.json",
        tmp_path / "public.json",
        tmp_path / "proof.json",
    )
    assert "OK" in out


@pytest.mark.parametrize("kind", ["winning-post", "window-post"])
def test_snarkjs_proof_verifies_with_cuzk(kind, bundled, snarkjs, tmp_path: Path):
    b = bundled(kind)
    witness = b.circuit.calculate_witness(b.inputs)
    write_wtns(tmp_path / "w.wtns", witness, b.key.curve)
    snarkjs(
        "groth16",
        "prove",
        b.zkey_path,
        tmp_path / "w.wtns",
        tmp_path / "p.json",
        tmp_path / "pub.json",
    )
    proof = json.loads((tmp_path / "p.json").read_text())
    public = json.loads((tmp_path / "pub.json").read_text())
    assert verify(b.key.verification_key, proof, public)
    public[0] = str((int(public[0]) + 1) % b.key.curve.r)
    assert not verify(b.key.verification_key, proof, public)


def test_public_signals_match_witness(bundled):
    b = bundled("winning-post")
    proof, _ = prove_timed(b.key, b.circuit, b.inputs, CpuBackend())
    witness = b.circuit.calculate_witness(b.inputs)
    expected = [
        str(int.from_bytes(witness[i].tobytes(), "little"))
        for i in range(1, b.key.sizes.n_public + 1)
    ]
    assert proof.public == expected
    assert proof.proof["protocol"] == "groth16" and proof.proof["curve"] == "bls12381"


def test_tampered_proof_is_rejected(bundled):
    b = bundled("winning-post")
    proof, _ = prove_timed(b.key, b.circuit, b.inputs, CpuBackend())
    bad = json.loads(json.dumps(proof.proof))
    bad["pi_a"], bad["pi_c"] = bad["pi_c"], bad["pi_a"]
    assert not verify(b.key.verification_key, bad, proof.public)


def test_proofs_of_one_witness_are_blinded_independently_and_all_verify(bundled):
    """Zero knowledge: each proof draws its own r and s. Equal proofs mean no blinding; and
    if r = s, pi_a and pi_b of two proofs move together: e(a1 - a2, delta2) would equal
    e(delta1, b1 - b2) (both e(delta1, delta2)^(r1 - r2)), which independent draws never give."""
    b = bundled("winning-post")
    key = b.key
    synth = synthesize(key, b.circuit, b.inputs)
    out = gpu_phase(key, synth, CpuBackend())
    proofs = [finalize(key, synth, out) for _ in range(3)]
    assert all(verify(key.verification_key, p.proof, p.public) for p in proofs)
    assert len({json.dumps(p.proof, sort_keys=True) for p in proofs}) == 3
    c = key.curve
    a = [g1_from_json(c, p.proof["pi_a"], "pi_a") for p in proofs]
    bb = [g2_from_json(c, p.proof["pi_b"], "pi_b") for p in proofs]
    vk = key.verification_key
    for i, j in ((0, 1), (1, 2)):
        assert a[i] != a[j] and bb[i] != bb[j]
        assert GT.pairing(a[i] - a[j], vk.delta2) != GT.pairing(key.delta1, bb[i] - bb[j])


def test_unsatisfied_witness_is_named_before_proving(bundled):
    b = bundled("winning-post")
    witness = b.circuit.calculate_witness(b.inputs).copy()
    witness[b.key.sizes.n_public + 5, 0] ^= 1  # an internal signal off by one bit
    synth = synthesize_from_witness(b.key, witness)
    with pytest.raises(WitnessError, match="does not satisfy constraint"):
        b.circuit.check_satisfied(witness, synth.abc[2])


def test_finalize_refuses_a_proof_that_does_not_verify(bundled):
    """Without the constraint check, a bad witness reaches finalize: self-verification stops it."""
    b = bundled("winning-post")
    witness = b.circuit.calculate_witness(b.inputs).copy()
    witness[b.key.sizes.n_public + 5, 0] ^= 1
    synth = synthesize_from_witness(b.key, witness)
    out = gpu_phase(b.key, synth, CpuBackend())
    with pytest.raises(ProofError, match="self-verification"):
        finalize(b.key, synth, out)


def test_witness_of_wrong_length_is_a_format_error(bundled):
    b = bundled("winning-post")
    witness = np.zeros((b.key.sizes.n_vars - 1, 8), np.uint32)
    with pytest.raises(FormatError, match="expects"):
        synthesize_from_witness(b.key, witness)


def test_key_for_another_circuit_is_refused(bundled):
    small, large = bundled("winning-post"), bundled("window-post")
    with pytest.raises(FormatError, match="is not a key for circuit"):
        small.circuit.check_key(large.key)


def test_bad_inputs_fail_in_witness_generation(bundled):
    b = bundled("winning-post")
    inputs = dict(b.inputs)
    inputs.pop(next(iter(inputs)))
    with pytest.raises(WitnessError):
        synthesize(b.key, b.circuit, inputs)


def test_key_reports_its_resident_size(bundled):
    b = bundled("window-post")
    key: ProvingKey = b.key
    s = key.sizes
    # Every G1 point of A, B1, C, H and G2 point of B2 is held, so the size is at least that many
    # objects; the exact figure is checked against tracemalloc in test_estimates.
    assert key.host_bytes > (2 * s.n_vars + (s.n_vars - s.n_public - 1) + s.domain_size) * 100


def test_each_step_is_reported_as_it_passes(bundled):
    """``cuzk prove`` and the engine's status show these (cuzk.progress): the synthesis steps,
    every MSM as it ends on the CPU pool, then the assembly and the self-verification."""
    from cuzk import progress

    b = bundled("winning-post")
    heard: list[str] = []
    with progress.reporting(heard.append):
        proof, _ = prove_timed(b.key, b.circuit, b.inputs, CpuBackend())
    assert proof.verified
    assert heard[:3] == ["witness", "a/b/c", "constraint check"]
    msms = [h for h in heard if h.startswith("MSM ") and " done, " in h]
    assert sorted(h.split()[1] for h in msms) == ["A", "B1", "B2", "C", "H"]
    assert [h.rsplit(" ", 1)[1] for h in msms] == [f"{i}/5" for i in range(1, 6)]
    assert heard[-2:] == ["assembly", "self-verification"]
