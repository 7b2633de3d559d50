"""Prove one partition locally with the three steps, timing each (CLI prove and bench)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuzk.errors import ProofError
from cuzk.prover.backend import ComputeBackend
from cuzk.prover.circuit import Circuit
from cuzk.prover.groth16 import Proof, finalize, gpu_phase, synthesize, synthesize_from_witness
from cuzk.prover.keys import ProvingKey


@dataclass
class StepTimes:
    synthesize_s: float = 0.0
    gpu_phase_s: float = 0.0
    finalize_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.synthesize_s + self.gpu_phase_s + self.finalize_s


def prove_timed(
    key: ProvingKey,
    circuit: Circuit | None,
    inputs: dict[str, Any],
    backend: ComputeBackend,
    verify_proof: bool = True,
    witness: np.ndarray | None = None,
    check_first: bool = True,
    source: str | None = None,
) -> tuple[Proof, StepTimes]:
    """``witness`` (already checked against the circuit's sizes) replaces witness generation.

    ``check_first=False`` (a ready witness only, with the proof's self-check on) proves at once
    and runs the r1cs checks only when the proof fails to verify, to say whose fault it is:
    the key's coefficients, or the constraint the witness breaks. A proof that verifies needs
    neither, and reading the r1cs's terms costs a one-proof process a third of its time.

    ``circuit`` None (a zkey and a witness alone, as rapidsnark proves): the key's A and B
    coefficients are all a proof needs; a proof that fails its self-check is then said to be
    the witness's or the key's fault without naming which (``source`` names the witness).
    """
    if circuit is None and witness is None:
        raise ValueError("a circuit (its wasm) or a ready witness is needed")
    deferred = witness is not None and not check_first and verify_proof
    times = StepTimes()
    t0 = time.perf_counter()
    source = source or f"witness of {circuit.name if circuit else 'the circuit'}"
    if witness is None:
        assert circuit is not None
        synth = synthesize(key, circuit, inputs)
    else:
        synth = synthesize_from_witness(key, witness, source=source)
        if not deferred and circuit is not None:
            circuit.check_satisfied(witness, synth.abc[2])
    t1 = time.perf_counter()
    out = gpu_phase(key, synth, backend)
    synth.release_abc()
    t2 = time.perf_counter()
    try:
        proof = finalize(key, synth, out, verify_proof=verify_proof)
    except ProofError:
        if deferred and circuit is not None:
            assert witness is not None
            explain_failed_proof(key, circuit, witness)
        if circuit is None:
            raise ProofError(
                f"the proof fails self-verification: {source} does not satisfy the circuit"
                f" {key.path} was made for, or the key is corrupt (give --r1cs CIRCUIT.r1cs to"
                " name the constraint or the key section at fault)"
            ) from None
        raise
    t3 = time.perf_counter()
    times.synthesize_s, times.gpu_phase_s, times.finalize_s = t1 - t0, t2 - t1, t3 - t2
    return proof, times


def explain_failed_proof(key: ProvingKey, circuit: Circuit, witness: np.ndarray) -> None:
    """Raise the error that names why a proof from ``witness`` failed to verify, when the r1cs
    can tell: the key's coefficients disagree with it (FormatError), or a constraint does not
    hold (WitnessError). Returns when neither is found."""
    circuit.check_key_coefficients(key)
    synth = synthesize_from_witness(key, witness, source=f"witness of {circuit.name}")
    circuit.check_satisfied(witness, synth.abc[2])
