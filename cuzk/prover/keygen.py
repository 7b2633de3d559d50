"""Circuit-specific Groth16 setup for development and tests.

This is a single-party setup: tau, alpha, beta, gamma and delta are drawn at random and
discarded ("toxic waste"). Anyone who kept them could forge proofs, so keys made here are for
development and tests only; production keys come from a multi-party ceremony (snarkjs
powers of tau + phase 2). The output is a zkey in snarkjs's format, laid out exactly as
``snarkjs zkey new`` would (H over the odd points of the 2n domain, coefficient values times R^2),
so snarkjs can read it, export its verification key and prove with it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.curves import Curve
from cuzk.formats.limbs import limbs_to_ints
from cuzk.formats.r1cs import R1CS
from cuzk.formats.zkey import ZKey, coefficients_from_r1cs
from cuzk.prover.fixed_base import FixedBaseTable
from cuzk.prover.points import g1_to_mont_array, g2_to_mont_array

Progress = Callable[[str, int, int], None]


def domain_size_for(n_constraints: int, n_public: int) -> int:
    """snarkjs: the smallest power of two strictly above nConstraints + nPublic."""
    total = n_constraints + n_public
    return 1 << total.bit_length()


def _batch_inverse(values: list[int], p: int) -> list[int]:
    prefix = [1] * (len(values) + 1)
    for i, v in enumerate(values):
        prefix[i + 1] = prefix[i] * v % p
    inv = pow(prefix[-1], -1, p)
    out = [0] * len(values)
    for i in range(len(values) - 1, -1, -1):
        out[i] = inv * prefix[i] % p
        inv = inv * values[i] % p
    return out


def lagrange_at(curve: Curve, tau: int, log_n: int) -> list[int]:
    """L_j(tau) for the 2^log_n domain: (tau^n - 1)/n * w^j / (tau - w^j)."""
    r, n = curve.r, 1 << log_n
    w = curve.root_of_unity(log_n)
    powers = [1] * n
    for j in range(1, n):
        powers[j] = powers[j - 1] * w % r
    z_over_n = (pow(tau, n, r) - 1) * pow(n, -1, r) % r
    inv = _batch_inverse([(tau - wj) % r for wj in powers], r)
    return [z_over_n * wj % r * iv % r for wj, iv in zip(powers, inv, strict=True)]


def setup(
    r1cs: R1CS, progress: Progress | None = None, rng: Callable[[int], int] | None = None
) -> ZKey:
    """A fresh Groth16 key for ``r1cs`` with random toxic waste, as a zkey ready to write."""
    curve = r1cs.curve
    cons = r1cs.constraints
    if cons is None:
        raise ValueError("r1cs was read without constraints")
    r = curve.r
    draw = rng or (lambda bound: secrets.randbelow(bound - 1) + 1)
    tau, alpha, beta, gamma, delta = (draw(r) for _ in range(5))
    n_vars, n_public, n_constraints = r1cs.n_wires, r1cs.n_public, r1cs.n_constraints
    domain = domain_size_for(n_constraints, n_public)
    log_n = domain.bit_length() - 1
    if log_n + 1 > curve.two_adicity:
        raise ValueError(f"circuit too large for {curve.name}: domain 2^{log_n}")
    tick = progress or (lambda _stage, _done, _total: None)

    lag = lagrange_at(curve, tau, log_n)
    u, v, w = [0] * n_vars, [0] * n_vars, [0] * n_vars
    acc = (u, v, w)
    values = limbs_to_ints(cons.value)
    for m, j, s, coef in zip(
        cons.matrix.tolist(), cons.constraint.tolist(), cons.signal.tolist(), values, strict=True
    ):
        acc[m][s] = (acc[m][s] + coef * lag[j]) % r
    for s in range(n_public + 1):  # snarkjs's extra rows binding each public input into A
        u[s] = (u[s] + lag[n_constraints + s]) % r

    g1, g2 = FixedBaseTable(G1Point()), FixedBaseTable(G2Point())

    def section(name: str, table: FixedBaseTable, scalars: list[int]) -> list:
        pts = []
        for i, k in enumerate(scalars):
            pts.append(table.mul(k))
            if i % 4096 == 0:
                tick(name, i, len(scalars))
        tick(name, len(scalars), len(scalars))
        return pts

    def g1_section(name: str, scalars: list[int]) -> np.ndarray:
        return g1_to_mont_array(curve, section(name, g1, scalars))

    def g2_section(name: str, scalars: list[int]) -> np.ndarray:
        return g2_to_mont_array(curve, section(name, g2, scalars))

    gamma_inv, delta_inv = pow(gamma, -1, r), pow(delta, -1, r)
    combined = [(beta * u[i] + alpha * v[i] + w[i]) % r for i in range(n_vars)]
    lag2 = lagrange_at(curve, tau, log_n + 1)
    return ZKey(
        curve=curve,
        n_vars=n_vars,
        n_public=n_public,
        domain_size=domain,
        alpha1=g1_to_mont_array(curve, [g1.mul(alpha)])[0],
        beta1=g1_to_mont_array(curve, [g1.mul(beta)])[0],
        beta2=g2_to_mont_array(curve, [g2.mul(beta)])[0],
        gamma2=g2_to_mont_array(curve, [g2.mul(gamma)])[0],
        delta1=g1_to_mont_array(curve, [g1.mul(delta)])[0],
        delta2=g2_to_mont_array(curve, [g2.mul(delta)])[0],
        ic=g1_section("IC", [combined[i] * gamma_inv % r for i in range(n_public + 1)]),
        coeffs=coefficients_from_r1cs(r1cs),
        a=g1_section("A", u),
        b1=g1_section("B1", v),
        b2=g2_section("B2", v),
        c=g1_section("C", [combined[i] * delta_inv % r for i in range(n_public + 1, n_vars)]),
        h=g1_section("H", [lag2[2 * i + 1] * delta_inv % r for i in range(domain)]),
    )
