"""Lanes: two GPU workers of one device run their GPU phases at the same time, over the device's
shared resident keys, without a GPU (fake CuPy, kernels on the CPU executor; see fake_cupy.py).

Concurrency is proven, not timed: a step meter parks each phase on a barrier that only opens
when both phases are inside it at once. The same check on one shared lane (the old design: one
backend, one lock, one stream pair for both workers) breaks the barrier, so the check can fail.
"""

from __future__ import annotations

import contextlib
import random
import threading
import tracemalloc
from types import SimpleNamespace

import pytest

from cuzk.curves import BLS12_381
from cuzk.prover import cuda_backend
from cuzk.prover.cpu_backend import CpuBackend
from cuzk.prover.groth16 import gpu_phase
from kernels.field import FR, ints_to_array
from tests.kernels.gpu.fake_cupy import groth16_key, install

R = BLS12_381.r
BOUND_S = 60.0          # a bound on waits that succeed (compilation under load included)
BROKEN_S = 3.0          # how long the negative control waits for a partner that cannot come


@pytest.fixture()
def fake(monkeypatch):
    return install(monkeypatch)


def _synthesis(key, seed: int):
    rng = random.Random(seed)
    n, v = key.sizes.domain_size, key.sizes.n_vars
    w = ints_to_array([1] + [rng.randrange(R) for _ in range(v - 1)], 8)
    a, b, c = (FR.to_mont(FR.from_ints([rng.randrange(R) for _ in range(n)])) for _ in range(3))
    return SimpleNamespace(abc=(a, b, c), witness=w)


def _parking_meter(barrier: threading.Barrier, release: threading.Barrier | None,
                   inside: list, step: str = "MSM A"):
    """A step meter that waits at ``barrier`` when the phase reaches ``step`` (and then at
    ``release``), recording the lanes inside the phase at that moment."""

    def meter(name: str):
        @contextlib.contextmanager
        def cm():
            if name == step:
                inside.append(threading.current_thread().name)
                barrier.wait()
                if release is not None:
                    release.wait()
            yield
        return cm()

    return meter


def _run(results: dict, errors: dict, name: str, fn):
    def target():
        try:
            results[name] = fn()
        except BaseException as exc:
            errors[name] = exc
    t = threading.Thread(target=target, name=name, daemon=True)
    t.start()
    return t


def _warm(lane, key):
    """Compile the CPU kernels and size the lane's staging before the measured part."""
    gpu_phase(key, _synthesis(key, 99), lane)


def _warm_lane_over(backend, key):
    """A new lane of ``backend`` with ``key`` resident on it and warmed."""
    backend.upload_key(key)
    lane = backend.lane()
    _warm(lane, key)
    return lane


def test_two_lanes_are_inside_the_gpu_phase_at_once_and_match_the_cpu_path(fake):
    backend, _ = fake
    key, _ = groth16_key(30, 2, 5)
    backend.upload_key(key)
    lanes = [backend.lane(), backend.lane()]
    assert lanes[0]._compute is not lanes[1]._compute and lanes[0]._copy is not lanes[1]._copy
    assert lanes[0]._msm is not lanes[1]._msm
    _warm(lanes[0], key)
    arrived = threading.Barrier(3, timeout=BOUND_S)
    release = threading.Barrier(3, timeout=BOUND_S)
    inside: list[str] = []
    for lane in lanes:
        lane.step_meter = _parking_meter(arrived, release, inside)
    synths = [_synthesis(key, 1), _synthesis(key, 2)]
    results: dict = {}
    errors: dict = {}
    threads = [_run(results, errors, f"lane-{i}", lambda i=i: gpu_phase(key, synths[i], lanes[i]))
               for i in range(2)]
    arrived.wait()                         # both phases are parked inside their MSM A step
    assert sorted(inside) == ["lane-0", "lane-1"]
    # The device lock is free meanwhile: another key uploads while both phases are inside.
    key2, _ = groth16_key(20, 1, 4, seed=7)
    up = _run(results, errors, "upload", lambda: backend.upload_key(key2))
    up.join(BOUND_S)
    assert not up.is_alive() and "upload" in results, errors
    release.wait()
    for t in threads:
        t.join(BOUND_S)
        assert not t.is_alive()
    assert not errors, errors
    cpu = CpuBackend()
    for i in range(2):
        want = gpu_phase(key, synths[i], cpu)
        got = results[f"lane-{i}"]
        assert (got.a, got.b1, got.c, got.h) == (want.a, want.b1, want.c, want.h)


def test_one_shared_lane_serialises_the_phases_so_the_check_above_can_fail(fake):
    """The negative control: both workers on one lane (one lock, one stream pair: the design
    before lanes) never have two phases inside at once, so the barrier breaks."""
    backend, _ = fake
    key, _ = groth16_key(30, 2, 5)
    lane = _warm_lane_over(backend, key)
    arrived = threading.Barrier(2, timeout=BROKEN_S)
    inside: list[str] = []
    lane.step_meter = _parking_meter(arrived, None, inside)
    results: dict = {}
    errors: dict = {}
    threads = [_run(results, errors, f"worker-{i}", lambda: gpu_phase(key, _synthesis(key, 3),
                                                                       lane))
               for i in range(2)]
    for t in threads:
        t.join(BOUND_S)
        assert not t.is_alive()
    assert set(errors) == {"worker-0", "worker-1"}
    assert all(isinstance(e, threading.BrokenBarrierError) for e in errors.values())
    assert len(inside) == 2                # each arrived, one after the other


