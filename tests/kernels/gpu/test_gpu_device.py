"""CudaBackend and the kernels on a real GPU. Without a CUDA device (CI never has one) the device
tests skip, unless CUZK_REQUIRE_GPU=1 (set by benchmarks/gpu_check.sh on the GPU machine): then a
missing device fails them with the probe's reason. The probe and the error types are checked
everywhere."""

from __future__ import annotations

import logging
import random
from types import SimpleNamespace

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk.curves import BLS12_381
from cuzk.errors import CuzkError
from cuzk.prover import cuda_backend
from cuzk.prover.cuda_backend import (
    CudaBackend,
    CudaError,
    DeviceOutOfMemory,
    cuda_available,
    cuda_device_count,
    cuda_unavailable_reason,
)
from cuzk.prover.points import g2_to_mont_array
from kernels import qap
from kernels.field import FR, ints_to_array
from kernels.gpu import cxx_msm
from kernels.gpu.cxx_kernels import VARIANTS
from kernels.gpu.g1 import g1_to_affine_mont
from tests.kernels.gpu import test_gpu_cxx_msm as cxx_cases
from tests.kernels.gpu import test_gpu_cxx_ntt as ntt_cases

R = BLS12_381.r


def require_gpu() -> None:
    """Skip without a usable device, or fail when CUZK_REQUIRE_GPU=1 demands one."""
    if cuda_available():
        return
    msg = f"needs a CUDA device: {cuda_unavailable_reason()}"
    if cuda_backend.gpu_required():
        pytest.fail(f"CUZK_REQUIRE_GPU=1 and no usable device: {cuda_unavailable_reason()}")
    pytest.skip(msg + " (none in CI; run benchmarks/gpu_check.sh)")


def test_probe_is_consistent():
    assert cuda_available() == (cuda_device_count() > 0)
    assert (cuda_unavailable_reason() is None) == cuda_available()
    if not cuda_available():
        with pytest.raises(CudaError, match="no usable CUDA device"):
            CudaBackend(0)


def test_probe_logs_why_cuda_is_unusable(monkeypatch, caplog):
    """A broken CUDA stack is reported with its cause, not swallowed."""
    import sys

    cuda_backend._probe.cache_clear()
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    broken = type(sys)("cupy")

    class _Runtime:
        @staticmethod
        def getDeviceCount():
            raise RuntimeError("cudaErrorInsufficientDriver: driver too old")

    broken.cuda = type(sys)("cupy.cuda")
    broken.cuda.runtime = _Runtime
    monkeypatch.setitem(sys.modules, "cupy", broken)
    try:
        with caplog.at_level(logging.WARNING, logger="cuzk.prover.cuda_backend"):
            assert cuda_device_count() == 0
        assert "cudaErrorInsufficientDriver" in cuda_unavailable_reason()
        assert any("CUDA backend unusable" in r.getMessage()
                   and "driver too old" in r.getMessage() for r in caplog.records)
        with pytest.raises(CudaError, match="driver too old"):
            CudaBackend(0)
    finally:
        cuda_backend._probe.cache_clear()


@pytest.mark.parametrize("required,level", [("0", logging.INFO), ("1", logging.WARNING)])
def test_probe_reports_a_missing_cupy_quietly_unless_a_gpu_is_required(
        monkeypatch, caplog, required, level):
    """No CuPy on a CPU host is expected: INFO, so CLI stderr stays clean; with
    CUZK_REQUIRE_GPU=1 it is the reason the device check fails: WARNING."""
    import sys

    cuda_backend._probe.cache_clear()
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setenv("CUZK_REQUIRE_GPU", required)
    monkeypatch.setitem(sys.modules, "cupy", None)          # import cupy -> ModuleNotFoundError
    try:
        with caplog.at_level(logging.DEBUG, logger="cuzk.prover.cuda_backend"):
            assert cuda_device_count() == 0
        assert "CuPy is not installed" in cuda_unavailable_reason()
        rec = [r for r in caplog.records if "CUDA backend unusable" in r.getMessage()]
        assert [r.levelno for r in rec] == [level]
    finally:
        cuda_backend._probe.cache_clear()


