"""CudaBackend's host-side flow (key residency, pinned double-buffered uploads, stream hand-offs,
H and MSM plumbing, out-of-memory handling) without a GPU: CuPy is replaced by a NumPy-backed
stand-in and the kernels run on the CPU target. The real device path is test_gpu_device.py."""

from __future__ import annotations

import contextlib
import random
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, Scalar

from cuzk.curves import BLS12_381
from cuzk.prover import cuda_backend
from kernels import qap
from kernels.field import FR, ints_to_array
from kernels.gpu.g1 import g1_to_affine_mont
from kernels.gpu.launch import Executor
from kernels.gpu.runtime import cpu_target

R = BLS12_381.r


class _Dev(np.ndarray):
    """A 'device array': NumPy memory with CuPy's set/get."""

    def set(self, arr, stream=None):
        np.copyto(np.asarray(self), arr)

    def get(self, stream=None, out=None):
        if out is None:
            return np.asarray(self).copy()
        np.copyto(out, np.asarray(self))
        return out


class _Stream:
    ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass

    def wait_event(self, ev):
        assert ev.recorded, "compute stream waited on an event that was never recorded"


class _Event:
    def __init__(self, **kw):
        self.recorded = False

    def record(self, stream):
        self.recorded = True


class _Pool:
    def __init__(self):
        self.limit = None

    def free_all_blocks(self):
        pass


def _fake_cupy(pool: _Pool) -> types.ModuleType:
    cp = types.ModuleType("cupy")

    def empty(shape, dtype=np.uint32):
        if pool.limit is not None and int(np.prod(shape)) * np.dtype(dtype).itemsize > pool.limit:
            raise type("OutOfMemoryError", (Exception,), {})(f"out of memory allocating {shape}")
        return np.empty(shape, dtype).view(_Dev)

    cp.empty = empty
    cp.asarray = lambda a, dtype=None: np.asarray(a, dtype).view(_Dev)
    cp.get_default_memory_pool = lambda: pool
    cp.get_default_pinned_memory_pool = lambda: pool
    cp.cuda = SimpleNamespace(
        Stream=lambda non_blocking=True: _Stream(),
        Event=_Event,
        Device=lambda i: contextlib.nullcontext(),
        alloc_pinned_memory=lambda n: bytearray(n),
        runtime=SimpleNamespace(memGetInfo=lambda: (1 << 30, 2 << 30), getDeviceCount=lambda: 1),
    )
    cp.__getattr__ = lambda name: getattr(np, name)   # sort, searchsorted, zeros, ...
    return cp


