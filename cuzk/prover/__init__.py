"""Groth16 over the circom/snarkjs formats, split into the steps the engine schedules."""

from cuzk.prover.circuit import Circuit
from cuzk.prover.cpu_backend import CpuBackend
from cuzk.prover.estimates import MemoryEstimate, estimate_memory
from cuzk.prover.groth16 import GpuOutput, Proof, Synthesis, finalize, gpu_phase, synthesize
from cuzk.prover.keys import CircuitSizes, ProvingKey
from cuzk.prover.verify import VerificationKey, verify

__all__ = [
    "Circuit",
    "CircuitSizes",
    "CpuBackend",
    "GpuOutput",
    "MemoryEstimate",
    "Proof",
    "ProvingKey",
    "Synthesis",
    "VerificationKey",
    "estimate_memory",
    "finalize",
    "gpu_phase",
    "synthesize",
    "verify",
]
