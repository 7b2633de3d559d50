"""A NumPy-backed stand-in for the parts of CuPy that CudaBackend uses, and keys shaped like a
zkey's G1 sections: CudaBackend's host-side flow (lanes, streams, pinned staging, key residency,
out-of-memory handling) runs without a GPU, its kernels on the CPU target."""

from __future__ import annotations

import contextlib
import random
import time
import types
import weakref
from types import SimpleNamespace

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk.curves import BLS12_381
from cuzk.prover.points import g2_to_mont_array
from kernels.gpu.g1 import g1_to_affine_mont

R = BLS12_381.r


class Dev(np.ndarray):
    """A 'device array': NumPy memory with CuPy's set/get. ``set`` on a stream is a queued copy
    that happens when the stream is synchronised or waited on (as a DMA would), reading the
    source then: a source buffer overwritten before that is caught as wrong results."""

    # What a test of "the host never waits" counts: a device value read on the host (an
    # element, a reduction to a number, a conversion) and each copy back.
    host_reads = 0
    gets = 0

    def __getitem__(self, key):
        out = super().__getitem__(key)
        if not isinstance(out, np.ndarray):
            Dev.host_reads += 1
        return out

    def max(self, *args, **kwargs):
        out = super().max(*args, **kwargs)
        if not isinstance(out, np.ndarray):
            Dev.host_reads += 1
        return out

    def item(self, *args):
        Dev.host_reads += 1
        return super().item(*args)

    def __int__(self):
        Dev.host_reads += 1
        return super().__int__()

    def set(self, arr, stream=None):
        dst = np.asarray(self)
        if stream is None:
            np.copyto(dst, arr)
        else:
            stream.ops.append(lambda: np.copyto(dst, arr))

    def get(self, stream=None, out=None):
        Dev.gets += 1
        if out is None:
            return np.asarray(self).copy()
        np.copyto(out, np.asarray(self))
        return out


class Stream:
    """Queued copies run in order when the stream is synchronised, or up to an event."""

    ptr = 0

    def __init__(self):
        self.ops: list = []
        self.done = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def flush(self, upto: int | None = None):
        end = len(self.ops) if upto is None else upto
        while self.done < end:
            op, self.ops[self.done] = self.ops[self.done], None   # a done copy holds nothing
            op()
            self.done += 1

    def synchronize(self):
        self.flush()

    def wait_event(self, ev):
        assert ev.stream is not None, "compute stream waited on an event that was never recorded"
        ev.stream.flush(ev.mark)


class Event:
    def __init__(self, **kw):
        self.stream = None
        self.mark = 0
        self.at = 0.0

    @property
    def recorded(self):
        return self.stream is not None

    def record(self, stream):
        self.stream, self.mark = stream, len(stream.ops)
        self.at = time.perf_counter()      # kernels run at launch here: host time is theirs

    def synchronize(self):
        if self.stream is not None:
            self.stream.flush(self.mark)


class Pool:
    """The memory pool: ``limit`` (bytes per allocation) makes larger ``cupy.empty`` calls fail
    as CuPy's OutOfMemoryError does; ``track`` collects weak references to what is allocated."""

    def __init__(self):
        self.limit = None
        self.track: list | None = None
        self.freed = 0

    def free_all_blocks(self):
        self.freed += 1


def fake_cupy(pool: Pool) -> types.ModuleType:
    cp = types.ModuleType("cupy")

    def empty(shape, dtype=np.uint32):
        if pool.limit is not None and int(np.prod(shape)) * np.dtype(dtype).itemsize > pool.limit:
            raise type("OutOfMemoryError", (Exception,), {})(f"out of memory allocating {shape}")
        arr = np.empty(shape, dtype).view(Dev)
        if pool.track is not None:
            pool.track.append(weakref.ref(arr))
        return arr

    cp.empty = empty
    cp.asarray = lambda a, dtype=None: np.asarray(a, dtype).view(Dev)
    cp.concatenate = lambda arrays: np.concatenate(arrays).view(Dev)
    cp.zeros = lambda shape, dtype=float: np.zeros(shape, dtype).view(Dev)
    cp.arange = lambda *args, **kwargs: np.arange(*args, **kwargs).view(Dev)
    cp.get_default_memory_pool = lambda: pool
    cp.get_default_pinned_memory_pool = lambda: pool
    cp.cuda = SimpleNamespace(
        Stream=lambda non_blocking=True: Stream(),
        Event=Event,
        get_elapsed_time=lambda start, end: (end.at - start.at) * 1e3,
        Device=lambda i: contextlib.nullcontext(),
        alloc_pinned_memory=lambda n: bytearray(n),
        runtime=SimpleNamespace(memGetInfo=lambda: (1 << 30, 2 << 30), getDeviceCount=lambda: 1),
    )
    cp.__getattr__ = lambda name: getattr(np, name)   # sort, searchsorted, zeros, ...
    return cp


