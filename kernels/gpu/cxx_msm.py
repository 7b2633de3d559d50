"""The MSM driver over the C++ kernels (``kernels/gpu/cuda/msm.cu``), for G1 and G2.

Runs on the device (CuPy arrays, :class:`~kernels.gpu.cxx_kernels.DeviceKernels`) and on the
host twin (NumPy arrays, :class:`~kernels.gpu.cxx_kernels.HostKernels`) with the same code. The
steps are described in ``msm.cu``: a counting sort of the signed digits into buckets (no radix
sort), bucket sums in chunks of ``ACC_CHUNK`` records, chunk sums reduced ``RED_CHUNK`` at a time,
per-bucket-set segment sums, and Horner's rule over the set sums on the host (arkworks).

A :class:`DevicePlan` says how: windows of ``c`` bits and ``copies`` of the points (a resident
key's precomputed window table, copy j = 2^(j * passes * c) * P, :func:`device_plan`), so the
windows share ``passes`` bucket sets; one copy is the plain MSM (a set per window).

The host never waits for the device while an MSM is queued: every array is allocated at its
bound (no zero digit, every bucket ending in a partial chunk: the sizes the memory estimate
counts), so no count has to come back first, and the reduction runs the rounds its largest
possible bucket needs (a bucket holds at most one digit of each scalar). A phase queues its MSMs
back to back and copies all their window sums back at once (:meth:`CxxMsm.gather`); kernel
threads past the real counts find empty ranges and write infinity, which nothing reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from kernels.curves import BLS12_381

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


# The work model of one MSM: a mixed addition per (point, window) record, and about 2.8 full
# additions per bucket of each bucket set (accumulating chunk sums and the running-sum
# reduction); with one copy this is choose_window's nwin * (m + 1.4 * 2^c).
BUCKET_ADDS = 2.8
COPY_PENALTY = 0.01   # each copy beyond the first must cut the modelled work by 1% to be taken
MAX_ROWS = (1 << 31) - 1   # a record holds the point row in 31 bits: copies * m must fit


@dataclass(frozen=True)
class DevicePlan:
    """Windows of ``c`` bits over ``copies`` copies of the points (copy j = 2^(j * shift) * P,
    copy 0 the points): window w reads copy w // passes into bucket set w % passes."""

    c: int
    copies: int = 1
    bits: int = SCALAR_BITS

    def __post_init__(self) -> None:
        if not MIN_C <= self.c <= MAX_C:
            raise ValueError(f"window of {self.c} bits: must be {MIN_C}..{MAX_C}")
        if not 1 <= self.copies <= self.windows:
            raise ValueError(f"{self.copies} copies for {self.windows} windows")

    @property
    def windows(self) -> int:
        return num_windows(self.c, self.bits)

    @property
    def passes(self) -> int:
        """Bucket sets: the windows each copy covers."""
        return -(-self.windows // self.copies)

    @property
    def shift(self) -> int:
        """Doublings between one copy and the next (``native_msm``'s table_fill shift)."""
        return self.passes * self.c

    @property
    def half(self) -> int:
        return 1 << (self.c - 1)

    @property
    def buckets(self) -> int:
        return self.passes * self.half

    def work(self, m: int) -> float:
        """Modelled additions: nwin * m mixed, BUCKET_ADDS per bucket of the passes' sets."""
        return self.windows * m + BUCKET_ADDS * self.buckets

    def table_bytes(self, m: int, row_bytes: int) -> int:
        """Device bytes of copies 1.. of m points (copy 0 is the points themselves)."""
        return (self.copies - 1) * m * row_bytes


def as_plan(plan: DevicePlan | int | None, m: int,
            scalar_bits: int = SCALAR_BITS) -> DevicePlan:
    """A plan from a plan, a window size (one copy), or None (choose_window's, one copy)."""
    if isinstance(plan, DevicePlan):
        return plan
    return DevicePlan(plan or choose_window(m, scalar_bits), 1, scalar_bits)


def device_plan(m: int, curve: Curve | None = None,
                table_budget_bytes: int | None = 0) -> DevicePlan:
    """The (c, copies) with the least modelled work (:meth:`DevicePlan.work`, each copy beyond
    the first costing COPY_PENALTY) for m points whose copies 1.. fit ``table_budget_bytes``
    ((copies - 1) * m * row bytes); 0: no table, choose_window's plan; None: no limit."""
    m = max(1, m)
    row = (curve or G1).affine_words * 4
    best: tuple[float, DevicePlan] | None = None
    for c in range(MIN_C, MAX_C + 1):
        nwin = num_windows(c)
        for copies in range(1, nwin + 1):
            plan = DevicePlan(c, copies)
            if copies > 1 and (
                    -(-nwin // (copies - 1)) == plan.passes      # the last copy buys nothing
                    or copies * m > MAX_ROWS
                    or (table_budget_bytes is not None
                        and plan.table_bytes(m, row) > table_budget_bytes)):
                continue
            score = plan.work(m) * (1 + COPY_PENALTY * (copies - 1))
            if best is None or score < best[0]:
                best = (score, plan)
    assert best is not None
    return best[1]


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


def _row_ints(words: np.ndarray) -> list[int]:
    """(k, 12) uint32 limbs -> k Python ints (the raw Montgomery representatives)."""
    raw = np.ascontiguousarray(words, dtype="<u4").tobytes()
    return [int.from_bytes(raw[i:i + 48], "little") for i in range(0, len(raw), 48)]


def batch_inverse(values: list[int], p: int = _P) -> list[int]:
    """Inverses mod p of every value with one exponentiation (Montgomery's trick); 0 stays 0."""
    prefix, acc = [], 1
    for v in values:
        prefix.append(acc)
        if v:
            acc = acc * v % p
    inv = pow(acc, -1, p)
    out = [0] * len(values)
    for i in range(len(values) - 1, -1, -1):
        v = values[i]
        if v:
            out[i] = inv * prefix[i] % p
            inv = inv * v % p
    return out


def xyzz_rows_to_points(curve: Curve, rows: np.ndarray) -> list[Any]:
    """XYZZ rows (k, xyzz words, Montgomery limbs) -> arkworks points of ``curve`` (unchecked: the
    kernels' own output), with one field inversion for all of them. x = X / ZZ and y = Y / ZZZ:
    the Montgomery factor R cancels in each quotient, so the limbs are used as they are."""
    words = np.ascontiguousarray(rows, dtype=np.uint32).reshape(-1, 4, curve.xyzz_words // 4)
    k = words.shape[0]
    if curve.name == "g1":
        e = [_row_ints(words[:, j]) for j in range(4)]          # X, Y, ZZ, ZZZ per row
        inv = batch_inverse(e[2] + e[3])
        out: list[Any] = []
        for i in range(k):
            if not e[2][i]:
                out.append(curve.identity())
                continue
            x, y = e[0][i] * inv[i] % _P, e[1][i] * inv[k + i] % _P
            out.append(G1Point.from_xy_bytes_unchecked_le(
                x.to_bytes(48, "little") + y.to_bytes(48, "little")))
        return out
    # Fq2 elements (c0, c1): 1 / a = conj(a) / (c0^2 + c1^2), the norms inverted together.
    c = [(_row_ints(words[:, j, :12]), _row_ints(words[:, j, 12:])) for j in range(4)]
    norms = [[(a0 * a0 + a1 * a1) % _P for a0, a1 in zip(*c[j], strict=True)] for j in (2, 3)]
    inv = batch_inverse(norms[0] + norms[1])
    out = []
    for i in range(k):
        if not (c[2][0][i] or c[2][1][i]):
            out.append(curve.identity())
            continue
        coords = []
        for num, den, t in ((0, 2, inv[i]), (1, 3, inv[k + i])):
            n0, n1 = c[num][0][i], c[num][1][i]
            d0, d1 = c[den][0][i] * t % _P, -c[den][1][i] * t % _P
            coords += [(n0 * d0 - n1 * d1) % _P, (n0 * d1 + n1 * d0) % _P]
        out.append(G2Point.from_xy_bytes_unchecked_le(
            b"".join(v.to_bytes(48, "little") for v in coords)))
    return out


def xyzz_to_point(curve: Curve, p: np.ndarray) -> Any:
    """One XYZZ row (Montgomery limbs) -> arkworks point (unchecked: the kernels' own output)."""
    return xyzz_rows_to_points(curve, np.asarray(p).reshape(1, -1))[0]


def combine_windows(curve: Curve, sums: np.ndarray, plan: DevicePlan | int) -> Any:
    """Horner over the bucket sets' sums (one per window without a table, ``passes`` with
    one): sum_p 2^(c*p) * S_p (one multiply by 2^c per set)."""
    from py_arkworks_bls12381 import Scalar

    c = plan.c if isinstance(plan, DevicePlan) else plan
    step = Scalar(1 << c)
    acc = curve.identity()
    for point in reversed(xyzz_rows_to_points(curve, sums)):
        acc = acc * step + point
    return acc


@dataclass(frozen=True)
class QueuedMsm:
    """An MSM whose device work is queued: its bucket sets' sums (None: no points, the
    identity) in the runner's memory, and the window size they are combined with."""

    curve: Curve
    sums: Any
    c: int


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


def device_bytes_phases(m: int, curve: Curve = G1, plan: DevicePlan | int | None = None,
                        scalar_bits: int = SCALAR_BITS) -> dict[str, int]:
    """Device bytes alive in each phase of one MSM of m points beyond the resident points (and
    their table), each allocation rounded up as the pool does, for N = windows x m records (no
    zero digit: the bound, whatever the copies) and P = N / ACC_CHUNK + buckets chunk sums
    (every bucket, passes x 2^(c-1) of them, may end in a partial chunk).

    digits: scalars, counts, offsets, chunk counts and starts, the records (the scatter);
    accumulate: scalars, records, offsets, chunk starts, cursor (the counts array), chunk sums;
    reduce: chunk sums, the next round's sums (P / RED_CHUNK + buckets), both rounds' starts and
    the per-group temporaries (counts, chunk counts, and the cumsum); segments: the last round's
    sums and starts and the segment sums. Plus CuPy's scan scratch (SCRATCH_BYTES).
    """
    pl = as_plan(plan, m, scalar_bits)
    nb = pl.buckets
    n = pl.windows * m
    pt = curve.xyzz_words * 4
    parts = n // ACC_CHUNK + nb
    parts2 = parts // RED_CHUNK + nb
    nseg = pl.passes * (pl.half // segment_size(pl.half, pl.passes))
    r = _round_up
    scalars, u32b, u32b1 = r(m * 32), r(nb * 4), r((nb + 1) * 4)
    phases = {
        "digits": scalars + 3 * u32b + 2 * u32b1 + r(n * 4),
        "accumulate": scalars + r(n * 4) + 2 * u32b1 + u32b + r(parts * pt),
        "reduce": scalars + r(parts * pt) + r(parts2 * pt) + 2 * u32b1 + 3 * u32b1,
        "segments": scalars + r(parts2 * pt) + u32b1 + r(nseg * pt),
    }
    return {k: v + SCRATCH_BYTES for k, v in phases.items()}


def device_bytes_estimate(m: int, curve: Curve = G1,
                          plan: DevicePlan | int | None = None) -> int:
    """Peak device bytes of one MSM of m points beyond the resident points and their table
    (for budgeting)."""
    return max(device_bytes_phases(m, curve, plan).values())


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

    def window_sums(self, curve: Curve, points: Any, scalars: Any,
                    plan: DevicePlan | int | None = None,
                    scalar_bits: int = SCALAR_BITS) -> tuple[Any, DevicePlan]:
        """Per-bucket-set sums (passes, xyzz words) in the runner's memory, and the plan, queued
        without waiting for the device. ``points``: (copies * m, affine words) uint32
        Montgomery rows, copy 0 first (the plan's copies; a bare int or None: one copy, that
        window size or choose_window's); ``scalars``: (m, 8) uint32."""
        xp, k = self.xp, self.k
        m = int(scalars.shape[0])
        pl = as_plan(plan, m, scalar_bits)
        if int(points.shape[0]) != pl.copies * m:
            raise ValueError(f"MSM size mismatch: {points.shape[0]} points, {m} scalars"
                             + (f" x {pl.copies} copies" if pl.copies > 1 else ""))
        if points.shape[1] != curve.affine_words:
            raise ValueError(f"{curve.name} points need {curve.affine_words} words per row, "
                             f"got {points.shape[1]}")
        if pl.copies * m > MAX_ROWS:
            raise ValueError(f"{pl.copies} copies of {m} points exceed {MAX_ROWS} rows")
        c, half, nwin, passes = pl.c, pl.half, pl.windows, pl.passes
        nb = pl.buckets
        xw = curve.xyzz_words
        records_bound = nwin * m                        # no zero digit
        parts_bound = records_bound // ACC_CHUNK + nb   # every bucket may end in a partial chunk
        self._step("start")
        counts = xp.zeros(nb, dtype=np.uint32)
        k.launch("msm_digit_counts", m, scalars, c, nwin, passes, counts)
        offsets = _starts(xp, counts)
        self._step("count")
        chunks = counts + np.uint32(ACC_CHUNK - 1)
        chunks //= np.uint32(ACC_CHUNK)
        cstart = _starts(xp, chunks)
        del chunks
        counts[...] = offsets[:-1]                      # the scatter's cursors
        records = xp.empty(records_bound, dtype=np.uint32)
        k.launch("msm_digit_scatter", m, scalars, c, nwin, passes, m, counts, records)
        self._step("scatter")
        del counts
        parts = xp.empty((parts_bound, xw), dtype=np.uint32)
        k.launch(f"{curve.name}_accumulate", parts_bound, records, offsets, cstart, nb,
                 ACC_CHUNK, points, parts)
        self._step("accumulate")
        del records, offsets
        held = [parts, cstart]                # _reduce owns them: each round frees the last
        del parts, cstart
        # A bucket holds at most one record per scalar and copy (a bucket set takes one window
        # of each copy), so at most this many chunks: the rounds that bound needs, whatever the
        # digits turn out to be.
        parts, pstart = self._reduce(curve, held, nb, -(-pl.copies * m // ACC_CHUNK),
                                     parts_bound)
        self._step("reduce")
        seg = segment_size(half, passes)
        nseg = passes * (half // seg)
        segs = xp.empty((nseg, xw), dtype=np.uint32)
        k.launch(f"{curve.name}_segments", nseg, parts, pstart, half, seg, segs)
        self._step("segments")
        del parts, pstart
        sums = self._reduce_uniform(curve, segs, passes, half // seg)
        self._step("windows")
        return sums, pl

    def _reduce(self, curve: Curve, held: list[Any], ngroups: int, most: int,
                bound: int) -> tuple[Any, Any]:
        """Sum XYZZ parts grouped by starts (``held = [parts, starts]``, ngroups + 1 starts,
        handed over so that each round's input is freed once the next exists) until every group
        has at most one; ``most`` bounds the largest group, ``bound`` the parts in use. A round
        makes at most ceil(g / RED_CHUNK) <= g sums of a group of g, so its output is bounded by
        min(bound, bound // RED_CHUNK + ngroups) without asking the device."""
        xp, k = self.xp, self.k
        parts, pstart = held.pop(0), held.pop(0)
        while most > 1:
            n2 = xp.diff(pstart)
            n2 += np.uint32(RED_CHUNK - 1)
            n2 //= np.uint32(RED_CHUNK)
            nstart = _starts(xp, n2)
            del n2
            bound = min(bound, bound // RED_CHUNK + ngroups)
            out = xp.empty((bound, curve.xyzz_words), dtype=np.uint32)
            k.launch(f"{curve.name}_reduce", bound, parts, pstart, nstart, ngroups, RED_CHUNK,
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

    def queue(self, curve: Curve, points: Any, scalars: Any,
              plan: DevicePlan | int | None = None,
              scalar_bits: int = SCALAR_BITS) -> QueuedMsm:
        """sum_i scalars[i] * points[i], queued: nothing waits for the device (``points``: the
        plan's copies, copy 0 first, as :meth:`window_sums`)."""
        if int(scalars.shape[0]) == 0:
            return QueuedMsm(curve, None, 1)
        sums, pl = self.window_sums(curve, points, scalars, plan, scalar_bits)
        return QueuedMsm(curve, sums, pl.c)

    def gather(self, queued: list[QueuedMsm]) -> Any:
        """Every queued MSM's window sums in one flat array of the runner's memory (one copy
        back for all of them), or None when none has any."""
        flat = [q.sums.reshape(-1) for q in queued if q.sums is not None]
        if not flat:
            return None
        return flat[0] if len(flat) == 1 else self.xp.concatenate(flat)

    @staticmethod
    def combine(queued: list[QueuedMsm], host: np.ndarray | None) -> list[Any]:
        """The MSMs' results from :meth:`gather`'s array on the host (Horner, arkworks)."""
        out, at = [], 0
        for q in queued:
            if q.sums is None:
                out.append(q.curve.identity())
                continue
            size = int(np.prod(q.sums.shape))
            assert host is not None
            sums = np.asarray(host[at:at + size]).reshape(q.sums.shape)
            at += size
            out.append(combine_windows(q.curve, sums, q.c))
        return out

    def msm(self, curve: Curve, points: Any, scalars: Any,
            plan: DevicePlan | int | None = None, scalar_bits: int = SCALAR_BITS) -> Any:
        """sum_i scalars[i] * points[i] as an arkworks point of ``curve`` (waits for it;
        ``points``: the plan's copies, copy 0 first, as :meth:`window_sums`)."""
        queued = [self.queue(curve, points, scalars, plan, scalar_bits)]
        flat = self.gather(queued)
        host = None if flat is None else self.k.to_host(flat)
        result = self.combine(queued, host)[0]
        return result
