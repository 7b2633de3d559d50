"""The proving engine: scheduler, memory budget, leases, workers, pipeline, key residency.

``Engine`` is the facade (docs/interfaces.md); ``ProverBackend`` the seam to a prover. Names
are imported on first use (``cuzk.lazy_exports``): reading ``[engine]`` settings from a config
file, as ``cuzk prove`` does, must not import the scheduler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cuzk.lazy_exports import lazy_exports

if TYPE_CHECKING:
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

__getattr__ = lazy_exports(
    __name__,
    {
        "KeyHandle": "backend",
        "PartitionMemory": "backend",
        "ProofResult": "backend",
        "ProverBackend": "backend",
        "Engine": "engine",
        "EngineNotRunning": "engine",
        "Job": "jobs",
        "Partition": "jobs",
        "EngineSettings": "settings",
        "ProofKindSettings": "settings",
        "default_proof_kinds": "settings",
    },
)