def test_require_gpu_turns_the_skip_into_a_failure(monkeypatch):
    """CUZK_REQUIRE_GPU=1 without a device: the device tests fail (with the reason) instead of
    skipping, so a broken device image cannot pass the device check."""
    monkeypatch.setattr(cuda_backend, "_probe", lambda: (0, "no driver here"))
    monkeypatch.setenv("CUZK_REQUIRE_GPU", "1")
    with pytest.raises(pytest.fail.Exception, match="no driver here"):
        require_gpu()
    monkeypatch.setenv("CUZK_REQUIRE_GPU", "0")
    with pytest.raises(pytest.skip.Exception, match="no driver here"):
        require_gpu()


def test_out_of_memory_error_is_a_clear_cuzk_error():
    err = DeviceOutOfMemory("cuda:1", "MSM over section H", "OutOfMemoryError: 1 GiB",
                            512 << 20, 80 << 30)
    assert isinstance(err, CuzkError)
    assert "cuda:1" in str(err) and "MSM over section H" in str(err)
    assert "512 MiB free of 81920 MiB" in str(err) and "remains usable" in str(err)


def _rand_mont(n: int, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    return FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)]))


def _fake_key(m: int, log_n: int, seed: int = 1):
    rng = random.Random(seed)
    gen = G1Point()
    pts = [gen * Scalar(rng.randrange(1, R)) for _ in range(m)]
    arr = g1_to_affine_mont(pts)
    sections = {"A": arr, "B1": arr[::-1].copy(), "C": arr[: m // 2].copy(), "H": arr[: 1 << log_n]}
    b2 = g2_to_mont_array(BLS12_381, [G2Point() * Scalar(rng.randrange(1, R)) for _ in range(8)])
    b2 = np.ascontiguousarray(np.resize(b2, (m, *b2.shape[1:])))
    key = SimpleNamespace(path="fake.zkey", sizes=SimpleNamespace(domain_size=1 << log_n),
                          g1_section_array=lambda s: sections[s],
                          g2_section_array=lambda s="B2": b2)
    return key, pts, sections


@pytest.fixture(scope="module")
def backend():
    require_gpu()
    return CudaBackend(0)


@pytest.mark.parametrize("log_n", [1, 5, 11, 14])
def test_device_h_matches_cpu(backend, log_n):
    n = 1 << log_n
    key, _, _ = _fake_key(4, 1)
    a, b, c = _rand_mont(n, 1), _rand_mont(n, 2), _rand_mont(n, 3)
    assert np.array_equal(backend.h_evaluations(key, a, b, c), qap.h_evaluations(a, b, c, log_n))


@pytest.mark.parametrize("section", ["A", "B1", "C", "H"])
def test_device_msm_matches_arkworks(backend, section):
    key, _, sections = _fake_key(600, 9)
    expected = backend.key_device_bytes(key)               # before the upload: from the host
    nbytes = backend.upload_key(key)
    assert nbytes == expected == (sum(s.nbytes for s in sections.values())
                                  + key.g2_section_array().nbytes        # B2, resident too
                                  + cuda_backend.ntt_table_bytes(1 << 9))
    assert backend.upload_key(key) == nbytes           # resident: no second upload
    m = sections[section].shape[0]
    rng = random.Random(m)
    sc = [rng.choice([0, 1, R - 1, rng.randrange(R)]) for _ in range(m)]
    from cuzk.prover.points import g1_from_mont_array

    pts = g1_from_mont_array(BLS12_381, sections[section])
    want = G1Point.multiexp_unchecked(pts, [Scalar(s) for s in sc])
    assert backend.msm_g1(key, section, ints_to_array(sc, 8)) == want


def test_device_oom_fails_cleanly_and_backend_recovers(backend):
    import cupy

    key, pts, _ = _fake_key(300, 8, seed=9)
    backend.upload_key(key)
    sc = ints_to_array([random.Random(4).randrange(R) for _ in range(300)], 8)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    pool.set_limit(size=pool.used_bytes() + (1 << 16))
    try:
        with pytest.raises(DeviceOutOfMemory, match="remains usable"):
            backend.msm_g1(key, "A", sc)
    finally:
        pool.set_limit(size=0)
    want = G1Point.multiexp_unchecked(pts, [Scalar(s) for s in FR.to_ints(sc)])
    assert backend.msm_g1(key, "A", sc) == want
    backend.drop_key(key)


def test_device_warmup_compiles_every_kernel(backend):
    assert backend.warmup() >= 0.0


def test_device_gpu_phase_matches_arkworks(backend):
    """The device-resident GPU phase (witness and H stay on the device, points at infinity
    compacted out) against arkworks and the CPU H."""
    rng = random.Random(11)
    n_vars, n_public, log_n = 300, 3, 8
    n = 1 << log_n
    ident = G1Point.identity()
    pts = [G1Point() * Scalar(rng.randrange(1, R)) for _ in range(n_vars + n)]
    group = {"A": [p if i % 3 == 0 else ident for i, p in enumerate(pts[:n_vars])],
             "B1": [ident if i % 4 == 1 else p for i, p in enumerate(pts[1:n_vars + 1])],
             "C": pts[2:n_vars - n_public + 1], "H": pts[n_vars:]}
    sections = {s: g1_to_affine_mont(p) for s, p in group.items()}
    g2 = [G2Point() * Scalar(rng.randrange(1, R)) for _ in range(16)]
    b2_pts = [G2Point.identity() if i % 5 == 2 else g2[i % 16] for i in range(n_vars)]
    b2 = g2_to_mont_array(BLS12_381, b2_pts)
    key = SimpleNamespace(path="g.zkey",
                          sizes=SimpleNamespace(domain_size=n, n_vars=n_vars, n_public=n_public),
                          g1_section_array=lambda s: sections[s],
                          g2_section_array=lambda s="B2": b2)
    w_ints = [1] + [rng.randrange(R) for _ in range(n_vars - 1)]
    a, b, c = _rand_mont(n, 21), _rand_mont(n, 22), _rand_mont(n, 23)
    got = backend.device_gpu_phase(key, a, b, c, ints_to_array(w_ints, 8))
    h_ints = FR.to_ints(qap.h_evaluations(a, b, c, log_n))

    def ark(p, ints):
        return G1Point.multiexp_unchecked(list(p), [Scalar(x) for x in ints])

    assert got == (ark(group["A"], w_ints), ark(group["B1"], w_ints),
                   ark(group["C"], w_ints[n_public + 1:]), ark(group["H"], h_ints),
                   G2Point.multiexp_unchecked(b2_pts, [Scalar(x) for x in w_ints]))
    backend.drop_key(key)


def test_device_two_lanes_run_their_gpu_phases_at_once(backend):
    """Two lanes of one device inside their GPU phases at the same time (a barrier in the step
    meter that only two concurrent phases pass), each result equal to arkworks and the CPU H."""
    import threading

    from tests.kernels.gpu.fake_cupy import groth16_key

    key, group = groth16_key(300, 3, 8, seed=31)
    backend.upload_key(key)
    lanes = [backend.lane(), backend.lane()]
    arrived = threading.Barrier(2, timeout=120)

    def meter(name):
        import contextlib

        @contextlib.contextmanager
        def cm():
            if name == "MSM A":
                arrived.wait()
            yield
        return cm()

    results: dict = {}
    errors: dict = {}
    inputs = []
    for i in range(2):
        rng = random.Random(40 + i)
        w_ints = [1] + [rng.randrange(R) for _ in range(299)]
        inputs.append((w_ints, _rand_mont(256, 50 + i), _rand_mont(256, 60 + i),
                       _rand_mont(256, 70 + i)))

    def run(i):
        try:
            w_ints, a, b, c = inputs[i]
            results[i] = lanes[i].device_gpu_phase(key, a, b, c, ints_to_array(w_ints, 8))
        except BaseException as exc:
            errors[i] = exc

    for lane in lanes:
        lane.step_meter = meter
    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors

    def ark(p, ints):
        return G1Point.multiexp_unchecked(list(p), [Scalar(x) for x in ints])

    for i in range(2):
        w_ints, a, b, c = inputs[i]
        h_ints = FR.to_ints(qap.h_evaluations(a, b, c, 8))
        assert results[i][:4] == (ark(group["A"], w_ints), ark(group["B1"], w_ints),
                                  ark(group["C"], w_ints[4:]), ark(group["H"], h_ints))
        assert results[i][4] == key.msm_b2(ints_to_array(w_ints, 8))
    backend.drop_key(key)


# --------------------------------------------------------------------------- the C++ kernels

@pytest.fixture(scope="module", params=list(VARIANTS))
def cxx_kernels(request):
    """The C++ kernels on the device, each build variant (from the bundle when
    CUZK_GPU_KERNELS names one, else NVRTC)."""
    require_gpu()
    import cupy

    from kernels.gpu.cxx_kernels import device_kernels

    return device_kernels(cupy, None, request.param)


def test_device_cxx_field_ops_match_integers(cxx_kernels):
    cxx_cases.check_fq_ops(cxx_kernels)
    cxx_cases.check_fq2_ops(cxx_kernels)


def test_device_cxx_fq_ops_at_scale(cxx_kernels):
    """2^16 random elements (every limb pattern below p): the device's multiply, add, subtract
    and square against Python integers, bit for bit (results fully reduced)."""
    import cupy

    p, words, n = BLS12_381.q, 12, 1 << 16
    rng = np.random.default_rng(5)
    a, b = (rng.integers(0, 1 << 32, size=(n, words), dtype=np.uint64).astype(np.uint32)
            for _ in range(2))
    for x in (a, b):
        x[:, 11] %= 0x1A0111EA                              # below p's top limb: < p
    dev = cupy.zeros((4, n, words), dtype=np.uint32)
    cxx_kernels.launch("g1_field_ops", n, n, cupy.asarray(a), cupy.asarray(b), dev)
    got = dev.get()
    rinv = pow(1 << 384, -1, p)

    def ints(rows):
        return [int.from_bytes(r.tobytes(), "little") for r in rows]

    ai, bi = ints(a), ints(b)
    assert ints(got[0]) == [x * y * rinv % p for x, y in zip(ai, bi, strict=True)]
    assert ints(got[1]) == [(x + y) % p for x, y in zip(ai, bi, strict=True)]
    assert ints(got[2]) == [(x - y) % p for x, y in zip(ai, bi, strict=True)]
    assert ints(got[3]) == [x * x * rinv % p for x in ai]


@pytest.mark.parametrize("curve", [cxx_msm.G1, cxx_msm.G2], ids=["g1", "g2"])
def test_device_cxx_msm_edge_cases(cxx_kernels, curve, monkeypatch):
    for c in (None, 4, 7):
        cxx_cases.check_random_and_small_scalars(cxx_kernels, curve, c)
    cxx_cases.check_top_signed_digit(cxx_kernels, curve)
    cxx_cases.check_doubling_and_cancellation(cxx_kernels, curve)
    cxx_cases.check_hot_bucket(cxx_kernels, curve, monkeypatch)
    for c, copies in cxx_cases.TABLED:          # window copies: 1, 2, not dividing, all
        cxx_cases.check_tabled(cxx_kernels, curve, c, copies)


# --------------------------------------------------------------------------- the C++ NTT

def test_device_cxx_fr_ops_match_integers(cxx_kernels):
    ntt_cases.check_fr_ops(cxx_kernels)


@pytest.mark.parametrize("log_n", [1, 4, 10, 16])
def test_device_cxx_ntt_and_h_match_cpu(cxx_kernels, log_n):
    """The C++ forward/inverse NTT against kernels.ntt and H against qap.h_evaluations, bit for
    bit, for every pass length (the last pass shorter at 2^4 and 2^10)."""
    for pass_bits in (1, 3):
        ntt_cases.check_ntt_matches_cpu(cxx_kernels, log_n, pass_bits)
        ntt_cases.check_h_matches_qap(cxx_kernels, log_n, pass_bits)


@pytest.mark.parametrize("log_n", [1, 5, 14])
def test_device_h_with_the_cxx_ntt_matches_cpu(monkeypatch, log_n):
    """CUZK_GPU_NTT=cxx: the backend's H (the lane's _h_queue) on the C++ NTT."""
    require_gpu()
    monkeypatch.setenv(cuda_backend.NTT_ENV, "cxx")
    backend = CudaBackend(0)
    assert backend.ntt_kind == "cxx"
    n = 1 << log_n
    key, _, _ = _fake_key(4, 1)
    a, b, c = _rand_mont(n, 1), _rand_mont(n, 2), _rand_mont(n, 3)
    assert np.array_equal(backend.h_evaluations(key, a, b, c), qap.h_evaluations(a, b, c, log_n))
