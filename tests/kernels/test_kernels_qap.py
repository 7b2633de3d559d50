"""build_abc / h_evaluations (kernels/qap.py) against big-int transcriptions of snarkjs's
buildABC1 and joinABC."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk.curves import BLS12_381
from kernels import qap
from kernels.field import FR

r = BLS12_381.r
R = 1 << 256
RINV = pow(R, -1, r)


def random_system(seed: int, n_constraints: int, n_vars: int, n_coefs: int):
    rng = random.Random(seed)
    matrix = [rng.randrange(2) for _ in range(n_coefs)]
    constraint = [rng.randrange(n_constraints) for _ in range(n_coefs)]
    signal = [rng.randrange(n_vars) for _ in range(n_coefs)]
    plain = [rng.choice([1, r - 1, 2, rng.randrange(r)]) for _ in range(n_coefs)]
    witness = [1] + [rng.choice([0, 1, r - 1, rng.randrange(r)]) for _ in range(n_vars - 1)]
    return matrix, constraint, signal, plain, witness


def reference_abc(matrix, constraint, signal, plain, witness, domain_size):
    """buildABC1 in normal form: a[c] += coef * w[s] for matrix 0, b likewise; c = a*b."""
    a = [0] * domain_size
    b = [0] * domain_size
    for m, c, s, v in zip(matrix, constraint, signal, plain, strict=True):
        target = a if m == 0 else b
        target[c] = (target[c] + v * witness[s]) % r
    return a, b, [x * y % r for x, y in zip(a, b, strict=True)]


def as_arrays(matrix, constraint, signal, plain, witness):
    values = FR.from_ints([v * R * R % r for v in plain])   # the zkey stores coef * R^2
    ints = (np.array(x, np.uint32) for x in (matrix, constraint, signal))
    return (*ints, values, FR.from_ints(witness))


def unmont(arr: np.ndarray) -> list[int]:
    return [x * RINV % r for x in FR.to_ints(arr)]


@pytest.mark.parametrize(("log_n", "threads"), [(3, 1), (5, 2), (13, 2)])
def test_build_abc_matches_reference(log_n: int, threads: int) -> None:
    n = 1 << log_n
    system = random_system(log_n, n - 1, 40, 6 * n)
    ref_a, ref_b, ref_c = reference_abc(*system, n)
    a, b, c = qap.build_abc(*as_arrays(*system), n, threads=threads)
    assert a.shape == b.shape == c.shape == (n, 8)
    assert unmont(a) == ref_a and unmont(b) == ref_b and unmont(c) == ref_c
    # Montgomery buffers are fully reduced, like snarkjs's
    assert FR.to_ints(a) == [x * R % r for x in ref_a]


def test_h_evaluations_matches_reference() -> None:
    log_n = 4
    n = 1 << log_n
    system = random_system(7, n - 2, 12, 5 * n)
    ref_a, ref_b, ref_c = reference_abc(*system, n)
    a, b, c = qap.build_abc(*as_arrays(*system), n)
    h = qap.h_evaluations(a, b, c, log_n)
    w = BLS12_381.root_of_unity(log_n)
    inc = BLS12_381.root_of_unity(log_n + 1)
    n_inv = pow(n, -1, r)

    def odd(evals: list[int]) -> list[int]:
        coeffs = [sum(e * pow(w, -i * j, r) for j, e in enumerate(evals)) * n_inv % r
                  for i in range(n)]
        return [sum(cf * pow(inc * pow(w, i, r), j, r) for j, cf in enumerate(coeffs)) % r
                for i in range(n)]

    pa, pb, pc = odd(ref_a), odd(ref_b), odd(ref_c)
    assert FR.to_ints(h) == [(x * y - z) % r for x, y, z in zip(pa, pb, pc, strict=True)]


def test_h_evaluations_do_not_depend_on_threads() -> None:
    log_n = 12
    n = 1 << log_n
    system = random_system(3, n, 50, 4 * n)
    a, b, c = qap.build_abc(*as_arrays(*system), n)
    h1 = qap.h_evaluations(a, b, c, log_n, threads=1)
    h2 = qap.h_evaluations(a, b, c, log_n, threads=2)
    assert np.array_equal(h1, h2)
    assert FR.first_unreduced(h1) == -1


def test_build_abc_rejects_corrupt_input() -> None:
    system = random_system(1, 7, 5, 20)
    matrix, constraint, signal, values, witness = as_arrays(*system)
    bad = matrix.copy()
    bad[3] = 2
    with pytest.raises(ValueError, match="matrix"):
        qap.build_abc(bad, constraint, signal, values, witness, 8)
    bad = constraint.copy()
    bad[4] = 8
    with pytest.raises(ValueError, match="constraint"):
        qap.build_abc(matrix, bad, signal, values, witness, 8)
    bad = signal.copy()
    bad[5] = 5
    with pytest.raises(ValueError, match="signal"):
        qap.build_abc(matrix, constraint, bad, values, witness, 8)
    bad = values.copy()
    bad[6] = 0xFFFFFFFF
    with pytest.raises(ValueError, match="not reduced"):
        qap.build_abc(matrix, constraint, signal, bad, witness, 8)
    bad = witness.copy()
    bad[2] = 0xFFFFFFFF
    with pytest.raises(ValueError, match="witness"):
        qap.build_abc(matrix, constraint, signal, values, bad, 8)
    with pytest.raises(ValueError):
        qap.h_evaluations(values[:8], values[:8], values[:8], 4)
