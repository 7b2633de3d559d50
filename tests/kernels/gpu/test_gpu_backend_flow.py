"""CudaBackend's host-side flow (key residency, pinned double-buffered uploads, stream hand-offs,
H and MSM plumbing, out-of-memory handling) without a GPU: CuPy is replaced by a NumPy-backed
stand-in and the kernels run on the CPU target. The real device path is test_gpu_device.py."""

from __future__ import annotations

import contextlib
import random
from types import SimpleNamespace

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk.curves import BLS12_381
from cuzk.prover import cuda_backend
from cuzk.prover.points import g2_to_mont_array
from kernels import qap
from kernels.field import FR, ints_to_array
from kernels.gpu.g1 import g1_to_affine_mont
from tests.kernels.gpu.fake_cupy import Dev, groth16_key, install

R = BLS12_381.r


@pytest.fixture(params=["numba", "cxx"])
def fake(monkeypatch, request):
    """The backend with each H NTT (CUZK_GPU_NTT): the same sums either way."""
    monkeypatch.setenv(cuda_backend.NTT_ENV, request.param)
    return install(monkeypatch)


def _key(m: int, log_n: int):
    rng = random.Random(m)
    pts = [G1Point() * Scalar(rng.randrange(1, R)) for _ in range(m)]
    arr = g1_to_affine_mont(pts)
    sections = {"A": arr, "B1": arr, "C": arr[: m // 2], "H": arr[: 1 << log_n]}
    b2 = g2_to_mont_array(BLS12_381, [G2Point() * Scalar(i + 1) for i in range(m)])
    key = SimpleNamespace(path="k.zkey", sizes=SimpleNamespace(domain_size=1 << log_n),
                          g1_section_array=lambda s: sections[s],
                          g2_section_array=lambda s="B2": b2)
    return key, pts


def test_backend_h_and_msm_flow(fake):
    backend, _ = fake
    assert backend.device == "cuda:0"
    key, pts = _key(40, 5)
    nbytes = backend.upload_key(key)
    tables = cuda_backend.ntt_table_bytes(32)
    assert nbytes == (40 + 40 + 20 + 32) * 96 + 40 * 192 + tables
    assert backend.resident_bytes() == nbytes
    assert backend.upload_key(key) == nbytes
    n = 32
    rng = random.Random(2)
    a, b, c = (FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)])) for _ in range(3))
    assert np.array_equal(backend.h_evaluations(key, a, b, c), qap.h_evaluations(a, b, c, 5))
    sc = [rng.randrange(R) for _ in range(20)]
    got = backend.msm_g1(key, "C", ints_to_array(sc, 8))
    assert got == G1Point.multiexp_unchecked(pts[:20], [Scalar(s) for s in sc])
    with pytest.raises(ValueError, match="20 points"):
        backend.msm_g1(key, "C", ints_to_array(sc[:5], 8))
    backend.drop_key(key)
    assert backend.resident_bytes() == 0


def test_backend_out_of_memory_is_a_clean_partition_failure(fake):
    backend, pool = fake
    key, pts = _key(12, 3)
    backend.upload_key(key)
    sc = ints_to_array([3] * 12, 8)
    pool.limit = 64
    with pytest.raises(cuda_backend.DeviceOutOfMemory, match="cuda:0: out of device memory"):
        backend.msm_g1(key, "A", sc)
    pool.limit = None
    assert backend.msm_g1(key, "A", sc) == G1Point.multiexp_unchecked(pts, [Scalar(3)] * 12)


def test_h_device_memory_estimate_covers_the_measured_peak(fake):
    """Every array the H step allocates on the 'device' (NumPy here, traced by tracemalloc) is in
    h_device_bytes: the peak is within the estimate and the estimate not far above it. The step
    as the GPU phase queues it (``_h_queue``: its output and the uploads stay on the device; the
    one-step path's copy back is host memory, which the C++ NTT's smaller peak would count)."""
    import tracemalloc

    backend, _ = fake
    key, _ = _key(4, 1)
    n = 1 << 12
    rng = random.Random(5)
    a, b, c = (FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)])) for _ in range(3))
    backend.h_evaluations(key, a, b, c)           # staging buffers and twiddles now exist
    lane = backend.default_lane
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        queued = lane._h_queue(a, b, c)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    lane._compute.synchronize()
    del queued
    est = cuda_backend.h_device_bytes(n, twiddles=False, ntt=backend.ntt_kind)
    host_objects = 16 << 10      # array headers, the host twin's ctypes views: host objects
    assert peak <= est + host_objects and est <= 1.2 * peak, (peak, est)


