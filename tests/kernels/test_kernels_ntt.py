"""NTT (kernels/ntt.py) against a naive big-int DFT with ffjavascript's roots, and against
ffjavascript itself when node is available."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cuzk.curves import BLS12_381
from kernels import ntt
from kernels.field import FR
from tests._tools import require_node_modules

r = BLS12_381.r
R = 1 << 256
RINV = pow(R, -1, r)


def mont(xs: list[int]) -> np.ndarray:
    return FR.from_ints([x * R % r for x in xs])


def unmont(a: np.ndarray) -> list[int]:
    return [x * RINV % r for x in FR.to_ints(a)]


def naive_dft(xs: list[int], w: int) -> list[int]:
    n = len(xs)
    return [sum(x * pow(w, i * j, r) for j, x in enumerate(xs)) % r for i in range(n)]


def rand_vals(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    edge = [0, 1, r - 1, r - 2]
    return [edge[i] if i < len(edge) and n >= 8 else rng.randrange(r) for i in range(n)]


def test_roots_are_ffjavascripts() -> None:
    # ffjavascript: nqr = smallest non-residue (5 for BLS12-381 Fr), w[s] = nqr^t, squared down
    assert BLS12_381.nqr == 5 and BLS12_381.two_adicity == 32
    for k in (1, 5, 24):
        w = BLS12_381.root_of_unity(k)
        assert pow(w, 1 << k, r) == 1 and pow(w, 1 << (k - 1), r) == r - 1


@pytest.mark.parametrize("log_n", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_fft_matches_naive_dft(log_n: int, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # force the multi-threaded decomposition at small sizes so its indexing is checked too
    monkeypatch.setattr(ntt, "_MIN_PARALLEL_LOG", 1)
    n = 1 << log_n
    xs = rand_vals(n, log_n)
    w = BLS12_381.root_of_unity(log_n)
    evals = naive_dft(xs, w)
    assert unmont(ntt.fft(mont(xs), threads=threads)) == evals
    assert unmont(ntt.ifft(mont(evals), threads=threads)) == xs
    # odd coset: evaluate the interpolating polynomial at inc * w^i, inc = w_2n
    inc = BLS12_381.root_of_unity(log_n + 1)
    coeffs = [c * pow(n, -1, r) % r for c in naive_dft(xs, pow(w, -1, r))]
    points = [inc * pow(w, i, r) % r for i in range(n)]
    odd = [sum(c * pow(x, j, r) for j, c in enumerate(coeffs)) % r for x in points]
    assert unmont(ntt.odd_coset_evaluations(mont(xs), threads=threads)) == odd
    assert unmont(ntt.coset_coefficients(mont(xs), threads=threads)) == [
        c * pow(inc, j, r) % r for j, c in enumerate(coeffs)
    ]


@pytest.mark.parametrize("log_n", [7, 12, 13, 15])
def test_inverse_roundtrip_and_thread_independence(log_n: int) -> None:
    rng = np.random.default_rng(log_n)
    n = 1 << log_n
    x = FR.from_ints([int(v) % r for v in rng.integers(0, 2**63, size=n)])
    x[: n // 2, 7] = rng.integers(0, 0x73EDA753, size=n // 2, dtype=np.uint32)  # full-width values
    f1 = ntt.fft(x, threads=1)
    assert np.array_equal(ntt.ifft(f1, threads=1), x)
    assert np.array_equal(ntt.fft(x, threads=2), f1)
    assert np.array_equal(ntt.ifft(f1, threads=2), x)
    assert np.array_equal(ntt.odd_coset_evaluations(x, threads=2),
                          ntt.odd_coset_evaluations(x, threads=1))
    assert FR.first_unreduced(f1) == -1


def test_linearity_at_16() -> None:
    rng = np.random.default_rng(16)
    n = 1 << 16
    x = FR.to_mont(FR.from_ints([int(v) for v in rng.integers(0, 2**62, size=n)]))
    y = ntt.fft(x)
    assert np.array_equal(ntt.fft(FR.add(x, x)), FR.add(y, y))
    assert np.array_equal(ntt.ifft(y), x)


def test_bad_sizes() -> None:
    with pytest.raises(ValueError):
        ntt.fft(np.zeros((12, 8), np.uint32))
    with pytest.raises(ValueError):
        ntt.fft(np.zeros((1, 8), np.uint32))
    with pytest.raises(ValueError):
        ntt.fft(np.zeros((8, 12), np.uint32))


NODE_SCRIPT = Path(__file__).with_name("snarkjs_fft.mjs")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
@pytest.mark.parametrize("log_n", [3, 10])
def test_equals_ffjavascript(log_n: int) -> None:
    """Bit-for-bit equality with the library snarkjs's prover calls (Fr.fft, Fr.ifft, odd coset)."""
    require_node_modules("ffjavascript")
    xs = rand_vals(1 << log_n, 100 + log_n)
    request = json.dumps({"values": [str(v) for v in xs]})
    proc = subprocess.run(["node", str(NODE_SCRIPT)], input=request, capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=True)
    ref = json.loads(proc.stdout)
    a = mont(xs)
    assert unmont(ntt.fft(a)) == [int(v) for v in ref["fft"]]
    assert unmont(ntt.ifft(a)) == [int(v) for v in ref["ifft"]]
    assert unmont(ntt.odd_coset_evaluations(a)) == [int(v) for v in ref["odd"]]


def test_concurrent_callers_get_their_own_results() -> None:
    """The engine calls the NTT from several worker threads at once (kernels are nogil)."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    n = 1 << 12
    inputs = [FR.from_ints([int(v) for v in rng.integers(0, 2**62, size=n)]) for _ in range(4)]
    expected = [ntt.odd_coset_evaluations(x, threads=1) for x in inputs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda x: ntt.odd_coset_evaluations(x, threads=2), inputs))
    assert all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))
