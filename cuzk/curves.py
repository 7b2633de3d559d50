"""The curves cuzk proves on, looked up the way the circom/snarkjs file headers name them.

The parameters themselves live in :mod:`kernels.curves` (kernels sit below cuzk and import
nothing from it); this module re-exports them for cuzk's own code.
"""

from __future__ import annotations

from kernels.curves import BLS12_381, Curve

__all__ = [
    "BLS12_381",
    "BN128_BASE_PRIME",
    "BN128_SCALAR_PRIME",
    "CURVES",
    "Curve",
    "curve_for_prime",
    "curve_for_scalar_prime",
    "unknown_base_prime",
    "unknown_scalar_prime",
]

CURVES: dict[str, Curve] = {BLS12_381.name: BLS12_381}


def curve_for_prime(q: int) -> Curve:
    """Find a curve by its base-field prime, the way zkey/wtns headers identify it."""
    for curve in CURVES.values():
        if curve.q == q:
            return curve
    raise KeyError(q)


def curve_for_scalar_prime(r: int) -> Curve:
    """Find a curve by its scalar-field prime (r1cs and wtns headers carry r)."""
    for curve in CURVES.values():
        if curve.r == r:
            return curve
    raise KeyError(r)


BN128_SCALAR_PRIME = 0x30644E72E131A029B85045B68181585D2833E84879B9709143E1F593F0000001
"""circom's default ``--prime`` (BN254), which cuzk does not prove on: named in errors only."""


def unknown_scalar_prime(r: int) -> str:
    """What to tell a user whose r1cs / wtns / wasm carries a prime of no supported curve."""
    supported = ", ".join(CURVES)
    if r == BN128_SCALAR_PRIME:
        return (
            f"compiled for bn128 (circom's default prime), but cuzk proves on {supported} only:"
            " compile with --prime bls12381"
        )
    return f"prime {r:#x} is not the scalar field of a supported curve ({supported})"


BN128_BASE_PRIME = 0x30644E72E131A029B85045B68181585D97816A916871CA8D3C208C16D87CFD47
"""bn128's base field (a zkey header carries q): snarkjs's keys for circom's default prime."""


def unknown_base_prime(q: int) -> str:
    """What to tell a user whose zkey carries a base-field prime of no supported curve."""
    supported = ", ".join(CURVES)
    if q == BN128_BASE_PRIME:
        return (
            f"a key for bn128 (circom's and snarkjs's default curve), but cuzk proves on"
            f" {supported} only: compile the circuit with --prime bls12381 and make the key"
            f" from a {supported} powers of tau"
        )
    return f"base field prime {q:#x} is not a supported curve's ({supported})"
