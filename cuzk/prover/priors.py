"""Phase durations of a kind before it is proven here: its key's sizes at this machine's rates.

The engine admits a kind's first job on a prediction (issue 27), so the prover offers a prior
(``ProverBackend.phase_prior``). The rates are measured, never written down: once per process
a short calibration (about a second) runs the CPU kernels a proof runs, at a small size, on
this machine and its current load:

- ``build_abc`` over a sparse system (A, B, C on the domain; synthesis runs it and the
  constraint check, so twice);
- ``h_evaluations`` (the odd-coset NTTs and the H join), per ``n log n``;
- the native G1 and G2 MSMs, per unit of the window cost model the C code picks its window
  width with (``windows * (points + 2.8 * 2^(c-1))``), so a large MSM is not priced as many
  small ones;
- one Groth16 pairing check (the self-verification of finalize).

What the calibration cannot see: the witness generator (a circuit's own wasm) and memory
waits, so a prior is optimistic for witness-heavy circuits; the engine replaces it with the
kind's measured phases from its first partition on. On a CUDA device the GPU phase runs
device kernels this calibration does not measure: no prior there (None).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from cuzk.prover.cpu_schedule import cores
from cuzk.prover.key_layout import CircuitSizes

CAL_LOG_N = 12
"""The NTT and build_abc calibration's domain (2^12)."""
CAL_G1_POINTS = 1024
CAL_G2_POINTS = 256


@dataclass(frozen=True)
class Rates:
    """Seconds per unit of each kernel, measured here (see the module docstring)."""

    abc_per_coefficient: float
    ntt_per_nlogn: float
    g1_per_unit: float
    g2_per_unit: float
    verify_s: float
    threads: int
    calibration_s: float


def msm_cost(points: int, threads: int) -> float:
    """The C code's cost model of one MSM at the window width it picks (``estimates``)."""
    from cuzk.prover.estimates import _window

    if points <= 0:
        return 0.0
    c = _window(points, threads)
    windows = -(-256 // c)
    rounds = -(-windows // threads)
    return float(rounds * (points + 2.8 * (1 << (c - 1))))


def _best(fn: object, repeats: int = 3) -> float:
    """The fastest of ``repeats`` timed runs (a busy machine's noise only ever adds)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best


def calibrate(threads: int | None = None) -> Rates:
    """Time the CPU kernels once at a small size (about a second on a loaded 2-core host)."""
    from py_arkworks_bls12381 import GT, G1Point, G2Point

    from cuzk.curves import BLS12_381
    from cuzk.prover import native_msm, qap
    from cuzk.prover.points import g1_to_mont_array, g2_to_mont_array

    t_start = time.perf_counter()
    threads = threads or cores()
    rng = np.random.default_rng(0)
    n = 1 << CAL_LOG_N
    m = 3 * n  # coefficients: about three per row, as circom circuits have
    witness = np.zeros((n, 8), np.uint32)
    witness[:, 0] = rng.integers(1, 2**31, n, dtype=np.uint32)
    values = np.zeros((m, 8), np.uint32)
    values[:, 0] = rng.integers(1, 2**31, m, dtype=np.uint32)
    matrix = rng.integers(0, 2, m).astype(np.uint32)
    constraint = rng.integers(0, n - 1, m).astype(np.uint32)
    signal = rng.integers(0, n, m).astype(np.uint32)
    abc_s = _best(lambda: qap.build_abc(matrix, constraint, signal, values, witness, n))
    a, b, c = qap.build_abc(matrix, constraint, signal, values, witness, n)
    ntt_s = _best(lambda: qap.h_evaluations(a, b, c, CAL_LOG_N))

    g1, g2 = G1Point(), G2Point()  # the generators
    pts1, p = [], g1
    for _ in range(CAL_G1_POINTS):
        pts1.append(p)
        p = p + g1
    pts2, q = [], g2
    for _ in range(CAL_G2_POINTS):
        pts2.append(q)
        q = q + g2
    arr1, arr2 = g1_to_mont_array(BLS12_381, pts1), g2_to_mont_array(BLS12_381, pts2)
    scalars = rng.integers(0, 2**32, (CAL_G1_POINTS, 8), dtype=np.uint32)
    scalars[:, 7] &= 0x0FFFFFFF  # below r
    if native_msm.available():
        g1_s = _best(lambda: native_msm.msm_g1(arr1, scalars, threads))
        g2_s = _best(lambda: native_msm.msm_g2(arr2, scalars[:CAL_G2_POINTS], threads))
    else:  # arkworks' own MSM (no native extension)
        from cuzk.prover.points import scalars_from_array

        sc = scalars_from_array(scalars)
        g1_s = _best(lambda: G1Point.multiexp_unchecked(pts1, sc))
        g2_s = _best(lambda: G2Point.multiexp_unchecked(pts2, sc[:CAL_G2_POINTS]))
    verify_s = _best(lambda: GT.pairing_check([-g1, g1, g1, g1], [g2, g2, g2, g2]))
    return Rates(
        abc_per_coefficient=abc_s / m,
        ntt_per_nlogn=ntt_s / (n * CAL_LOG_N),
        g1_per_unit=g1_s / msm_cost(CAL_G1_POINTS, threads),
        g2_per_unit=g2_s / msm_cost(CAL_G2_POINTS, threads),
        verify_s=verify_s,
        threads=threads,
        calibration_s=time.perf_counter() - t_start,
    )


def phase_seconds(sizes: CircuitSizes, rates: Rates) -> dict[str, float]:
    """A CPU-backend partition's phases at ``rates``: synthesis builds A, B, C and checks the
    constraints (two passes over the coefficients); the GPU phase runs H and the four G1 MSMs
    and B in G2 (on the host, all in that phase); finalize verifies the proof."""
    t = rates.threads
    n, log_n = sizes.domain_size, sizes.log_domain
    g1 = sum(msm_cost(k, t) for k in (n, sizes.a_points, sizes.b_points, sizes.c_points))
    return {
        "synthesizing": 2 * sizes.n_coefficients * rates.abc_per_coefficient,
        "proving": n * log_n * rates.ntt_per_nlogn + g1 * rates.g1_per_unit
        + msm_cost(sizes.b_points, t) * rates.g2_per_unit,
        "finalizing": rates.verify_s,
    }


class Calibration:
    """The process's rates, measured on first use and kept (one calibration per process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rates: Rates | None = None

    def rates(self) -> Rates:
        with self._lock:
            if self._rates is None:
                self._rates = calibrate()
            return self._rates
