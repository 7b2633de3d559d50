"""Prove one partition locally with the three steps, timing each (CLI prove and bench)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
    circuit: Circuit,
    inputs: dict[str, Any],
    backend: ComputeBackend,
    verify_proof: bool = True,
    witness: np.ndarray | None = None,
) -> tuple[Proof, StepTimes]:
    """``witness`` (already checked against the circuit) replaces witness generation."""
    times = StepTimes()
    t0 = time.perf_counter()
    if witness is None:
        synth = synthesize(key, circuit, inputs)
    else:
        synth = synthesize_from_witness(key, witness, source=f"witness of {circuit.name}")
        circuit.check_satisfied(witness, synth.abc[2])
    t1 = time.perf_counter()
    out = gpu_phase(key, synth, backend)
    synth.release_abc()
    t2 = time.perf_counter()
    proof = finalize(key, synth, out, verify_proof=verify_proof)
    t3 = time.perf_counter()
    times.synthesize_s, times.gpu_phase_s, times.finalize_s = t1 - t0, t2 - t1, t3 - t2
    return proof, times