def test_device_gpu_phase_keeps_witness_and_h_on_the_device(fake):
    """One upload each for a, b, c and the witness; H is never copied back; points at infinity
    are compacted out at upload and their scalars never gathered; the sums match arkworks."""
    from cuzk.prover.groth16 import gpu_phase

    backend, _ = fake
    n_vars, n_public, log_n = 30, 2, 5
    key, group = groth16_key(n_vars, n_public, log_n)
    nbytes = backend.upload_key(key)
    resident = backend._keys[id(key)]
    kept = {s: sum(1 for p in pts if p != G1Point.identity()) for s, pts in group.items()}
    kept["B2"] = key.msm_points("B2")
    assert {s: int(v.shape[0]) for s, v in resident.sections.items()} == kept
    assert kept["A"] == 10 and resident.present["C"] is None and resident.present["H"] is None
    assert 0 < kept["B2"] < n_vars                     # B2's points at infinity compacted too
    g1_kept = sum(v for s, v in kept.items() if s != "B2")
    assert nbytes == (g1_kept * 96 + kept["B2"] * 192
                      + (kept["A"] + kept["B1"] + kept["B2"]) * 8  # + kept indices
                      + cuda_backend.ntt_table_bytes(1 << log_n))

    rng = random.Random(9)
    n = 1 << log_n
    w_ints = [1] + [rng.randrange(R) for _ in range(n_vars - 1)]
    w = ints_to_array(w_ints, 8)
    a, b, c = (FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)])) for _ in range(3))
    uploads, steps = [], []
    lane = backend.default_lane
    real_upload = lane._upload_rows
    lane._upload_rows = lambda host: (uploads.append(host.shape), real_upload(host))[1]
    backend.step_meter = lambda name: (steps.append(name), contextlib.nullcontext())[1]
    lane.h_evaluations = lane.msm_g1 = None               # the one-step paths must not be used
    synth = SimpleNamespace(abc=(a, b, c), witness=w)
    waits = []
    real_sync = lane._compute.synchronize
    lane._compute.synchronize = lambda: (waits.append(Dev.gets), real_sync())[1]
    Dev.host_reads = Dev.gets = 0
    out = gpu_phase(key, synth, backend)
    # The host never waits for the device inside the phase but once, for the five sums: no
    # device value is read on the host, one copy comes back, the compute stream is waited on
    # once, after it.
    assert (Dev.host_reads, Dev.gets, waits) == (0, 1, [1])
    assert uploads == [(n_vars, 8), (n, 8), (n, 8), (n, 8)]
    assert steps == ["H", "MSM A", "MSM B1", "MSM C", "MSM H", "MSM B2"]

    def ark(pts, ints):
        return G1Point.multiexp_unchecked(list(pts), [Scalar(x) for x in ints])

    h_ints = FR.to_ints(qap.h_evaluations(a, b, c, log_n))
    assert out.a == ark(group["A"], w_ints)
    assert out.b1 == ark(group["B1"], w_ints)
    assert out.c == ark(group["C"], w_ints[n_public + 1:])
    assert out.h == ark(group["H"], h_ints)
    assert out.b2 == key.msm_b2(w)                     # B2 on the device, not in finalize
    assert list(out.steps_ms) == ["upload", *steps, "copy back", "combine"]
    assert all(ms >= 0 for ms in out.steps_ms.values())


def test_msm_g1_gathers_scalars_of_the_kept_points(fake):
    backend, _ = fake
    key, group = groth16_key(24, 1, 4)
    backend.upload_key(key)
    rng = random.Random(4)
    sc = [rng.randrange(R) for _ in range(24)]
    want = G1Point.multiexp_unchecked(group["A"], [Scalar(x) for x in sc])
    assert backend.msm_g1(key, "A", ints_to_array(sc, 8)) == want


def test_working_bytes_counts_the_compacted_sections_and_what_stays_resident(fake):
    from kernels.gpu.cxx_msm import G2, device_bytes_estimate

    backend, _ = fake
    key, _ = groth16_key(30, 2, 5)
    before = backend.working_bytes(key)              # from the host arrays
    backend.upload_key(key)
    steps = backend.step_estimates(key)
    assert steps["MSM A"] == device_bytes_estimate(10)
    assert steps["MSM B2"] == device_bytes_estimate(key.msm_points("B2"), G2)
    assert steps["H"] == cuda_backend.h_device_bytes(32, twiddles=False, ntt=backend.ntt_kind)
    held = (32 + 30) * 32
    assert backend.working_bytes(key) == before == max(
        30 * 32 + steps["H"], held + max(v for k, v in steps.items() if k != "H"))


