"""The real prover's prior (cuzk.prover.priors): a kind's phases from its key's sizes at rates
calibrated on this machine, known before the key exists, and close to what proving takes."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path

from cuzk.circuits.registry import bundled_circuits
from cuzk.engine.settings import EngineSettings, default_proof_kinds
from cuzk.prover.keystore import ensure_zkey
from cuzk.prover.priors import Rates, msm_cost, phase_seconds
from cuzk.prover.real_prover import RealProver
from tests.conftest import KEYS_DIR

RATES = Rates(abc_per_coefficient=1e-8, ntt_per_nlogn=1e-8, g1_per_unit=1e-7, g2_per_unit=5e-7,
              verify_s=0.005, threads=2, calibration_s=0.0)


def _prover(keys_dir: Path) -> RealProver:
    return RealProver(EngineSettings(backend="cpu", proof_kinds=default_proof_kinds(),
                                     keys_dir=keys_dir))


def test_a_prior_exists_before_the_key_and_generates_nothing(tmp_path: Path):
    prior = _prover(tmp_path).phase_prior("porep-c2")
    assert prior is not None
    assert list(tmp_path.iterdir()) == []  # no key made to answer
    assert set(prior.seconds) == {"synthesizing", "proving", "finalizing"}
    assert all(v > 0 for v in prior.seconds.values()), prior.seconds
    assert "domain 2^" in prior.basis and "calibrated" in prior.basis


def test_the_gpu_phase_prior_is_within_a_factor_of_three_of_a_measured_one(bundled):
    """The calibration and the measurement run moments apart on the same (shared) machine."""
    kind = "window-post"
    setup = bundled(kind)
    prover = _prover(KEYS_DIR)
    prior = prover.phase_prior(kind)
    assert prior is not None
    handle = prover.load_key(kind)
    synthesis = prover.synthesize(handle, setup.inputs)
    measured = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        prover.gpu_phase(handle, synthesis, "cpu")
        measured = min(measured, time.perf_counter() - t0)
    ratio = prior.seconds["proving"] / measured
    assert 1 / 3 < ratio < 3, (prior.seconds, measured)


def test_larger_keys_take_longer_and_each_kernel_counts():
    ensure_zkey("winning-post", Path(bundled_circuits()["winning-post"].r1cs_path), KEYS_DIR)
    sizes = _prover(KEYS_DIR).key_layout("winning-post").sizes
    base = phase_seconds(sizes, RATES)
    bigger = phase_seconds(replace(sizes, domain_size=4 * sizes.domain_size,
                                   n_coefficients=4 * sizes.n_coefficients,
                                   a_points=4 * sizes.a_points, b_points=4 * sizes.b_points,
                                   c_points=4 * sizes.c_points), RATES)
    assert bigger["synthesizing"] == 4 * base["synthesizing"]
    assert 3 < bigger["proving"] / base["proving"] < 5
    assert bigger["finalizing"] == base["finalizing"] == RATES.verify_s
    no_g2 = phase_seconds(sizes, replace(RATES, g2_per_unit=0.0))
    assert math.isclose(base["proving"] - no_g2["proving"], msm_cost(sizes.b_points, 2) * 5e-7)
    # The window model prices a large MSM below as many small ones.
    assert msm_cost(1 << 20, 2) < 1024 * msm_cost(1 << 10, 2)


def test_a_cuda_host_gets_a_prior_at_its_cpu_rates_marked_an_upper_bound(tmp_path: Path):
    """No device calibration yet: the first job of a kind on a CUDA host is still predicted
    (issue 27: never admitted blind), its device phase priced at the host's CPU rates, which
    the device only beats, and the basis says so."""
    prover = _prover(tmp_path)
    cpu = prover.phase_prior("winning-post")
    prover.name = "cuda"  # what RealProver is on a CUDA host; the prior reads no device
    cuda = prover.phase_prior("winning-post")
    assert cpu is not None and cuda is not None
    assert cuda.seconds == cpu.seconds
    assert "upper bound until measured on cuda" in cuda.basis
    assert "upper bound" not in cpu.basis
