"""The circuits shipped with cuzk, one per Filecoin-shaped proof kind.

Each is a Poseidon Merkle-inclusion circuit (``data/common/merkle_inclusion.circom``) whose
parameters set its size; the compiled ``circuit.r1cs`` / ``circuit.wasm`` and a satisfying
``input.json`` are committed under ``data/<proof-kind>/`` and rebuilt by
``scripts/build_circuits.sh``. They are structural stand-ins, not Filecoin's circuits: see
``README.md`` in this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class CircuitParams:
    """MerkleInclusion(n_trees, n_challenges, depth): n_trees public roots, each with
    n_challenges public leaf indices proven by Merkle paths of the given depth."""

    n_trees: int
    n_challenges: int
    depth: int


@dataclass(frozen=True)
class BundledCircuit:
    proof_kind: str
    r1cs_path: Path
    wasm_path: Path
    sample_input_path: Path
    partitions: int
    priority: str
    description: str
    params: CircuitParams
    deadline_s: float | None = None
    on_deadline_miss: str = "continue"
    deadline_admission: str = "accept"

    @property
    def directory(self) -> Path:
        return self.r1cs_path.parent

    @property
    def circom_path(self) -> Path:
        return self.directory / "circuit.circom"

    @property
    def inputs_schema_path(self) -> Path:
        """``circuit.inputs.json``: input signal names, so the witness runner can name them."""
        return self.directory / "circuit.inputs.json"


# The bundled proof kinds and their defaults, written only here (the engine's default_proof_kinds
# and the config's [proof_kinds] defaults read them): proof kind -> (partitions per job,
# default priority, circuit parameters, description); ordered smallest circuit first.
_KINDS: dict[str, tuple[int, str, CircuitParams, str]] = {
    "winning-post": (
        1,
        "critical",
        CircuitParams(1, 1, 7),
        "WinningPoSt stand-in: one challenged leaf of one sector tree (depth 7); domain 2^12.",
    ),
    "snap-update": (
        16,
        "normal",
        CircuitParams(2, 1, 7),
        "SnapDeals replica-update stand-in: a leaf in the old and in the new replica tree "
        "(two public roots, depth 7); domain 2^13.",
    ),
    "window-post": (
        1,
        "high",
        CircuitParams(4, 1, 6),
        "WindowPoSt stand-in: one challenged leaf in each of four sector trees (depth 6); "
        "domain 2^14.",
    ),
    "porep-c2": (
        10,
        "normal",
        CircuitParams(1, 5, 9),
        "PoRep C2 stand-in: five challenged leaves of one replica tree (depth 9); domain 2^15.",
    ),
}


# Deadline defaults of the bundled kinds: proof kind -> (relative deadline in seconds or None,
# on_deadline_miss, deadline_admission). WinningPoSt must be ready about 20 s into its 30 s epoch
# (a late block is worthless: reject what cannot make it, cancel what missed); a WindowPoSt
# partition has about 40 min from challenge to the window's close (accept and try until it
# closes, then drop it so it cannot block the next deadline). PoRep C2 and SnapDeals are the
# throughput and have no deadline.
_DEADLINES: dict[str, tuple[float | None, str, str]] = {
    "winning-post": (20.0, "cancel", "reject"),
    "window-post": (1800.0, "cancel", "accept"),
    "snap-update": (None, "continue", "accept"),
    "porep-c2": (None, "continue", "accept"),
}


def bundled_circuits(data_dir: Path | None = None) -> dict[str, BundledCircuit]:
    """All bundled circuits by proof kind (smallest first); ``data_dir`` replaces ``DATA_DIR``."""
    out = {}
    for kind, (partitions, priority, params, description) in _KINDS.items():
        d = (data_dir or DATA_DIR) / kind
        out[kind] = BundledCircuit(
            proof_kind=kind,
            r1cs_path=d / "circuit.r1cs",
            wasm_path=d / "circuit.wasm",
            sample_input_path=d / "input.json",
            partitions=partitions,
            priority=priority,
            description=description,
            params=params,
            deadline_s=_DEADLINES[kind][0],
            on_deadline_miss=_DEADLINES[kind][1],
            deadline_admission=_DEADLINES[kind][2],
        )
    return out
