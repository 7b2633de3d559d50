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
from typing import Any, Literal

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.curves import Curve
from cuzk.formats.limbs import limbs_to_ints
from cuzk.formats.r1cs import R1CS
from cuzk.formats.zkey import ZKey, coefficients_from_r1cs
from cuzk.prover.fixed_base import FixedBaseTable
from cuzk.prover.points import g1_to_mont_array, g2_to_mont_array, xy_bytes_to_mont_array

Progress = Callable[[str, int, int], None]
Group = Literal["g1", "g2"]

PARALLEL_MIN_DOMAIN = 1 << 16
"""From this domain on, the point sections run in worker processes (one per core): 2^16 takes
about 15 s in one process, of which starting the workers costs well under one."""
CHUNK = 1 << 12
"""Scalars per task a worker takes (G1: about 0.1 s of work, G2 about 0.3 s)."""


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
    r1cs: R1CS,
    progress: Progress | None = None,
    rng: Callable[[int], int] | None = None,
    workers: int | None = None,
) -> ZKey:
    """A fresh Groth16 key for ``r1cs`` with random toxic waste, as a zkey ready to write.

    The point sections (about nine tenths of the time: a fixed-base multiplication and an
    affine conversion per point) run in ``workers`` processes, by default every core when the
    domain is at least PARALLEL_MIN_DOMAIN; the key is the same whatever the count."""
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
    gamma_inv, delta_inv = pow(gamma, -1, r), pow(delta, -1, r)
    combined = [(beta * u[i] + alpha * v[i] + w[i]) % r for i in range(n_vars)]
    lag2 = lagrange_at(curve, tau, log_n + 1)
    # The point sections, in the order they are reported: name, group, scalars.
    plan: list[tuple[str, Group, list[int]]] = [
        ("IC", "g1", [combined[i] * gamma_inv % r for i in range(n_public + 1)]),
        ("A", "g1", u),
        ("B1", "g1", v),
        ("B2", "g2", v),
        ("C", "g1", [combined[i] * delta_inv % r for i in range(n_public + 1, n_vars)]),
        ("H", "g1", [lag2[2 * i + 1] * delta_inv % r for i in range(domain)]),
    ]
    n_workers = _workers(workers, domain)
    if n_workers > 1:
        points = _sections_in_processes(curve, plan, n_workers, tick)
    else:
        points = {
            name: _section(curve, name, group, g2 if group == "g2" else g1, scalars, tick)
            for name, group, scalars in plan
        }
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
        ic=points["IC"],
        coeffs=coefficients_from_r1cs(r1cs),
        a=points["A"],
        b1=points["B1"],
        b2=points["B2"],
        c=points["C"],
        h=points["H"],
    )


def _workers(workers: int | None, domain: int) -> int:
    """Processes for the point sections: one (this process) below PARALLEL_MIN_DOMAIN, where
    starting workers costs more than it saves; else ``workers``, default every core."""
    if workers is not None:
        return max(1, workers)
    if domain < PARALLEL_MIN_DOMAIN:
        return 1
    from cuzk.prover.cpu_schedule import cores

    return cores()


def _section(
    curve: Curve, name: str, group: Group, table: FixedBaseTable[Any], scalars: list[int],
    tick: Progress,
) -> np.ndarray:
    """One point section in this process: ``generator * k`` for each scalar, as the zkey
    stores it."""
    pts = []
    for i, k in enumerate(scalars):
        pts.append(table.mul(k))
        if i % 4096 == 0:
            tick(name, i, len(scalars))
    tick(name, len(scalars), len(scalars))
    if group == "g2":
        return g2_to_mont_array(curve, pts)
    return g1_to_mont_array(curve, pts)


def _sections_in_processes(
    curve: Curve, plan: list[tuple[str, Group, list[int]]], n_workers: int, tick: Progress
) -> dict[str, np.ndarray]:
    """The same points as ``_section``, computed by ``n_workers`` processes in chunks of
    CHUNK scalars. Every chunk is queued at once, so the workers never wait for this process,
    which joins each section's chunks in order and converts them as ``_section`` does."""
    from cuzk.prover.keygen_workers import Workers

    chunks = [
        (name, min(len(scalars), lo + CHUNK), len(scalars), (group, scalars[lo : lo + CHUNK]))
        for name, group, scalars in plan
        for lo in range(0, max(len(scalars), 1), CHUNK)
    ]
    groups = {name: group for name, group, _ in plan}
    out: dict[str, np.ndarray] = {}
    raw: list[bytes] = []
    with Workers(n_workers) as workers:
        results = workers.run(task for _, _, _, task in chunks)
        for (name, done, total, _), result in zip(chunks, results, strict=True):
            if not raw:
                tick(name, 0, total)
            raw.append(result)
            tick(name, done, total)
            if done == total:
                shape = (2,) if groups[name] == "g1" else (2, 2)
                out[name] = xy_bytes_to_mont_array(curve, b"".join(raw), shape)
                raw = []
    return out
