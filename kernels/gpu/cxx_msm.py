"""The MSM driver over the C++ kernels (``kernels/gpu/cuda/msm.cu``), for G1 and G2.

Runs on the device (CuPy arrays, :class:`~kernels.gpu.cxx_kernels.DeviceKernels`) and on the
host twin (NumPy arrays, :class:`~kernels.gpu.cxx_kernels.HostKernels`) with the same code. The
steps are described in ``msm.cu``: a counting sort of the signed digits into buckets (no radix
sort), bucket sums in chunks of ``ACC_CHUNK`` records, chunk sums reduced ``RED_CHUNK`` at a time,
per-window segment sums, and Horner's rule over the window sums on the host (arkworks).

The host waits for the device four times an MSM (the record count, the chunk count, the number
of reduction rounds, the window sums), each a few microseconds of scalars.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from kernels.curves import BLS12_381
from kernels.gpu.g1 import mont_int, xyzz_to_g1

SCALAR_BITS = 255   # BLS12-381 r < 2^255
MIN_C, MAX_C = 4, 20
ACC_CHUNK = 64      # records (mixed additions) per thread in bucket accumulation
RED_CHUNK = 8       # XYZZ sums per thread in each reduction round
SEG = 32            # at most this many buckets per thread in the window reduction
SEG_THREADS = 1 << 16   # ... fewer when that leaves the device fewer threads than this
POOL_ROUND = 512    # CuPy's pool hands out blocks in multiples of 512 bytes
SCRATCH_BYTES = 1 << 20   # CuPy's own scan and reduction temporaries (block partials), bounded


def num_windows(c: int, scalar_bits: int = SCALAR_BITS) -> int:
    """Windows so that the final carry of the signed recoding always fits: c*nwin > bits."""
    return scalar_bits // c + 1


def choose_window(m: int, scalar_bits: int = SCALAR_BITS) -> int:
    """Window size c minimising nwin * (m + 1.4 * 2^c): the mixed additions of the buckets and
    the full additions of their reduction, 4 <= c <= 20."""
    best_c, best = MIN_C, float("inf")
    for c in range(MIN_C, MAX_C + 1):
        cost = num_windows(c, scalar_bits) * (m + 1.4 * (1 << c))
        if cost < best:
            best_c, best = c, cost
    return best_c


@dataclass(frozen=True)
class Curve:
    """What the driver needs of a group: kernel prefix, words per affine and XYZZ point."""

    name: str
    affine_words: int
    xyzz_words: int

    def identity(self) -> Any:
        return G1Point.identity() if self.name == "g1" else G2Point.identity()

    def point(self, xyzz: np.ndarray) -> Any:
        return xyzz_to_point(self, xyzz)


G1 = Curve("g1", 24, 48)
G2 = Curve("g2", 48, 96)

_P = BLS12_381.q


def _fq2_inv(a: tuple[int, int]) -> tuple[int, int]:
    t = pow(a[0] * a[0] + a[1] * a[1], -1, _P)
    return a[0] * t % _P, -a[1] * t % _P


def _fq2_mul(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0] * b[0] - a[1] * b[1]) % _P, (a[0] * b[1] + a[1] * b[0]) % _P


def xyzz_to_point(curve: Curve, p: np.ndarray) -> Any:
    """An XYZZ row (Montgomery limbs) -> arkworks point (unchecked: the kernels' own output)."""
    words = np.asarray(p, dtype=np.uint32).reshape(4, -1)
    if not words[2].any():
        return curve.identity()
    if curve.name == "g1":
        return xyzz_to_g1(words.reshape(-1))
    e = [(mont_int(w[:12]), mont_int(w[12:])) for w in words]
    x2 = _fq2_mul(e[0], _fq2_inv(e[2]))
    y2 = _fq2_mul(e[1], _fq2_inv(e[3]))
    raw = b"".join(v.to_bytes(48, "little") for v in (*x2, *y2))
    return G2Point.from_xy_bytes_unchecked_le(raw)


def combine_windows(curve: Curve, sums: np.ndarray, c: int) -> Any:
    """Horner over the window sums: sum_w 2^(c*w) * W_w."""
    acc = curve.identity()
    for w in range(sums.shape[0] - 1, -1, -1):
        for _ in range(c):
            acc = acc + acc
        acc = acc + curve.point(sums[w])
    return acc


def _starts(xp: Any, counts: Any) -> Any:
    """[0, cumsum(counts)] as uint32 (groups' first index)."""
    out = xp.zeros(counts.shape[0] + 1, dtype=np.uint32)
    out[1:] = xp.cumsum(counts, dtype=np.uint32)
    return out


def segment_size(half: int, nwin: int) -> int:
    """Buckets per thread in the window reduction: SEG, halved while that leaves fewer than
    SEG_THREADS threads (each thread's chain of additions is serial: short chains on many
    threads keep the device busy), at least 2; a power of two dividing ``half``."""
    seg = min(SEG, half)
    while seg > 2 and nwin * (half // seg) < SEG_THREADS:
        seg //= 2
    return seg


def _round_up(n: int) -> int:
    return -(-n // POOL_ROUND) * POOL_ROUND


def device_bytes_phases(m: int, curve: Curve = G1, c: int | None = None,
                        scalar_bits: int = SCALAR_BITS) -> dict[str, int]:
    """Device bytes alive in each phase of one MSM of m points beyond the resident points, each
    allocation rounded up as the pool does, for N = windows x m records (no zero digit: the
    bound) and P = N / ACC_CHUNK + buckets chunk sums (every bucket may end in a partial chunk).

    digits: scalars, counts, offsets, chunk counts and starts, the records (the scatter);
    accumulate: scalars, records, offsets, chunk starts, cursor (the counts array), chunk sums;
    reduce: chunk sums, the next round's sums (P / RED_CHUNK + buckets), both rounds' starts and
    the per-group temporaries (counts, chunk counts, and the cumsum); segments: the last round's
    sums and starts and the segment sums. Plus CuPy's scan scratch (SCRATCH_BYTES).
    """
    c = c or choose_window(m, scalar_bits)
    nwin = num_windows(c, scalar_bits)
    nb = nwin * (1 << (c - 1))
    n = nwin * m
    pt = curve.xyzz_words * 4
    parts = n // ACC_CHUNK + nb
    parts2 = parts // RED_CHUNK + nb
    nseg = nwin * ((1 << (c - 1)) // segment_size(1 << (c - 1), nwin))
    r = _round_up
    scalars, u32b, u32b1 = r(m * 32), r(nb * 4), r((nb + 1) * 4)
    phases = {
        "digits": scalars + 3 * u32b + 2 * u32b1 + r(n * 4),
        "accumulate": scalars + r(n * 4) + 2 * u32b1 + u32b + r(parts * pt),
        "reduce": scalars + r(parts * pt) + r(parts2 * pt) + 2 * u32b1 + 3 * u32b1,
        "segments": scalars + r(parts2 * pt) + u32b1 + r(nseg * pt),
    }
    return {k: v + SCRATCH_BYTES for k, v in phases.items()}


def device_bytes_estimate(m: int, curve: Curve = G1, c: int | None = None) -> int:
    """Peak device bytes of one MSM of m points beyond the resident points (for budgeting)."""
    return max(device_bytes_phases(m, curve, c).values())


class CxxMsm:
    """MSMs with the C++ kernels of one runner (device or host twin)."""

    def __init__(self, kernels: Any, xp: Any = None) -> None:
        self.k = kernels
        self.xp = kernels.xp if xp is None else xp
        # Called with each step's name once its work is queued (the device check records a
        # CUDA event there to time the steps); None: nothing is called.
        self.on_step: Any = None

    def _step(self, name: str) -> None:
        if self.on_step is not None:
            self.on_step(name)

    def window_sums(self, curve: Curve, points: Any, scalars: Any, c: int | None = None,
                    scalar_bits: int = SCALAR_BITS) -> tuple[Any, int]:
        """Per-window sums (nwin, xyzz words) in the runner's memory, and the window size.
        ``points``: (m, affine words) uint32 Montgomery rows; ``scalars``: (m, 8) uint32."""
        xp, k = self.xp, self.k
        m = int(scalars.shape[0])
        if int(points.shape[0]) != m:
            raise ValueError(f"MSM size mismatch: {points.shape[0]} points, {m} scalars")
        if points.shape[1] != curve.affine_words:
            raise ValueError(f"{curve.name} points need {curve.affine_words} words per row, "
                             f"got {points.shape[1]}")
        c = c or choose_window(m, scalar_bits)
        half = 1 << (c - 1)
        nwin = num_windows(c, scalar_bits)
        nb = nwin * half
        xw = curve.xyzz_words
        self._step("start")
        counts = xp.zeros(nb, dtype=np.uint32)
        k.launch("msm_digit_counts", m, scalars, c, nwin, counts)
        offsets = _starts(xp, counts)
        self._step("count")
        total = int(offsets[-1])
        if total == 0:
            return xp.zeros((nwin, xw), dtype=np.uint32), c
        chunks = counts + np.uint32(ACC_CHUNK - 1)
        chunks //= np.uint32(ACC_CHUNK)
        cstart = _starts(xp, chunks)
        del chunks
        counts[...] = offsets[:-1]                      # the scatter's cursors
        records = xp.empty(total, dtype=np.uint32)
        k.launch("msm_digit_scatter", m, scalars, c, nwin, counts, records)
        self._step("scatter")
        del counts
        nparts = int(cstart[-1])
        parts = xp.empty((nparts, xw), dtype=np.uint32)
        k.launch(f"{curve.name}_accumulate", nparts, records, offsets, cstart, nb, ACC_CHUNK,
                 points, parts)
        self._step("accumulate")
        del records, offsets
        per_bucket = int(xp.diff(cstart).max())
        held = [parts, cstart]                # _reduce owns them: each round frees the last
        del parts, cstart
        parts, pstart = self._reduce(curve, held, nb, per_bucket)
        self._step("reduce")
        seg = segment_size(half, nwin)
        nseg = nwin * (half // seg)
        segs = xp.empty((nseg, xw), dtype=np.uint32)
        k.launch(f"{curve.name}_segments", nseg, parts, pstart, half, seg, segs)
        self._step("segments")
        del parts, pstart
        sums = self._reduce_uniform(curve, segs, nwin, half // seg)
        self._step("windows")
        return sums, c

    def _reduce(self, curve: Curve, held: list[Any], ngroups: int,
                most: int) -> tuple[Any, Any]:
        """Sum XYZZ parts grouped by starts (``held = [parts, starts]``, ngroups + 1 starts,
        handed over so that each round's input is freed once the next exists) until every group
        has at most one; ``most`` is the largest group's size."""
        xp, k = self.xp, self.k
        parts, pstart = held.pop(0), held.pop(0)
        while most > 1:
            n2 = xp.diff(pstart)
            n2 += np.uint32(RED_CHUNK - 1)
            n2 //= np.uint32(RED_CHUNK)
            nstart = _starts(xp, n2)
            del n2
            total = int(nstart[-1])
            out = xp.empty((total, curve.xyzz_words), dtype=np.uint32)
            k.launch(f"{curve.name}_reduce", total, parts, pstart, nstart, ngroups, RED_CHUNK,
                     out)
            parts, pstart = out, nstart
            most = -(-most // RED_CHUNK)
        return parts, pstart

    def _reduce_uniform(self, curve: Curve, parts: Any, ngroups: int, per: int) -> Any:
        """Sum ``parts`` in ngroups consecutive groups of ``per`` each, to one per group: the
        sizes are known here, so no round waits for the device."""
        xp, k = self.xp, self.k
        while per > 1:
            n2 = -(-per // RED_CHUNK)
            pstart = xp.arange(ngroups + 1, dtype=np.uint32) * np.uint32(per)
            nstart = xp.arange(ngroups + 1, dtype=np.uint32) * np.uint32(n2)
            out = xp.empty((ngroups * n2, curve.xyzz_words), dtype=np.uint32)
            k.launch(f"{curve.name}_reduce", ngroups * n2, parts, pstart, nstart, ngroups,
                     RED_CHUNK, out)
            parts, per = out, n2
        return parts

    def msm(self, curve: Curve, points: Any, scalars: Any, c: int | None = None,
            scalar_bits: int = SCALAR_BITS) -> Any:
        """sum_i scalars[i] * points[i] as an arkworks point of ``curve``."""
        if int(scalars.shape[0]) == 0:
            return curve.identity()
        sums, c = self.window_sums(curve, points, scalars, c, scalar_bits)
        host = sums.get() if hasattr(sums, "get") else np.asarray(sums)
        return combine_windows(curve, host, c)
