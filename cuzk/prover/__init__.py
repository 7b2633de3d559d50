"""Groth16 over the circom/snarkjs formats, split into the steps the engine schedules.

Names are resolved on first use (``cuzk.lazy_exports``), so importing one submodule
(``cuzk.prover.keys`` for ``cuzk prove``) does not import them all: the numba kernels and the
wasm runtime cost a second of start-up that a one-proof process should not pay for nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cuzk.lazy_exports import lazy_exports

# Imported now, not lazily: the function ``verify`` shares its name with its module, which the
# import system would otherwise leave under that name once anything imports the module.
from cuzk.prover.verify import VerificationKey, verify

if TYPE_CHECKING:
    from cuzk.prover.circuit import Circuit
    from cuzk.prover.cpu_backend import CpuBackend
    from cuzk.prover.estimates import MemoryEstimate, estimate_memory
    from cuzk.prover.groth16 import (
        GpuOutput,
        Proof,
        Synthesis,
        finalize,
        gpu_phase,
        synthesize,
    )
    from cuzk.prover.key_layout import CircuitSizes
    from cuzk.prover.keys import ProvingKey

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

__getattr__ = lazy_exports(
    __name__,
    {
        "Circuit": "circuit",
        "CpuBackend": "cpu_backend",
        "MemoryEstimate": "estimates",
        "estimate_memory": "estimates",
        "GpuOutput": "groth16",
        "Proof": "groth16",
        "Synthesis": "groth16",
        "finalize": "groth16",
        "gpu_phase": "groth16",
        "synthesize": "groth16",
        "CircuitSizes": "keys",
        "ProvingKey": "keys",
    },
)