@pytest.fixture()
def fake(monkeypatch):
    pool = _Pool()
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(pool))
    monkeypatch.setattr(cuda_backend, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(cuda_backend, "_make_executor",
                        lambda cp, stream: Executor(cpu_target(), cp, stream=None))
    monkeypatch.setattr(cuda_backend.CudaBackend, "_device",
                        lambda self: contextlib.nullcontext())
    return cuda_backend.CudaBackend(0), pool


def _key(m: int, log_n: int):
    rng = random.Random(m)
    pts = [G1Point() * Scalar(rng.randrange(1, R)) for _ in range(m)]
    arr = g1_to_affine_mont(pts)
    sections = {"A": arr, "B1": arr, "C": arr[: m // 2], "H": arr[: 1 << log_n]}
    key = SimpleNamespace(path="k.zkey", sizes=SimpleNamespace(domain_size=1 << log_n),
                          g1_section_array=lambda s: sections[s])
    return key, pts


def test_backend_h_and_msm_flow(fake):
    backend, _ = fake
    assert backend.device == "cuda:0"
    key, pts = _key(40, 5)
    nbytes = backend.upload_key(key)
    assert nbytes == (40 + 40 + 20 + 32) * 96 and backend.resident_bytes() == nbytes
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
    h_device_bytes: the peak is within the estimate and the estimate not far above it."""
    import tracemalloc

    backend, _ = fake
    key, _ = _key(4, 1)
    n = 1 << 12
    rng = random.Random(5)
    a, b, c = (FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)])) for _ in range(3))
    backend.h_evaluations(key, a, b, c)           # staging buffers and twiddles now exist
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        backend.h_evaluations(key, a, b, c)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    est = cuda_backend.h_device_bytes(n, twiddles=False)
    assert peak <= est <= 1.2 * peak, (peak, est)


def _groth16_key(n_vars: int, n_public: int, log_n: int):
    """A key shaped like a zkey's G1 sections, with most A and some B1 points at infinity."""
    rng = random.Random(n_vars)
    n = 1 << log_n
    pts = [G1Point() * Scalar(rng.randrange(1, R)) for _ in range(n_vars + n)]
    ident = G1Point.identity()
    a_pts = [p if i % 3 == 0 else ident for i, p in enumerate(pts[:n_vars])]
    b_pts = [ident if i % 4 == 1 else p for i, p in enumerate(pts[1:n_vars + 1])]
    c_pts = pts[2:n_vars - n_public + 1]
    h_pts = pts[n_vars:]
    group = {"A": a_pts, "B1": b_pts, "C": c_pts, "H": h_pts}
    sections = {s: g1_to_affine_mont(p) for s, p in group.items()}
    key = SimpleNamespace(
        path="g.zkey",
        sizes=SimpleNamespace(domain_size=n, n_vars=n_vars, n_public=n_public),
        g1_section_array=lambda s: sections[s])
    return key, group


def test_device_gpu_phase_keeps_witness_and_h_on_the_device(fake):
    """One upload each for a, b, c and the witness; H is never copied back; points at infinity
    are compacted out at upload and their scalars never gathered; the sums match arkworks."""
    from cuzk.prover.groth16 import gpu_phase

    backend, _ = fake
    n_vars, n_public, log_n = 30, 2, 5
    key, group = _groth16_key(n_vars, n_public, log_n)
    nbytes = backend.upload_key(key)
    resident = backend._keys[id(key)]
    kept = {s: sum(1 for p in pts if p != G1Point.identity()) for s, pts in group.items()}
    assert {s: int(v.shape[0]) for s, v in resident.sections.items()} == kept
    assert kept["A"] == 10 and resident.present["C"] is None and resident.present["H"] is None
    assert nbytes == sum(kept.values()) * 96 + (kept["A"] + kept["B1"]) * 8  # + kept indices

    rng = random.Random(9)
    n = 1 << log_n
    w_ints = [1] + [rng.randrange(R) for _ in range(n_vars - 1)]
    w = ints_to_array(w_ints, 8)
    a, b, c = (FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)])) for _ in range(3))
    uploads, steps = [], []
    real_upload = backend._upload_rows
    backend._upload_rows = lambda host, buf: (uploads.append(host.shape), real_upload(host, buf))[1]
    backend.step_meter = lambda name: (steps.append(name), contextlib.nullcontext())[1]
    backend.h_evaluations = backend.msm_g1 = None          # the one-step paths must not be used
    synth = SimpleNamespace(abc=(a, b, c), witness=w)
    out = gpu_phase(key, synth, backend)
    assert uploads == [(n, 8), (n, 8), (n, 8), (n_vars, 8)]
    assert steps == ["H", "MSM A", "MSM B1", "MSM C", "MSM H"]

    def ark(pts, ints):
        return G1Point.multiexp_unchecked(list(pts), [Scalar(x) for x in ints])

    h_ints = FR.to_ints(qap.h_evaluations(a, b, c, log_n))
    assert out.a == ark(group["A"], w_ints)
    assert out.b1 == ark(group["B1"], w_ints)
    assert out.c == ark(group["C"], w_ints[n_public + 1:])
    assert out.h == ark(group["H"], h_ints)


def test_msm_g1_gathers_scalars_of_the_kept_points(fake):
    backend, _ = fake
    key, group = _groth16_key(24, 1, 4)
    backend.upload_key(key)
    rng = random.Random(4)
    sc = [rng.randrange(R) for _ in range(24)]
    want = G1Point.multiexp_unchecked(group["A"], [Scalar(x) for x in sc])
    assert backend.msm_g1(key, "A", ints_to_array(sc, 8)) == want


def test_working_bytes_counts_the_compacted_sections_and_what_stays_resident(fake):
    from kernels.gpu.msm import device_bytes_estimate

    backend, _ = fake
    key, _ = _groth16_key(30, 2, 5)
    before = backend.working_bytes(key)              # from the host arrays
    backend.upload_key(key)
    steps = backend.step_estimates(key)
    assert steps["MSM A"] == device_bytes_estimate(10)
    assert steps["H"] == cuda_backend.h_device_bytes(32)
    held = (32 + 30) * 32
    assert backend.working_bytes(key) == before == max(
        steps["H"], held + max(v for k, v in steps.items() if k != "H"))