def install(monkeypatch, msm_precompute: str = "off") -> tuple[object, Pool]:
    """CudaBackend(0) over the fake CuPy, kernels on the CPU executor: (backend, pool)."""
    import sys

    from cuzk.prover import cuda_backend
    from kernels.gpu.cxx_kernels import host_kernels
    from kernels.gpu.cxx_msm import CxxMsm
    from kernels.gpu.launch import Executor
    from kernels.gpu.runtime import cpu_target

    pool = Pool()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(pool))
    monkeypatch.setattr(cuda_backend, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(cuda_backend, "_make_executor",
                        lambda cp, stream: Executor(cpu_target(), cp, stream=None))
    monkeypatch.setattr(cuda_backend, "_make_msm", lambda cp, stream: CxxMsm(host_kernels(), cp))
    monkeypatch.setattr(cuda_backend, "_make_cxx_kernels", lambda cp, stream: host_kernels())
    monkeypatch.setattr(cuda_backend.CudaBackend, "_device",
                        lambda self: contextlib.nullcontext())
    return cuda_backend.CudaBackend(0, msm_precompute=msm_precompute), pool


def groth16_key(n_vars: int, n_public: int, log_n: int, seed: int | None = None):
    """A key shaped like a zkey's G1 sections, with most A and some B1 points at infinity; it
    also answers what the CPU backend asks, as ``ProvingKey`` does (``msm_g1``, ``msm_b2`` over a
    G2 B section with some points at infinity, ``msm_points``, ``sizes.log_domain``)."""
    from cuzk.prover.msm import msm

    rng = random.Random(n_vars if seed is None else seed)
    n = 1 << log_n
    pts = [G1Point() * Scalar(rng.randrange(1, R)) for _ in range(min(n_vars + n, 64))]
    pts = [pts[i % len(pts)] for i in range(n_vars + n)]
    ident = G1Point.identity()
    a_pts = [p if i % 3 == 0 else ident for i, p in enumerate(pts[:n_vars])]
    b_pts = [ident if i % 4 == 1 else p for i, p in enumerate(pts[1:n_vars + 1])]
    c_pts = pts[2:n_vars - n_public + 1]
    h_pts = pts[n_vars:]
    group = {"A": a_pts, "B1": b_pts, "C": c_pts, "H": h_pts}
    sections = {s: g1_to_affine_mont(p) for s, p in group.items()}
    g2 = [G2Point() * Scalar(rng.randrange(1, R)) for _ in range(min(n_vars, 8))]
    b2_ident = G2Point.identity()
    b2_pts = [b2_ident if i % 4 == 1 else g2[i % len(g2)] for i in range(n_vars)]
    objs, present = {}, {}
    for s, p, ident_s in [*((s, p, ident) for s, p in group.items()), ("B2", b2_pts, b2_ident)]:
        objs[s] = np.empty(len(p), dtype=object)
        objs[s][:] = p
        present[s] = np.array([q != ident_s for q in p], dtype=bool)
    b2_rows = g2_to_mont_array(BLS12_381, b2_pts)
    key = SimpleNamespace(
        path="g.zkey",
        sizes=SimpleNamespace(domain_size=n, n_vars=n_vars, n_public=n_public, log_domain=log_n),
        g1_section_array=lambda s: sections[s],
        g2_section_array=lambda s="B2": b2_rows,
        msm_g1=lambda s, sc, threads=1: msm(objs[s], sc, G1Point.identity(), present[s]),
        msm_b2=lambda sc, threads=1: msm(objs["B2"], sc, G2Point.identity(), present["B2"]),
        msm_points=lambda s: int(present[s].sum()))
    return key, group