def test_upload_with_window_tables_and_a_phase_equal_to_the_cpu(monkeypatch):
    """msm_precompute = "on": each section is uploaded with its plan's window copies (copy j =
    2^(j * shift) * P of the kept points, built by the native extension), the bytes are the
    figure key_device_bytes gave before the upload, the step estimates use the plans, and the
    GPU phase's five sums equal the CPU backend's."""
    from cuzk.prover import native_msm
    from cuzk.prover.cpu_backend import CpuBackend
    from cuzk.prover.groth16 import gpu_phase
    from kernels.gpu.cxx_msm import G1, G2, device_bytes_estimate

    if not native_msm.available():
        pytest.skip("the native extension builds the copies")
    from cuzk.settings_schema import MSM_PRECOMPUTE_BUDGET_SHARE

    backend, _ = install(monkeypatch, "on")
    assert backend.msm_table_budget == (2 << 30) // MSM_PRECOMPUTE_BUDGET_SHARE
    n_vars, n_public, log_n = 40, 2, 5
    key, group = groth16_key(n_vars, n_public, log_n)
    expected = backend.key_device_bytes(key)
    nbytes = backend.upload_key(key)
    assert nbytes == expected == backend.resident_bytes()
    resident = backend._keys[id(key)]
    plain = cuda_backend.key_device_bytes(1 << log_n, resident.rows, resident.kept)
    tables = 0
    for sec, plan in resident.plans.items():
        m = resident.kept[sec]
        words = 48 if sec == "B2" else 24
        assert resident.sections[sec].shape == (plan.copies * m, words)
        tables += (plan.copies - 1) * m * words * 4
    assert any(p.copies > 1 for p in resident.plans.values())
    assert nbytes == plain + tables
    # copy 1 of H is 2^shift times copy 0
    h = resident.sections["H"]
    plan = resident.plans["H"]
    m = resident.kept["H"]
    if plan.copies > 1:
        f = Scalar(pow(2, plan.shift, R))
        assert np.array_equal(np.asarray(h[m:2 * m]),
                              g1_to_affine_mont([p * f for p in group["H"]]).reshape(m, 24))
    steps = backend.step_estimates(key)
    assert steps["MSM H"] == device_bytes_estimate(m, G1, plan)
    assert steps["MSM B2"] == device_bytes_estimate(resident.kept["B2"], G2,
                                                    resident.plans["B2"])

    rng = random.Random(12)
    n = 1 << log_n
    w = ints_to_array([1] + [rng.randrange(R) for _ in range(n_vars - 1)], 8)
    a, b, c = (FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)])) for _ in range(3))
    synth = SimpleNamespace(abc=(a, b, c), witness=w)
    out = gpu_phase(key, synth, backend)
    cpu = gpu_phase(key, SimpleNamespace(abc=(a, b, c), witness=w), CpuBackend())
    assert (out.a, out.b1, out.c, out.h) == (cpu.a, cpu.b1, cpu.c, cpu.h)
    assert out.b2 == key.msm_b2(w)


def test_on_tables_fit_the_device_share_and_auto_and_off_have_none(monkeypatch):
    from cuzk.settings_schema import MSM_PRECOMPUTE_BUDGET_SHARE

    backend, _ = install(monkeypatch, "on")
    total = 2 << 30                                       # the fake device's memory
    assert backend.msm_table_budget == total // MSM_PRECOMPUTE_BUDGET_SHARE
    assert cuda_backend.msm_table_budget("off", total) == 0
    assert cuda_backend.msm_table_budget("auto", total) == 0   # unmeasured on a device
    with pytest.raises(ValueError, match="msm_precompute"):
        cuda_backend.msm_table_budget("always", total)
    kept = {"A": 1 << 20, "B1": 1 << 20, "C": 1 << 20, "H": 1 << 21, "B2": 1 << 20}
    plans = cuda_backend.section_plans(kept, 1 << 30)
    assert sum((p.copies - 1) * kept[s] * (192 if s == "B2" else 96)
               for s, p in plans.items()) <= 1 << 30
    assert all(p.copies == 1 for p in cuda_backend.section_plans(kept, 0).values())


def test_ntt_selection_is_read_once_and_checked(monkeypatch):
    """CUZK_GPU_NTT: numba by default, cxx on request, anything else a clear error; the C++
    path's H bound is below numba's (no limb-major copies)."""
    monkeypatch.delenv(cuda_backend.NTT_ENV, raising=False)
    assert cuda_backend.configured_ntt() == "numba"
    monkeypatch.setenv(cuda_backend.NTT_ENV, "cxx")
    assert cuda_backend.configured_ntt() == "cxx"
    backend, _ = install(monkeypatch)
    monkeypatch.setenv(cuda_backend.NTT_ENV, "numba")          # read once, at construction
    assert backend.ntt_kind == "cxx"
    assert isinstance(backend.default_lane._ntt, cuda_backend._SharedTableCxxNtt)
    monkeypatch.setenv(cuda_backend.NTT_ENV, "cufft")
    with pytest.raises(cuda_backend.CudaError, match="CUZK_GPU_NTT"):
        cuda_backend.configured_ntt()
    for n in (1 << 10, 1 << 16, 1 << 20):
        for twiddles in (True, False):
            assert (cuda_backend.h_device_bytes(n, twiddles, ntt="cxx")
                    <= cuda_backend.h_device_bytes(n, twiddles))
