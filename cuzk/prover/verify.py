"""Groth16 verification (snarkjs's verification_key.json / proof.json / public.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from py_arkworks_bls12381 import GT, G1Point, G2Point

from cuzk.curves import CURVES, Curve
from cuzk.prover.points import g1_from_json, g1_to_json, g2_from_json, g2_to_json, scalar


@dataclass(frozen=True)
class VerificationKey:
    curve: Curve
    alpha1: G1Point
    beta2: G2Point
    gamma2: G2Point
    delta2: G2Point
    ic: tuple[G1Point, ...]

    @property
    def n_public(self) -> int:
        return len(self.ic) - 1

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> VerificationKey:
        """Parse snarkjs's verification_key.json; every point is checked to be in its subgroup."""
        if not isinstance(obj, dict):
            raise ValueError("verification key: expected a JSON object")
        if obj.get("protocol") != "groth16":
            raise ValueError(f"verification key: protocol {obj.get('protocol')!r} is not groth16")
        curve = CURVES.get(str(obj.get("curve")))
        if curve is None:
            raise ValueError(f"verification key: unsupported curve {obj.get('curve')!r}")
        missing = [
            k for k in ("vk_alpha_1", "vk_beta_2", "vk_gamma_2", "vk_delta_2", "IC") if k not in obj
        ]
        if missing:
            raise ValueError(f"verification key: missing {', '.join(missing)}")
        ic = obj["IC"]
        if not isinstance(ic, list) or not ic:
            raise ValueError("verification key: IC must be a non-empty list")
        n_public = obj.get("nPublic", len(ic) - 1)
        if n_public != len(ic) - 1:
            raise ValueError(f"verification key: nPublic {n_public} but {len(ic)} IC points")
        return cls(
            curve=curve,
            alpha1=g1_from_json(curve, obj["vk_alpha_1"], "vk_alpha_1"),
            beta2=g2_from_json(curve, obj["vk_beta_2"], "vk_beta_2"),
            gamma2=g2_from_json(curve, obj["vk_gamma_2"], "vk_gamma_2"),
            delta2=g2_from_json(curve, obj["vk_delta_2"], "vk_delta_2"),
            ic=tuple(g1_from_json(curve, p, f"IC[{i}]") for i, p in enumerate(ic)),
        )

    def to_json(self, alphabeta: bool = True) -> dict[str, Any]:
        """snarkjs's layout, key for key what ``snarkjs zkey export verificationkey`` writes.

        ``vk_alphabeta_12`` (e(alpha, beta), which snarkjs's own verifier does not read but
        Solidity and other verifiers precompute from) costs one pairing; ``alphabeta=False``
        leaves it out.
        """
        c = self.curve
        out = {
            "protocol": "groth16",
            "curve": c.name,
            "nPublic": self.n_public,
            "vk_alpha_1": g1_to_json(c, self.alpha1),
            "vk_beta_2": g2_to_json(c, self.beta2),
            "vk_gamma_2": g2_to_json(c, self.gamma2),
            "vk_delta_2": g2_to_json(c, self.delta2),
        }
        if alphabeta:
            out["vk_alphabeta_12"] = alphabeta_12(c, self.alpha1, self.beta2)
        out["IC"] = [g1_to_json(c, p) for p in self.ic]
        return out


def alphabeta_12(curve: Curve, alpha1: G1Point, beta2: G2Point) -> list[Any]:
    """e(alpha1, beta2) in snarkjs's ``Gt.toObject`` form: [[c0.c0, c0.c1, c0.c2], [c1.c0, ...]],
    each an Fq2 pair of decimal strings, over the tower Fq2[v]/(v^3 - (1+u)), Fq6[w]/(w^2 - v).

    arkworks's pairing is the same reduced pairing snarkjs computes, and its canonical
    serialization of a Gt element (what ``str()`` prints as hex) is the twelve Fq coefficients
    in exactly that tower order, each 48 bytes little-endian; tests/cuzk/prover/test_groth16.py
    checks the result against ``snarkjs zkey export verificationkey``.
    """
    if curve.name != "bls12381":
        raise ValueError(f"vk_alphabeta_12 is implemented for bls12381 only, not {curve.name}")
    if alpha1 == G1Point.identity() or beta2 == G2Point.identity():
        raise ValueError("vk_alphabeta_12: alpha1 or beta2 is the point at infinity")
    raw = bytes.fromhex(str(GT.pairing(alpha1, beta2)))
    if len(raw) != 12 * curve.n8q:
        raise ValueError(f"vk_alphabeta_12: unexpected Gt encoding of {len(raw)} bytes")
    n8 = curve.n8q
    f = [str(int.from_bytes(raw[i : i + n8], "little")) for i in range(0, len(raw), n8)]
    return [[[f[k], f[k + 1]] for k in (i, i + 2, i + 4)] for i in (0, 6)]


def verify(vk: VerificationKey, proof: dict[str, Any], public: list[Any]) -> bool:
    """True iff e(A,B) = e(alpha,beta) e(IC(public),gamma) e(C,delta).

    Malformed input (wrong count, values outside the field, points off the curve) raises
    ValueError with what is wrong, so callers can tell "invalid proof" from "bad file".
    """
    c = vk.curve
    if not isinstance(proof, dict):
        raise ValueError("proof: expected a JSON object")
    if proof.get("protocol", "groth16") != "groth16":
        raise ValueError(f"proof: protocol {proof.get('protocol')!r} is not groth16")
    if proof.get("curve", c.name) != c.name:
        raise ValueError(f"proof: curve {proof.get('curve')!r} does not match the key's {c.name}")
    if not isinstance(public, list) or len(public) != vk.n_public:
        got = len(public) if isinstance(public, list) else type(public).__name__
        raise ValueError(f"public signals: expected {vk.n_public}, got {got}")
    values = []
    for i, s in enumerate(public):
        try:
            v = int(str(s))
        except ValueError as exc:
            raise ValueError(f"public signal {i}: {s!r} is not an integer") from exc
        if not 0 <= v < c.r:
            raise ValueError(f"public signal {i}: {v} is not a field element")
        values.append(v)
    for k in ("pi_a", "pi_b", "pi_c"):
        if k not in proof:
            raise ValueError(f"proof: missing {k}")
    a = g1_from_json(c, proof["pi_a"], "pi_a")
    b = g2_from_json(c, proof["pi_b"], "pi_b")
    cc = g1_from_json(c, proof["pi_c"], "pi_c")
    acc = vk.ic[0]
    if values:
        acc = acc + G1Point.multiexp_unchecked(list(vk.ic[1:]), [scalar(c, v) for v in values])
    return bool(GT.pairing_check([-a, vk.alpha1, acc, cc], [b, vk.beta2, vk.gamma2, vk.delta2]))
