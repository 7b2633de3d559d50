"""The three proving steps the engine schedules separately.

snarkjs's groth16 prover, split where the hardware changes:

1. ``synthesize`` (CPU): witness from the circuit's wasm, then a/b/c evaluations on the domain
   from the zkey's coefficient section (c = a*b pointwise, as snarkjs does).
2. ``gpu_phase`` (the device): H = a*b - c on the odd coset, and the G1 MSMs A, B1, C, H.
3. ``finalize`` (CPU): the G2 MSM for B, blinding with random r and s, assembly into snarkjs's
   proof.json / public.json, and an optional pairing self-check so no invalid proof leaves.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk import progress
from cuzk.errors import FormatError, ProofError, WitnessError
from cuzk.prover import qap
from cuzk.prover.backend import ComputeBackend, DevicePhase
from cuzk.prover.cpu_backend import CpuBackend
from cuzk.prover.cpu_schedule import cores
from cuzk.prover.points import g1_to_json, g2_to_json, scalar
from cuzk.prover.verify import verify

if TYPE_CHECKING:
    from cuzk.prover.circuit import Circuit
    from cuzk.prover.keys import ProvingKey


@dataclass
class Synthesis:
    """Output of step 1. a/b/c are dropped after the GPU phase (``release_abc``)."""

    witness: np.ndarray  # (n_vars, 8) uint32, normal form
    a: np.ndarray | None
    b: np.ndarray | None
    c: np.ndarray | None
    public_signals: list[str]

    def release_abc(self) -> None:
        self.a = self.b = self.c = None

    @property
    def abc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.a is None or self.b is None or self.c is None:
            raise RuntimeError("a/b/c were already released")
        return self.a, self.b, self.c


@dataclass
class GpuOutput:
    """Output of step 2: the G1 MSM results (unblinded), and B2 when the backend computed it
    (CUDA on the device; the CPU backend when it scheduled it with the others), else finalize
    computes it on every core."""

    a: G1Point
    b1: G1Point
    c: G1Point
    h: G1Point
    b2: G2Point | None = None
    # Milliseconds of each device step ("H", "MSM A", ... "MSM B2") when the backend ran the
    # phase on a device; the engine puts them on the partition's GPU span.
    steps_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class Proof:
    proof: dict[str, Any]
    public: list[str]
    verified: bool = field(default=False)


def _public_signals(witness: np.ndarray, n_public: int) -> list[str]:
    rows = witness[1 : n_public + 1]
    return [str(int.from_bytes(row.tobytes(), "little")) for row in rows]


def synthesize_from_witness(
    key: ProvingKey, witness: np.ndarray, source: str = "witness"
) -> Synthesis:
    """Step 1 from a ready witness (a .wtns, or the output of a witness generator)."""
    n_vars = key.sizes.n_vars
    if witness.ndim != 2 or witness.shape != (n_vars, key.curve.fr_limbs):
        raise FormatError(
            source, f"has {witness.shape[0]} signals, the proving key expects {n_vars}"
        )
    if int.from_bytes(witness[0].tobytes(), "little") != 1:
        raise WitnessError(f"{source}: signal 0 must be 1")
    try:
        a, b, c = qap.build_abc(
            key.coef_matrix,
            key.coef_constraint,
            key.coef_signal,
            key.coef_value,
            witness,
            key.sizes.domain_size,
        )
    except ValueError as e:  # out-of-range index or unreduced value: a corrupt key or witness
        raise FormatError(f"{key.path} / {source}", str(e)) from None
    return Synthesis(
        witness=witness, a=a, b=b, c=c, public_signals=_public_signals(witness, key.sizes.n_public)
    )


def synthesize(
    key: ProvingKey, circuit: Circuit, inputs: dict[str, Any], check: bool = True
) -> Synthesis:
    """Step 1: witness generation, then a/b/c. ``check`` tests every constraint (a*b == c)."""
    progress.step("witness")
    witness = circuit.calculate_witness(inputs)
    progress.step("a/b/c")
    synth = synthesize_from_witness(key, witness, source=f"witness of {circuit.name}")
    if check:
        progress.step("constraint check")
        circuit.check_satisfied(witness, synth.abc[2])
    return synth


def gpu_phase(key: ProvingKey, synth: Synthesis, backend: ComputeBackend) -> GpuOutput:
    """Step 2: H and the G1 MSMs. Reads a/b/c; the caller releases them afterwards."""
    a, b, c = synth.abc
    if isinstance(backend, DevicePhase):  # CUDA: witness and H stay on the device
        progress.step("H and five MSMs on the device")
        ga, gb1, gc, gh, gb2 = backend.device_gpu_phase(key, a, b, c, synth.witness)
        return GpuOutput(a=ga, b1=gb1, c=gc, h=gh, b2=gb2, steps_ms=backend.phase_steps_ms())
    if isinstance(backend, CpuBackend) and backend.scheduled():  # all five MSMs on one pool
        r = backend.all_msms(key, a, b, c, synth.witness)
        return GpuOutput(a=r["A"], b1=r["B1"], c=r["C"], h=r["H"], b2=r["B2"])
    progress.step("H")
    h = backend.h_evaluations(key, a, b, c)
    w = synth.witness
    sums = {}
    for name, scalars in (("A", w), ("B1", w), ("C", w[key.sizes.n_public + 1 :]), ("H", h)):
        progress.step(f"MSM {name}")
        sums[name] = backend.msm_g1(key, name, scalars)
    return GpuOutput(a=sums["A"], b1=sums["B1"], c=sums["C"], h=sums["H"])


def finalize(
    key: ProvingKey,
    synth: Synthesis,
    out: GpuOutput,
    verify_proof: bool = True,
) -> Proof:
    """Step 3: B in G2, blinding (r, s), assembly; never returns a proof that fails to verify.

    r and s are drawn independently and uniformly for every proof: that is what makes a
    Groth16 proof zero-knowledge (and two proofs of one witness differ)."""
    curve = key.curve
    # Never one thread: the native MSM splits B2 over every core (a device phase brings it).
    if out.b2 is None:
        progress.step("MSM B2")
    b2 = out.b2 if out.b2 is not None else key.msm_b2(synth.witness, threads=cores())
    progress.step("assembly")
    r_val, s_val = secrets.randbelow(curve.r), secrets.randbelow(curve.r)
    r, s = scalar(curve, r_val), scalar(curve, s_val)
    pi_a = out.a + key.alpha1 + key.delta1 * r
    pi_b = b2 + key.beta2 + key.delta2 * s
    pib1 = out.b1 + key.beta1 + key.delta1 * s
    pi_c = out.c + out.h + pi_a * s + pib1 * r - key.delta1 * scalar(curve, r_val * s_val)
    proof = {
        "pi_a": g1_to_json(curve, pi_a),
        "pi_b": g2_to_json(curve, pi_b),
        "pi_c": g1_to_json(curve, pi_c),
        "protocol": "groth16",
        "curve": curve.name,
    }
    result = Proof(proof=proof, public=list(synth.public_signals))
    if verify_proof:
        progress.step("self-verification")
        if not verify(key.verification_key, proof, result.public):
            raise ProofError(
                "proof failed self-verification: the witness does not satisfy the circuit "
                "or the proving key does not match it"
            )
        result.verified = True
    return result