def test_a_key_dropped_while_a_lane_uses_it_stays_usable_until_the_phase_ends(fake):
    """The engine pins a key for a partition's whole GPU phase, so it never drops one in use;
    the backend is safe anyway: the phase holds its own reference to the resident points."""
    backend, _ = fake
    key, _ = groth16_key(30, 2, 5)
    lane = _warm_lane_over(backend, key)
    arrived = threading.Barrier(2, timeout=BOUND_S)
    release = threading.Barrier(2, timeout=BOUND_S)
    lane.step_meter = _parking_meter(arrived, release, [], step="MSM B1")
    synth = _synthesis(key, 5)
    results: dict = {}
    errors: dict = {}
    t = _run(results, errors, "phase", lambda: gpu_phase(key, synth, lane))
    arrived.wait()
    backend.drop_key(key)
    assert backend.resident_bytes() == 0
    release.wait()
    t.join(BOUND_S)
    assert not t.is_alive() and not errors, errors
    want = gpu_phase(key, synth, CpuBackend())
    assert results["phase"].h == want.h and results["phase"].c == want.c


def test_device_oom_on_one_lane_frees_its_buffers_and_leaves_the_other_lane_alone(fake):
    """The failing lane's arrays are freed even though the engine keeps the exception (a
    failed job's record); the other lane's phase, parked meanwhile, completes correctly."""
    backend, pool = fake
    key, _ = groth16_key(30, 2, 5)
    backend.upload_key(key)
    lanes = [backend.lane(), backend.lane()]
    _warm(lanes[0], key)
    arrived = threading.Barrier(2, timeout=BOUND_S)
    release = threading.Barrier(2, timeout=BOUND_S)
    lanes[1].step_meter = _parking_meter(arrived, release, [], step="MSM C")
    synth = _synthesis(key, 8)
    results: dict = {}
    errors: dict = {}
    other = _run(results, errors, "other", lambda: gpu_phase(key, synth, lanes[1]))
    arrived.wait()                         # lane 1 is inside its phase, past H and the upload
    pool.track = []
    pool.limit = 4096                      # H fits (n = 32 rows), the MSM records do not
    frees_before = pool.freed
    try:
        with pytest.raises(cuda_backend.DeviceOutOfMemory, match="remains usable") as info:
            gpu_phase(key, _synthesis(key, 9), lanes[0])
    finally:
        pool.limit = None
    kept = info.value                      # held, as the engine's job record holds it
    allocated = pool.track
    pool.track = None
    assert len(allocated) > 4              # a, b, c, their limb-major copies, H, the witness
    assert [r for r in allocated if r() is not None] == [], "failed phase's arrays still alive"
    assert pool.freed > frees_before       # cached blocks went back to the driver
    assert backend.resident_bytes() > 0    # the resident key stayed
    release.wait()
    other.join(BOUND_S)
    assert not other.is_alive() and not errors, errors
    want = gpu_phase(key, synth, CpuBackend())
    assert results["other"].a == want.a and results["other"].h == want.h
    assert gpu_phase(key, synth, lanes[0]).b1 == want.b1   # the failed lane is usable again
    del kept


def test_two_lanes_together_stay_within_twice_the_working_bytes(fake):
    """Device memory with lanes: beside the resident key (and its NTT tables) a lane holds
    nothing between phases, and a phase at most ``working_bytes``; two lanes whose phases run
    together (both inside at once) peak within the sum. Allocations are traced on NumPy."""
    backend, _ = fake
    key, _ = groth16_key(1 << 10, 2, 10)
    backend.upload_key(key)
    lanes = [backend.lane(), backend.lane()]
    for lane in lanes:
        _warm(lane, key)
    synths = [_synthesis(key, 11), _synthesis(key, 12)]
    arrived = threading.Barrier(2, timeout=BOUND_S)
    for lane in lanes:
        lane.step_meter = _parking_meter(arrived, None, [], step="H")
    working = backend.working_bytes(key)
    results: dict = {}
    errors: dict = {}
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        threads = [_run(results, errors, f"lane-{i}",
                        lambda i=i: gpu_phase(key, synths[i], lanes[i])) for i in range(2)]
        for t in threads:
            t.join(BOUND_S)
        peak = tracemalloc.get_traced_memory()[1] - base
        after = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert not errors and all(not t.is_alive() for t in threads), errors
    assert peak <= 2 * working, (peak, working)
    assert after < working // 8, (after, working)   # nothing per lane stays behind


def test_one_lane_phase_peak_is_within_working_bytes(fake):
    backend, _ = fake
    key, _ = groth16_key(1 << 10, 2, 10)
    lane = _warm_lane_over(backend, key)
    synth = _synthesis(key, 13)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        gpu_phase(key, synth, lane)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    working = backend.working_bytes(key)
    assert peak <= working <= 2 * peak, (peak, working)


def test_uploads_stream_through_two_fixed_pinned_chunks(fake, monkeypatch):
    """A lane's pinned staging is two fixed chunks, whatever the array sizes; with chunks of 8
    rows every array is staged in several alternating pieces, and the fake's copies run only
    when the copy stream is waited on (as a DMA would), so refilling a chunk before its copy
    was done would show as a wrong result."""
    monkeypatch.setattr(cuda_backend, "STAGING_CHUNK_BYTES", 8 * 32)
    backend, _ = fake
    key, _ = groth16_key(30, 2, 5)
    backend.upload_key(key)
    lane = backend.lane()
    assert lane.staging_bytes == 0
    synth = _synthesis(key, 21)
    got = gpu_phase(key, synth, lane)
    want = gpu_phase(key, synth, CpuBackend())
    assert (got.a, got.b1, got.c, got.h) == (want.a, want.b1, want.c, want.h)
    assert lane.staging_bytes == 2 * 8 * 32
