"""The proving engine: scheduler, memory budget, leases, workers, pipeline, key residency.

``Engine`` is the facade (docs/interfaces.md); ``ProverBackend`` the seam to a prover.
"""

from cuzk.engine.backend import KeyHandle, PartitionMemory, ProofResult, ProverBackend
from cuzk.engine.engine import Engine, EngineNotRunning
from cuzk.engine.jobs import Job, Partition
from cuzk.engine.settings import EngineSettings, ProofKindSettings, default_proof_kinds

__all__ = [
    "Engine",
    "EngineNotRunning",
    "EngineSettings",
    "Job",
    "KeyHandle",
    "Partition",
    "PartitionMemory",
    "ProofKindSettings",
    "ProofResult",
    "ProverBackend",
    "default_proof_kinds",
]
