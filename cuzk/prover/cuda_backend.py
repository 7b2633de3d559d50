"""The CUDA backend: H and all five MSMs on one device, proving-key points resident there.

A :class:`CudaBackend` is one device: the proving keys resident on it and the NTT tables of
their domains, shared by its *lanes*. A :class:`CudaLane` is one GPU worker's way onto the
device: its own compute and copy streams, pinned staging buffers and kernel executor. Two
lanes' GPU phases run at the same time; only key upload/drop and the resident-key table are
serialised, by the device lock, which a GPU phase holds just long enough to look its key up.

* ``upload_key`` copies the key's G1 sections A, B1, C, H and its G2 section B2 to the device
  once, as ``(n, 24)`` / ``(n, 48)`` uint32 affine Montgomery rows (the zkey bytes, no
  conversion), points at infinity compacted out (most of A and B1), builds the NTT tables of
  its domain, and keeps both until ``drop_key``. With ``[prover] msm_precompute`` a section's
  points come with precomputed window copies (``kernels/gpu/cxx_msm.py``: ``DevicePlan``, copy
  j = 2^(j * passes * c) * P, built on the host by the native extension and uploaded after the
  points), so its MSMs run ``passes`` bucket sets instead of one per window.
  :func:`key_device_bytes` says how many device bytes that takes before anything is uploaded (so
  the engine reserves them first), tables included.
* ``device_gpu_phase`` (what ``gpu_phase`` calls): a, b, c go host -> pinned buffer -> device on
  the lane's copy stream, chunk by chunk through two fixed pinned buffers, while its compute
  stream already transforms the previous one (events between the streams); per array: inverse
  NTT (DIF) ->
  odd-coset shift with 1/n -> NTT (DIT), then from_mont(a*b - c), which stays on the device as
  the H MSM's scalars. The witness is uploaded once (first) for the A, B1, C and B2 MSMs; each
  MSM gathers the scalars of the points kept at upload. Everything is queued before the host
  waits, once, for the five MSMs' window sums (one copy back); each step's device time comes
  from CUDA events. Only the five sums come back. ``h_evaluations``
  and ``msm_g1`` remain for callers that want one step.
* Kernels: the NTT in numba.cuda, the MSMs (G1 and G2) in CUDA C++ (``kernels/gpu/cuda``);
  ahead-of-time modules when ``CUZK_GPU_KERNELS`` names a bundle. Memory, streams and pinned
  buffers are CuPy's. Every CuPy allocation of a lane
  is made with one of the lane's streams current, so CuPy's pool hands a freed block out again
  only in that stream's order (its free lists are per stream).
* A device allocation failure raises :class:`DeviceOutOfMemory` after the failing lane's streams
  are drained, its step's arrays dropped and cached blocks returned to the driver: that
  partition fails; the other lanes, the resident keys and the backend stay as they are.

The backend itself is also a ComputeBackend (its calls run on a default lane), for callers that
use one device from one thread (the device check, the tests).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.errors import CuzkError
from kernels.gpu.cxx_ntt import CxxNtt
from kernels.gpu.ntt import NttEngine
from kernels.gpu.runtime import simulator_enabled

if TYPE_CHECKING:
    from cuzk.prover.keys import ProvingKey

G1_SECTIONS = ("A", "B1", "C", "H")
G2_SECTIONS = ("B2",)
SECTIONS = G1_SECTIONS + G2_SECTIONS
_FR_BYTES = 32
# Pinned staging per lane: two buffers of this size, whatever the partition size. Uploads go
# through them chunk by chunk (the host fills one while the other is copied), so a lane's pinned
# host memory is a small constant (2 x 16 MiB), not two copies of its largest array.
STAGING_CHUNK_BYTES = 16 << 20
_ROW_BYTES = {"A": 96, "B1": 96, "C": 96, "H": 96, "B2": 192}  # affine rows: 24 / 48 words
_INDEX_BYTES = 8         # an int64 index of a kept row


def _pow_table_rows(k: int) -> int:
    """Rows of the lo/hi tables ``kernels.gpu.ntt`` splits exponents below 2^k into."""
    kl = (k + 1) // 2
    return (1 << kl) + (1 << max(0, k - kl))


def ntt_table_bytes(n: int) -> int:
    """Device bytes of the NTT tables a domain of n keeps on its device while a key of that
    domain is resident: the twiddle table (n/2 Fr), the odd-coset lo/hi tables, and the lo/hi
    tables the twiddles are built from (alive while they are built)."""
    log_n = max(n, 2).bit_length() - 1
    return (n // 2 + _pow_table_rows(log_n) + _pow_table_rows(log_n - 1)) * _FR_BYTES


def h_device_bytes(n: int, twiddles: bool = True, ntt: str = "numba") -> int:
    """Device bytes alive at the peak of the H step on a domain of n.

    ``ntt="cxx"`` (``CUZK_GPU_NTT``): the C++ NTT transforms the uploaded rows in place, so a,
    b, c as uploaded (3n) and the output (n), plus the tables unless resident
    (kernels.gpu.cxx_ntt.h_device_bytes). Otherwise the numba NTT's:

    a, b, c as uploaded rows (3n) and limb-major copies (3n), the (n, 8) output (n) and, unless
    the domain's tables are already resident (``twiddles=False``: a key of this domain was
    uploaded), the twiddle table (n/2): 7.5 n Fr elements of 32 bytes. Plus the small power
    tables the twiddles and the coset shift are built from.
    """
    if ntt == "cxx":
        from kernels.gpu import cxx_ntt

        return 3 * n * _FR_BYTES + cxx_ntt.h_device_bytes(n, tables=twiddles)
    half = 1 << ((max(n, 2).bit_length()) // 2 + 1)
    tables = 4 * half * _FR_BYTES
    return (7 * n + (n // 2 if twiddles else 0)) * _FR_BYTES + tables


# Host rows per chunk while a section's window copies are built and uploaded: the host holds
# (copies - 1) x this many rows at a time, not the whole table.
TABLE_CHUNK_ROWS = 1 << 16


def msm_table_budget(mode: str, device_total: int | None) -> int | None:
    """Device bytes one key's MSM window tables may take (``[prover] msm_precompute``): "on" the
    device's total memory // MSM_PRECOMPUTE_BUDGET_SHARE (0 when the driver does not say);
    "off" and "auto" 0 (no table). On a device "auto" stays off until a device run shows the
    tables pay: the model saves 12-20% of the MSM's additions, while the copies are built on the
    host at key upload, under the device lock (seconds per 2^20 section), which stalls the
    device's other lanes meanwhile. 0 whatever the mode without the native extension, which
    builds the copies."""
    from cuzk.prover import native_msm
    from cuzk.settings_schema import MSM_PRECOMPUTE, MSM_PRECOMPUTE_BUDGET_SHARE

    if mode not in MSM_PRECOMPUTE:
        raise ValueError(f"msm_precompute must be one of {', '.join(MSM_PRECOMPUTE)}, "
                         f"got {mode!r}")
    if mode != "on" or not native_msm.available():
        return 0
    return (device_total or 0) // MSM_PRECOMPUTE_BUDGET_SHARE


def section_plans(kept: dict[str, int], table_budget: int | None) -> dict[str, Any]:
    """Each section's MSM plan (``cxx_msm.DevicePlan``) for its ``kept`` points: the key's
    table budget shared among the sections in proportion to their points' bytes (None: no
    limit, 0: no tables)."""
    from kernels.gpu.cxx_msm import G1, G2, device_plan

    size = {s: n * _ROW_BYTES[s] for s, n in kept.items()}
    total = sum(size.values())
    plans = {}
    for sec, n in kept.items():
        share = table_budget
        if table_budget is not None:
            share = table_budget * size[sec] // total if total else 0
        plans[sec] = device_plan(n, G2 if sec in G2_SECTIONS else G1, share)
    return plans


def key_device_bytes(domain_size: int, rows: dict[str, int], kept: dict[str, int],
                     table_budget: int | None = 0) -> int:
    """Device bytes a resident key takes, from its sizes alone (nothing uploaded): per section
    (the G1 ones and B2, those in ``rows``) the points not at infinity (``kept``) as affine
    rows with their window copies (:func:`section_plans` under ``table_budget``), the int64
    indices of the kept rows when some were dropped, plus the NTT tables of its domain."""
    return _key_bytes(domain_size, rows, kept, section_plans(kept, table_budget))


def _key_bytes(domain_size: int, rows: dict[str, int], kept: dict[str, int],
               plans: dict[str, Any]) -> int:
    total = ntt_table_bytes(domain_size)
    for sec in rows:
        total += plans[sec].copies * kept[sec] * _ROW_BYTES[sec]
        if kept[sec] != rows[sec]:
            total += kept[sec] * _INDEX_BYTES
    return total


def present_rows(points: np.ndarray) -> int:
    """Points not at infinity in a G1 section (all-zero rows are points at infinity)."""
    return int(np.count_nonzero(points.reshape(points.shape[0], -1).any(axis=1)))


class CudaError(CuzkError):
    """The CUDA backend cannot run (no usable device, missing CUDA libraries)."""


class DeviceOutOfMemory(CuzkError):
    """A device allocation failed; the partition fails, the device and worker stay usable."""

    def __init__(self, device: str, what: str, detail: str, free: int | None, total: int | None):
        mib = 1 << 20
        where = ""
        if free is not None and total:
            where = f" ({free // mib} MiB free of {total // mib} MiB)"
        super().__init__(
            f"{device}: out of device memory during {what}{where}: {detail}. "
            "This partition failed; the GPU worker remains usable."
        )
        self.device = device
        self.what = what


REQUIRE_GPU_ENV = "CUZK_REQUIRE_GPU"
_log = logging.getLogger(__name__)


def gpu_required() -> bool:
    """``CUZK_REQUIRE_GPU=1``: a missing device is an error, never a skip (the device check)."""
    return os.environ.get(REQUIRE_GPU_ENV, "").strip() == "1"
@functools.cache
def _probe() -> tuple[int, str | None]:
    """(usable devices, why none is usable); the reason is logged once per process."""
    if simulator_enabled():
        return 0, "NUMBA_ENABLE_CUDASIM=1 selects the numba CUDA simulator"
    try:
        import cupy
    except ModuleNotFoundError as exc:
        # Expected on a CPU-only host: said at INFO so every CPU command's stderr stays clean,
        # unless a GPU is required (the device check), where it is the failure's cause.
        return _unusable(f"CuPy is not installed ({exc})",
                         logging.WARNING if gpu_required() else logging.INFO)
    except Exception as exc:
        return _unusable(f"CuPy cannot be imported ({type(exc).__name__}: {exc})")
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        return _unusable(f"the CUDA driver reports no devices ({type(exc).__name__}: {exc})")
    if count == 0:
        return _unusable("the CUDA driver reports 0 devices")
    try:
        from numba import cuda

        if not cuda.is_available():
            return _unusable("numba-cuda finds no usable device or driver "
                             f"(numba.cuda.is_available() is False; {count} seen by CuPy)")
    except Exception as exc:
        return _unusable(f"numba-cuda cannot be used ({type(exc).__name__}: {exc})")
    return count, None


def _unusable(reason: str, level: int = logging.WARNING) -> tuple[int, str]:
    _log.log(level, "CUDA backend unusable: %s", reason)
    return 0, reason


def cuda_unavailable_reason() -> str | None:
    """Why no CUDA device is usable (None when one is)."""
    return _probe()[1]


def cuda_device_count() -> int:
    """Usable CUDA devices (0 when CuPy, numba-cuda or the driver is missing, or no GPU)."""
    return _probe()[0]


def cuda_available() -> bool:
    """Whether ``backend = "auto"`` should pick CUDA: a device, its driver, CuPy and numba-cuda."""
    return _probe()[0] > 0


def _is_oom(exc: BaseException) -> bool:
    name = type(exc).__name__
    text = str(exc)
    return (
        name == "OutOfMemoryError"
        or "CUDA_ERROR_OUT_OF_MEMORY" in text
        or "cudaErrorMemoryAllocation" in text
        or "out of memory" in text.lower()
    )


def _make_msm(cupy: Any, stream: Any) -> Any:
    """The MSM driver on ``stream``: the C++ kernels (a seam: CPU tests use the host twin)."""
    from kernels.gpu.cxx_kernels import device_kernels
    from kernels.gpu.cxx_msm import CxxMsm

    return CxxMsm(device_kernels(cupy, stream))


# --------------------------------------------------------------------------- NTT selection
# CUZK_GPU_NTT picks the H step's NTT: "numba" (the default) or "cxx" (kernels/gpu/cxx_ntt.py,
# the C++ kernels over field.cuh's Fr), read once per backend. The C++ one replaces numba once a
# device check shows it faster (issue 26, docs/gpu-check.md).
NTT_ENV = "CUZK_GPU_NTT"
NTT_KINDS = ("numba", "cxx")


def configured_ntt() -> str:
    kind = os.environ.get(NTT_ENV, "numba").strip() or "numba"
    if kind not in NTT_KINDS:
        raise CudaError(f"{NTT_ENV}={kind!r}: one of {', '.join(NTT_KINDS)}")
    return kind


def _make_cxx_kernels(cupy: Any, stream: Any) -> Any:
    """The C++ kernels on ``stream`` for the C++ NTT (a seam: CPU tests use the host twin)."""
    from kernels.gpu.cxx_kernels import device_kernels

    return device_kernels(cupy, stream)


def _make_ntt(kind: str, cupy: Any, stream: Any, tables: Any) -> Any:
    """The H step's NTT on ``stream`` with the device's shared tables: what ``_h_queue`` calls
    (``to_limb_major``, ``odd_coset``, ``ex.grid(k.abc, ...)``) and the key upload's
    ``twiddles`` / ``coset_tables``."""
    if kind == "cxx":
        return _SharedTableCxxNtt(_make_cxx_kernels(cupy, stream), cupy, tables)
    return _SharedTableNtt(_make_executor(cupy, stream), tables)


def _make_executor(cupy: Any, stream: Any) -> Any:
    """The kernel executor on ``stream`` (a seam: the CPU flow test swaps in the CPU target)."""
    from kernels.gpu.aot import configured_bundle
    from kernels.gpu.launch import Executor
    from kernels.gpu.runtime import cuda_target

    return Executor(cuda_target(), cupy, stream=stream, kernels=configured_bundle())


def _drop_failed_frames(exc: BaseException) -> None:
    """Free the locals (device arrays) of the frames a failed step left: the engine keeps a
    failed job's exception, and with it, otherwise, the step's buffers."""
    traceback.clear_frames(exc.__traceback__)


class _ResidentKey:
    """A key's sections on the device, points at infinity compacted out.

    ``sections[s]`` holds only the points not at infinity, ``plans[s].copies`` copies of them
    (copy 0 first, ``kept[s]`` rows each); ``rows[s]`` is the section's full row count (what its
    scalars are indexed by) and ``present[s]`` the device indices of the kept rows, or None
    when no point was dropped (the scalars are then used as they are). ``nbytes`` is
    :func:`key_device_bytes` of the key (its domain's NTT tables and window copies included).
    """

    def __init__(self, key: Any, sections: dict[str, Any], present: dict[str, Any],
                 rows: dict[str, int], domain_size: int, plans: dict[str, Any],
                 kept: dict[str, int]) -> None:
        self.key = key  # held so id(key) cannot be reused while its points are resident
        self.sections = sections
        self.present = present
        self.rows = rows
        self.domain_size = domain_size
        self.plans = plans
        self.kept = kept
        self.nbytes = _key_bytes(domain_size, rows, kept, plans)


class _NttTables:
    """A device's NTT tables, shared by its lanes: one twiddle table (the largest domain asked
    for) and the odd-coset tables per domain. A table is published only once built (the
    builder's stream synchronised) and is read-only from then on; a lane holds one only while it
    transforms with it, so ``trim`` frees what no resident key needs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.twiddles: tuple[Any, int] | None = None
        self.coset: dict[int, tuple[Any, Any, int]] = {}

    def trim(self, keep_logs: set[int]) -> None:
        with self.lock:
            top = max(keep_logs, default=0)
            if self.twiddles is not None and self.twiddles[1] > top:
                self.twiddles = None            # rebuilt at the size the next user needs
            for log_n in [k for k in self.coset if k not in keep_logs]:
                del self.coset[log_n]


class _SharedTableNtt(NttEngine):
    """NttEngine whose tables live in the device's :class:`_NttTables`, not in the engine (one
    copy per device however many lanes; counted with the resident keys)."""

    def __init__(self, ex: Any, tables: _NttTables) -> None:
        super().__init__(ex)
        self._tables = tables

    def twiddles(self, log_n: int) -> tuple[Any, int]:
        t = self._tables
        with t.lock:
            if t.twiddles is None or t.twiddles[1] < log_n:
                self._tw, self._log_tw = None, 0
                built = super().twiddles(log_n)
                self.ex.synchronize()           # built before another lane's stream reads it
                t.twiddles = built
            self._tw, self._log_tw = None, 0
            return t.twiddles

    def coset_tables(self, log_n: int) -> tuple[Any, Any, int]:
        t = self._tables
        with t.lock:
            if log_n not in t.coset:
                self._coset.pop(log_n, None)
                built = super().coset_tables(log_n)
                self.ex.synchronize()
                t.coset[log_n] = built
            self._coset.pop(log_n, None)
            return t.coset[log_n]


class _CxxGrid:
    """``ex.grid(name, n, *args)`` over the C++ kernels: the one executor call ``_h_queue`` makes
    (the join, ``k.abc``)."""

    def __init__(self, kernels: Any) -> None:
        self.kernels = kernels

    def grid(self, name: str, n: int, *args: Any) -> None:
        self.kernels.launch(name, n, *args)

    def synchronize(self) -> None:
        self.kernels.synchronize()


class _SharedTableCxxNtt(CxxNtt):
    """The C++ NTT (``CUZK_GPU_NTT=cxx``) as ``_h_queue`` calls it, its tables in the device's
    :class:`_NttTables` (row-major (n/2, 8) twiddles: the same bytes as numba's). Arrays stay
    row-major: ``to_limb_major`` is the identity and ``odd_coset`` transforms the uploaded rows
    in place."""

    def __init__(self, kernels: Any, xp: Any, tables: _NttTables) -> None:
        super().__init__(kernels, xp)
        self._tables = tables
        self.ex = _CxxGrid(kernels)
        self.k = types.SimpleNamespace(abc="ntt_abc")

    def to_limb_major(self, rows: Any) -> Any:
        return rows

    def twiddles(self, log_n: int) -> tuple[Any, int]:
        t = self._tables
        with t.lock:
            if t.twiddles is None or t.twiddles[1] < log_n:
                self._tw = None
                built = super().twiddles(log_n)
                self.kernels.synchronize()      # built before another lane's stream reads it
                t.twiddles = built
            self._tw = None
            return t.twiddles

    def coset_tables(self, log_n: int) -> tuple[Any, Any, int]:
        t = self._tables
        with t.lock:
            if log_n not in t.coset:
                self._coset.pop(log_n, None)
                built = super().coset_tables(log_n)
                self.kernels.synchronize()
                t.coset[log_n] = built
            self._coset.pop(log_n, None)
            return t.coset[log_n]


class CudaLane:
    """One GPU worker's way onto a device (ComputeBackend): its own compute and copy streams,
    pinned staging buffers and kernel executor, over the device's shared resident keys.

    One GPU phase at a time runs on a lane (its lock); phases on different lanes run together.
    A phase takes the device lock only to look its key up (uploading it if absent) and keeps a
    reference to the resident sections until its last kernel is done, so even a ``drop_key``
    racing the phase cannot free points under it (the engine never does that anyway: a key is
    pinned by every partition holding it, for the partition's whole GPU phase). Between phases
    a lane holds no device memory, only its pinned host staging.
    """

    name = "cuda"
    # The device check's baseline: wait for the device at the end of every step of a phase (as
    # the lane did before it queued the whole phase), to compare utilisation side by side.
    wait_each_step = False

    def __init__(self, backend: CudaBackend, index: int) -> None:
        self.backend = backend
        self.device = backend.device
        self.index = index
        self._cp = backend._cp
        self._lock = threading.Lock()
        with backend._device():
            self._compute = self._cp.cuda.Stream(non_blocking=True)
            self._copy = self._cp.cuda.Stream(non_blocking=True)
            self._ntt = _make_ntt(backend.ntt_kind, self._cp, self._compute, backend._tables)
            self._msm = _make_msm(self._cp, self._compute)
        self._pinned: list[np.ndarray] = []
        self._pinned_free: list[Any] = [None, None]   # per buffer: its last copy's event
        self._next_buf = 0
        # Optional ``name -> context manager`` around each step of device_gpu_phase.
        self.step_meter: Callable[[str], Any] | None = None
        self._steps_ms: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"CudaLane({self.device}, {self.index})"

    # -- the device's keys (ComputeBackend) ----------------------------------------------------
    def upload_key(self, key: ProvingKey) -> int:
        return self.backend.upload_key(key)

    def drop_key(self, key: ProvingKey) -> None:
        self.backend.drop_key(key)

    def working_bytes(self, key: ProvingKey) -> int:
        return self.backend.working_bytes(key)

    def step_estimates(self, key: ProvingKey) -> dict[str, int]:
        return self.backend.step_estimates(key)

    def memory_info(self) -> tuple[int | None, int | None]:
        return self.backend.memory_info()

    @property
    def staging_bytes(self) -> int:
        """Pinned host bytes this lane keeps for staging: 2 x STAGING_CHUNK_BYTES once used."""
        return sum(int(b.nbytes) for b in self._pinned)

    # -- plumbing -----------------------------------------------------------------------------
    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """The lane (one phase at a time), the device current, the compute stream current (CuPy
        ops and allocations are ordered with the kernels on it); an allocation failure becomes
        DeviceOutOfMemory. The device lock is not held: other lanes run meanwhile."""
        with self._lock, self.backend._device():
            try:
                with self._compute:
                    yield
            except BaseException as exc:
                _drop_failed_frames(exc)
                if isinstance(exc, CuzkError) or not _is_oom(exc):
                    raise
                self._recover()
                free, total = self.backend.memory_info()
                raise DeviceOutOfMemory(
                    self.device, what, f"{type(exc).__name__}: {exc}", free, total
                ) from exc

    def _recover(self) -> None:
        """After an allocation failure on this lane: drain its own streams (other lanes keep
        running) and hand the pool's cached, unused blocks back to the driver. Resident keys,
        other lanes' buffers and the pinned staging stay."""
        for s in (self._compute, self._copy):
            with suppress(Exception):
                s.synchronize()
        self._cp.get_default_memory_pool().free_all_blocks()

    def _staging(self) -> list[np.ndarray]:
        """The lane's two pinned staging buffers (allocated once, on first use)."""
        if not self._pinned:
            self._pinned = [
                np.frombuffer(self._cp.cuda.alloc_pinned_memory(STAGING_CHUNK_BYTES), np.uint8,
                              STAGING_CHUNK_BYTES)
                for _ in range(2)
            ]
            self._pinned_free = [None, None]
        return self._pinned

    def _upload_rows(self, host: np.ndarray) -> tuple[Any, Any]:
        """Async copy of (n, k) uint32 rows to the device; returns (device array, event).

        The rows go through the two pinned buffers in chunks, alternating: before the host
        refills a buffer it waits for the event recorded after that buffer's last copy, so a
        copy never reads a buffer being overwritten, and the host fills one chunk while the
        copy stream moves the other. The device array is allocated on the copy stream and must
        stay referenced until the compute stream has finished with it (the pool may hand its
        block out again, on the copy stream, once freed): every caller synchronises the compute
        stream before dropping it. The event marks the whole copy; the compute stream waits on
        it before reading the array.
        """
        cp = self._cp
        bufs = self._staging()
        host = np.ascontiguousarray(host, dtype=np.uint32)
        flat = host.reshape(-1)
        words = STAGING_CHUNK_BYTES // 4
        with self._copy:
            dev = cp.empty(host.shape, dtype=np.uint32)
            dev_flat = dev.reshape(-1)
            for start in range(0, flat.size, words):
                part = flat[start:start + words]
                slot = self._next_buf
                self._next_buf ^= 1
                busy = self._pinned_free[slot]
                if busy is not None:
                    busy.synchronize()           # that buffer's previous copy has finished
                view = bufs[slot][: part.nbytes].view(np.uint32)
                np.copyto(view, part)
                dev_flat[start:start + part.size].set(view, stream=self._copy)
                done = cp.cuda.Event(block=False, disable_timing=True)
                done.record(self._copy)
                self._pinned_free[slot] = done
        ev = cp.cuda.Event(block=False, disable_timing=True)
        ev.record(self._copy)
        return dev, ev

    def warmup(self) -> float:
        """Compile (JIT) or load (ahead-of-time bundle) every kernel now instead of inside the
        first partition's GPU phase; returns the seconds it took. Kernels are per process, so
        one lane's warm-up serves every lane. Safe to call more than once."""
        import time

        from cuzk.curves import BLS12_381
        from cuzk.prover.points import g2_to_mont_array
        from kernels.field import FR, ints_to_array
        from kernels.gpu.g1 import g1_to_affine_mont

        t0 = time.perf_counter()
        n = 4
        a = FR.to_mont(FR.from_ints(range(1, n + 1)))
        self.h_evaluations(None, a, a, a)  # type: ignore[arg-type]
        from kernels.gpu.cxx_msm import G1, G2

        m = 130  # > 2 accumulation chunks in one bucket, so the reduction kernel runs too
        g2 = g2_to_mont_array(BLS12_381, [G2Point()]).reshape(1, 48)
        with self._guard("warm-up"):
            sc = self._cp.asarray(ints_to_array([1] * m, 8))
            for curve, row in ((G1, g1_to_affine_mont([G1Point()]).reshape(1, 24)), (G2, g2)):
                self._msm.msm(curve, self._cp.asarray(np.tile(row, (m, 1))), sc)
            self._compute.synchronize()
        return time.perf_counter() - t0

    # -- the GPU phase -------------------------------------------------------------------------
    def _h_queue(self, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                 inputs_at: Callable[[], None] | None = None) -> tuple[Any, list[Any]]:
        """Queue H on the compute stream: (n, 8) rows of H (normal form) left on the device, and
        the uploaded a, b, c, which the caller keeps until the compute stream has read them
        (they are the copy stream's blocks). Each array's transforms are queued before the next
        is staged, so the host's staging and the copies overlap the previous array's NTTs.
        ``inputs_at`` is called once the compute stream has been told to wait for a."""
        n = a.shape[0]
        ntt = self._ntt
        done: list[Any] = []
        uploaded: list[Any] = []
        for host in (a, b, c):
            dev, ev = self._upload_rows(host)
            uploaded.append(dev)
            self._compute.wait_event(ev)
            if inputs_at is not None and len(uploaded) == 1:
                inputs_at()
            x = ntt.to_limb_major(dev)
            ntt.odd_coset(x)
            done.append(x)
        out = self._cp.empty((n, 8), dtype=np.uint32)
        ntt.ex.grid(ntt.k.abc, n, done[0], done[1], done[2], out)
        return out, uploaded

    def h_evaluations(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray
    ) -> np.ndarray:
        """(a*b - c) on the odd coset, (n, 8) normal form; a, b, c Montgomery on the domain."""
        n = _check_abc(a, b, c)
        with self._guard(f"H evaluation (domain 2^{n.bit_length() - 1})"):
            return self._h_host(a, b, c)

    def _h_host(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        out, uploaded = self._h_queue(a, b, c)
        host = out.get(stream=self._compute)
        self._compute.synchronize()
        del uploaded
        return np.asarray(host)

    def _queue_msm(self, resident: _ResidentKey, section: str, scalars: Any) -> Any:
        """Queue the MSM of a resident section with device scalars indexed like the full
        section (points at infinity were compacted out: their scalars are never gathered)."""
        from kernels.gpu.cxx_msm import G1, G2, QueuedMsm

        curve = G2 if section in G2_SECTIONS else G1
        points = resident.sections[section]
        if resident.kept[section] == 0:
            return QueuedMsm(curve, None, 1)
        idx = resident.present[section]
        sc = scalars if idx is None else scalars[idx]
        return self._msm.queue(curve, points, sc, resident.plans[section])

    def _results(self, queued: list[Any], clock: _StepClock | None = None) -> list[Any]:
        """The queued MSMs' sums: their window sums copied back at once (the phase's one wait
        for the device), then combined on the host."""
        flat = self._msm.gather(queued)
        host = None
        if flat is not None:
            if clock is not None:
                clock.start("copy back", self._compute)
            host = flat.get(stream=self._compute)
            if clock is not None:
                clock.end("copy back")
        self._compute.synchronize()
        t0 = time.perf_counter()
        out: list[Any] = self._msm.combine(queued, host)
        if clock is not None:
            clock.host("combine", time.perf_counter() - t0)
        return out

    def msm_g1(self, key: ProvingKey, section: str, scalars: np.ndarray) -> G1Point:
        """sum scalars[i] * section[i] on the device with the key's resident points."""
        if section not in G1_SECTIONS:
            raise ValueError(f"unknown G1 section {section!r}")
        resident = self.backend._resident(key)
        m = resident.rows[section]
        if scalars.shape != (m, 8):
            raise ValueError(f"MSM {section}: {m} points but scalars of shape {scalars.shape}")
        if m == 0:
            return G1Point.identity()
        with self._guard(f"MSM over section {section}"):
            return self._msm_host(resident, section, scalars)

    def _msm_host(self, resident: _ResidentKey, section: str, scalars: np.ndarray) -> G1Point:
        dev, ev = self._upload_rows(scalars)
        self._compute.wait_event(ev)
        total: G1Point = self._results([self._queue_msm(resident, section, dev)])[0]
        return total

    @contextmanager
    def _step(self, clock: _StepClock, name: str, stream: Any = None) -> Iterator[None]:
        """One step of the GPU phase: timed on the device by ``clock`` (events around the work
        it queues), and the ``step_meter`` around it when set (the device check's memory
        figures: the pool's accounting follows the queueing)."""
        clock.start(name, stream or self._compute)
        try:
            if self.step_meter is None:
                yield
            else:
                with self.step_meter(name):
                    yield
        finally:
            clock.end(name)
            if self.wait_each_step:
                self._compute.synchronize()

    def phase_steps_ms(self) -> dict[str, float]:
        """Milliseconds of each step of this lane's last GPU phase: "upload" (the copy stream),
        "H" and "MSM A" ... "MSM B2" (device time between events on the compute stream), "copy
        back" and "combine" (Horner on the host, its wall time)."""
        return dict(self._steps_ms)

    def device_gpu_phase(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray, witness: np.ndarray
    ) -> tuple[G1Point, G1Point, G1Point, G1Point, G2Point]:
        """The whole GPU phase with its data on the device: a, b, c and the witness are uploaded
        once each, H and the MSM scalars never leave the device, and only the five sums (A, B1,
        C, H in G1 and B2 in G2) come back. Scalars of points at infinity are never gathered.

        Runs on this lane without the device lock; the resident key is referenced until the
        phase's last kernel has finished (the engine also pins the key for the whole phase).
        """
        n = _check_abc(a, b, c)
        v = _witness_rows(key)
        if witness.shape != (v, 8):
            raise ValueError(f"witness: expected ({v}, 8) uint32, got {witness.shape}")
        n_pub = key.sizes.n_public
        resident = self.backend._resident(key)
        for sec, rows in (("A", v), ("B1", v), ("C", v - n_pub - 1), ("H", n), ("B2", v)):
            if resident.rows[sec] != rows:
                raise ValueError(f"section {sec} has {resident.rows[sec]} points, "
                                 f"expected {rows}")
        with self._guard(f"GPU phase (domain 2^{n.bit_length() - 1})"):
            return self._phase(resident, n_pub, a, b, c, witness)

    def _phase(self, resident: _ResidentKey, n_pub: int, a: np.ndarray, b: np.ndarray,
               c: np.ndarray, witness: np.ndarray
               ) -> tuple[G1Point, G1Point, G1Point, G1Point, G2Point]:
        """The phase's device arrays live in this frame only, so a failure frees them.

        Everything is queued before the host waits once, for the five sums: the witness and a,
        b, c are staged while the compute stream works, H and the five MSMs follow each other
        on the compute stream with no host round trip between them (the MSM driver sizes its
        arrays by their bounds), and a lane's host work (staging, launches, Horner) overlaps the
        other lanes' kernels."""
        self._steps_ms = {}
        clock = _StepClock(self._cp)
        clock.start("upload", self._copy)
        w_dev, w_ev = self._upload_rows(witness)          # first: alive until the MSMs end
        with self._step(clock, "H"):
            h_dev, uploaded = self._h_queue(
                a, b, c, inputs_at=lambda: clock.start("H", self._compute))
            clock.end("upload")
        h_done = self._cp.cuda.Event(block=False, disable_timing=True)
        h_done.record(self._compute)
        # a, b, c are the copy stream's blocks: nothing the copy stream queues from here on may
        # reuse them before H has read them.
        self._copy.wait_event(h_done)
        del uploaded
        self._compute.wait_event(w_ev)
        queued = []
        for sec, sc in (("A", w_dev), ("B1", w_dev), ("C", w_dev[n_pub + 1:]), ("H", h_dev),
                        ("B2", w_dev)):
            with self._step(clock, f"MSM {sec}"):
                queued.append(self._queue_msm(resident, sec, sc))
        out = self._results(queued, clock)
        self._steps_ms = clock.milliseconds()
        return out[0], out[1], out[2], out[3], out[4]


class _StepClock:
    """Device time of each step of a phase: an event recorded on the step's stream before and
    after the work it queues (read once the phase has waited for its results), and host time
    for the host's own steps. Steps may overlap (the uploads run beside H)."""

    def __init__(self, cp: Any) -> None:
        self._cp = cp
        self._open: dict[str, tuple[Any, Any]] = {}
        self._done: dict[str, tuple[Any, Any]] = {}
        self._host: dict[str, float] = {}

    def _event(self, stream: Any) -> Any:
        ev = self._cp.cuda.Event()
        ev.record(stream)
        return ev

    def start(self, name: str, stream: Any) -> None:
        """``name`` starts here (again, if it had: its stream was told to wait for its input)."""
        self._open[name] = (stream, self._event(stream))

    def end(self, name: str) -> None:
        stream, start = self._open.pop(name)
        self._done[name] = (start, self._event(stream))

    def host(self, name: str, seconds: float) -> None:
        self._host[name] = seconds * 1e3

    def milliseconds(self) -> dict[str, float]:
        """Each step's milliseconds (every event has completed: call after the wait)."""
        out = {name: float(self._cp.cuda.get_elapsed_time(s, e))
               for name, (s, e) in self._done.items()}
        out.update(self._host)
        return {k: round(v, 3) for k, v in out.items()}


class CudaBackend:
    """ComputeBackend on CUDA device ``device_index`` (docs/interfaces.md, "Compute backends").

    The device: resident keys and their NTT tables (shared by every lane), the device lock
    around the resident-key table, uploads and drops, and ``lane()`` for each worker. Its own
    ComputeBackend calls run on a default lane.
    """

    name = "cuda"

    def __init__(self, device_index: int = 0, msm_precompute: str = "off") -> None:
        count = cuda_device_count()
        if count == 0:
            raise CudaError(
                "no usable CUDA device (needs an NVIDIA driver, cupy-cuda13x and numba-cuda): "
                f"{cuda_unavailable_reason()}"
            )
        if not 0 <= device_index < count:
            raise CudaError(f"CUDA device {device_index} does not exist ({count} visible)")
        import cupy

        self.device_index = device_index
        self.device = f"cuda:{device_index}"
        self._cp = cupy
        self.msm_precompute = msm_precompute
        self._lock = threading.RLock()   # the device lock: resident keys, uploads, drops
        self._keys: dict[int, _ResidentKey] = {}
        self._tables = _NttTables()
        self.ntt_kind = configured_ntt()     # CUZK_GPU_NTT, read once: lanes and keys share it
        self._lanes: list[CudaLane] = []
        with self._device():
            self._key_stream = cupy.cuda.Stream(non_blocking=True)
            self._key_ntt = _make_ntt(self.ntt_kind, cupy, self._key_stream, self._tables)
        # Per key, for its MSM window copies (msm_table_budget): fixed now, so the figure the
        # engine reserves before an upload is the one the upload makes.
        self.msm_table_budget = msm_table_budget(msm_precompute, self.memory_info()[1])
        self.default_lane = self.lane()

    def lane(self) -> CudaLane:
        """A new lane on this device (one per GPU worker): its own streams, staging, executor."""
        with self._lock:
            lane = CudaLane(self, len(self._lanes))
            self._lanes.append(lane)
            return lane

    @property
    def lanes(self) -> list[CudaLane]:
        return list(self._lanes)

    # -- plumbing -----------------------------------------------------------------------------
    @contextmanager
    def _device(self) -> Iterator[None]:
        from numba import cuda

        with self._cp.cuda.Device(self.device_index), cuda.gpus[self.device_index]:
            yield

    def memory_info(self) -> tuple[int | None, int | None]:
        """(free, total) device bytes, as the driver reports them."""
        try:
            with self._device():
                free, total = self._cp.cuda.runtime.memGetInfo()
            return int(free), int(total)
        except Exception:
            return None, None

    # -- the default lane (ComputeBackend) ----------------------------------------------------
    @property
    def step_meter(self) -> Callable[[str], Any] | None:
        return self.default_lane.step_meter

    @step_meter.setter
    def step_meter(self, meter: Callable[[str], Any] | None) -> None:
        self.default_lane.step_meter = meter

    def warmup(self) -> float:
        return self.default_lane.warmup()

    def h_evaluations(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray
    ) -> np.ndarray:
        return self.default_lane.h_evaluations(key, a, b, c)

    def msm_g1(self, key: ProvingKey, section: str, scalars: np.ndarray) -> G1Point:
        return self.default_lane.msm_g1(key, section, scalars)

    def device_gpu_phase(
        self, key: ProvingKey, a: np.ndarray, b: np.ndarray, c: np.ndarray, witness: np.ndarray
    ) -> tuple[G1Point, G1Point, G1Point, G1Point, G2Point]:
        return self.default_lane.device_gpu_phase(key, a, b, c, witness)

    def phase_steps_ms(self) -> dict[str, float]:
        return self.default_lane.phase_steps_ms()

    # -- keys ---------------------------------------------------------------------------------
    def _resident(self, key: ProvingKey) -> _ResidentKey:
        """The key's resident sections (uploaded now if absent), looked up under the device
        lock; the caller's reference keeps them alive whatever happens to the table."""
        with self._lock:
            resident = self._keys.get(id(key))
        if resident is None:
            self.upload_key(key)
            with self._lock:
                resident = self._keys[id(key)]
        return resident

    def upload_key(self, key: ProvingKey) -> int:
        """Make A, B1, C, H and the domain's NTT tables resident (once per key); returns the
        device bytes they use, which :meth:`key_device_bytes` gives before the upload.

        Under the device lock, on the device's key stream (lanes keep running). The backend
        keeps a reference to ``key`` until ``drop_key``: evict through drop_key.
        """
        what = f"upload of proving key {getattr(key, 'path', '')}"
        with self._lock, self._device():
            resident = self._keys.get(id(key))
            if resident is not None:
                return resident.nbytes
            try:
                with self._key_stream:
                    resident = self._upload(key)
            except BaseException as exc:
                _drop_failed_frames(exc)
                if isinstance(exc, CuzkError) or not _is_oom(exc):
                    raise
                with suppress(Exception):
                    self._key_stream.synchronize()
                self._cp.get_default_memory_pool().free_all_blocks()
                free, total = self.memory_info()
                raise DeviceOutOfMemory(
                    self.device, what, f"{type(exc).__name__}: {exc}", free, total
                ) from exc
            self._keys[id(key)] = resident
            return resident.nbytes

    def _upload(self, key: ProvingKey) -> _ResidentKey:
        sections: dict[str, Any] = {}
        present: dict[str, Any] = {}
        nrows: dict[str, int] = {}
        kept: dict[str, int] = {}
        compact: dict[str, np.ndarray] = {}
        for sec in SECTIONS:
            rows = points_rows(_section_array(key, sec))
            nrows[sec] = int(rows.shape[0])
            keep = rows.any(axis=1)              # all-zero rows are points at infinity
            if keep.all():
                present[sec] = None
            else:
                idx = np.flatnonzero(keep).astype(np.int64)
                rows = np.ascontiguousarray(rows[idx])
                present[sec] = self._cp.asarray(idx)
            kept[sec] = int(rows.shape[0])
            compact[sec] = rows
        plans = section_plans(kept, self.msm_table_budget)
        for sec in SECTIONS:
            sections[sec] = self._upload_section(compact.pop(sec), plans[sec])
        n = int(key.sizes.domain_size)
        log_n = n.bit_length() - 1
        self._key_ntt.twiddles(log_n)
        self._key_ntt.coset_tables(log_n)
        self._key_stream.synchronize()
        return _ResidentKey(key, sections, present, nrows, n, plans, kept)

    def _upload_section(self, rows: np.ndarray, plan: Any) -> Any:
        """A section's kept rows on the device, then its window copies 1.. (``plan.copies``
        copies, m rows each, one (copies * m, words) array): the copies are built on the host by
        the native extension (:func:`cuzk.prover.native_msm.fill_copies`, every core) chunk by
        chunk, so the host holds (copies - 1) x TABLE_CHUNK_ROWS rows at a time."""
        m = int(rows.shape[0])
        dev = self._cp.empty((plan.copies * m, rows.shape[1]), dtype=np.uint32)
        if m == 0:
            return dev
        dev[:m].set(rows, stream=self._key_stream)
        if plan.copies == 1:
            return dev
        from cuzk.prover import native_msm

        threads = os.cpu_count() or 1
        for lo in range(0, m, TABLE_CHUNK_ROWS):
            hi = min(m, lo + TABLE_CHUNK_ROWS)
            copies = native_msm.fill_copies(rows[lo:hi], plan.copies, plan.shift, threads)
            for j in range(1, plan.copies):
                dev[j * m + lo:j * m + hi].set(copies[j - 1], stream=self._key_stream)
            self._key_stream.synchronize()      # the copies are read before the next chunk
        return dev

    def drop_key(self, key: ProvingKey) -> None:
        """Forget the key's sections and the NTT tables no other resident key needs. A lane
        still inside a phase with this key keeps its reference (the memory goes after it)."""
        with self._lock, self._device():
            if self._keys.pop(id(key), None) is not None:
                self._tables.trim({k.domain_size.bit_length() - 1 for k in self._keys.values()})
                self._cp.get_default_memory_pool().free_all_blocks()

    def resident_bytes(self) -> int:
        """Device bytes held by resident keys on this device (their NTT tables included)."""
        with self._lock:
            return sum(k.nbytes for k in self._keys.values())

    def key_device_bytes(self, key: ProvingKey) -> int:
        """Device bytes :meth:`upload_key` makes resident for ``key``, known without uploading
        (from the host arrays), so the engine can reserve them first."""
        with self._lock:
            resident = self._keys.get(id(key))
        if resident is not None:
            return resident.nbytes
        rows = {s: int(_section_array(key, s).shape[0]) for s in SECTIONS}
        kept = {s: self._present_count(key, s) for s in SECTIONS}
        return key_device_bytes(int(key.sizes.domain_size), rows, kept, self.msm_table_budget)

    def working_bytes(self, key: ProvingKey) -> int:
        """Peak transient device bytes of one partition's GPU phase on one lane, for budgeting:
        the witness (uploaded first) and H, then the witness and H held on the device while the
        largest MSM runs (see
        :meth:`step_estimates`). Nothing else is per lane: the NTT tables are the key's, and a
        lane holds no device memory between phases, so lanes running together need at most
        the sum of their partitions' working bytes beside the resident keys."""
        steps = self.step_estimates(key)
        n, v = key.sizes.domain_size, _witness_rows(key)
        held = (n + v) * _FR_BYTES
        witness = v * _FR_BYTES           # uploaded first: alive through H
        return max(witness + steps["H"], held + max(steps[f"MSM {s}"] for s in SECTIONS))

    def step_estimates(self, key: ProvingKey) -> dict[str, int]:
        """Device bytes each step of :meth:`CudaLane.device_gpu_phase` needs beyond what is in
        use when it starts: "H", and "MSM <section>" over the section's points not at infinity
        with the section's plan (its window copies are resident with the key). The domain's
        NTT tables are resident with the key, so H does not count them."""
        from kernels.gpu.cxx_msm import G1, G2, device_bytes_estimate

        out = {"H": h_device_bytes(key.sizes.domain_size, twiddles=False, ntt=self.ntt_kind)}
        with self._lock:
            resident = self._keys.get(id(key))
        if resident is not None:
            plans = resident.plans
        else:
            plans = section_plans({s: self._present_count(key, s) for s in SECTIONS},
                                  self.msm_table_budget)
        for sec in SECTIONS:
            m = max(1, self._present_count(key, sec))
            out[f"MSM {sec}"] = device_bytes_estimate(m, G2 if sec in G2_SECTIONS else G1,
                                                      plans[sec])
        return out

    def _present_count(self, key: ProvingKey, section: str) -> int:
        with self._lock:
            resident = self._keys.get(id(key))
        if resident is not None:
            return resident.kept[section]
        return present_rows(_section_array(key, section))


def points_rows(section: np.ndarray) -> np.ndarray:
    """A zkey point section -> contiguous (n, words) uint32 rows (24 words for G1, 48 for G2)."""
    arr = np.ascontiguousarray(section, dtype=np.uint32)
    return arr.reshape(arr.shape[0], -1)


def _section_array(key: Any, section: str) -> np.ndarray:
    """The raw Montgomery rows of a key section: (n, 2, 12) for G1, (n, 2, 2, 12) for B2."""
    rows: np.ndarray = (key.g2_section_array(section) if section in G2_SECTIONS
                        else key.g1_section_array(section))
    return rows


def _check_abc(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> int:
    n = int(a.shape[0])
    for name, x in (("a", a), ("b", b), ("c", c)):
        if x.shape != (n, 8):
            raise ValueError(f"{name}: expected ({n}, 8) uint32, got {x.shape}")
    if n < 2 or n & (n - 1):
        raise ValueError(f"domain size {n} is not a power of two >= 2")
    return n


def _witness_rows(key: Any) -> int:
    """Witness length of a key: A and B1 have one row per variable."""
    sizes = key.sizes
    n_vars = getattr(sizes, "n_vars", None)
    return int(n_vars) if n_vars is not None else int(key.g1_section_array("A").shape[0])


if TYPE_CHECKING:  # mypy checks the device backend against the seams the prover relies on
    from cuzk.prover.backend import ComputeBackend, DeviceMemory, DevicePhase

    _as_compute: type[ComputeBackend] = CudaBackend
    _as_device_phase: type[DevicePhase] = CudaBackend
    _as_device_memory: type[DeviceMemory] = CudaBackend
