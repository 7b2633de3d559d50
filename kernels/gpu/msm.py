"""Pippenger MSM over BLS12-381 G1 for the GPU: sum_i s_i * P_i with device-resident points.

Steps (every arithmetic step is a per-thread body, so the CPU executor runs the same code):

1. Signed digits. Scalar i is cut into ``nwin`` windows of c bits, digits recentred into
   [-2^(c-1), 2^(c-1)] with a carry, so each window needs only 2^(c-1) buckets and a negative
   digit adds -P (negating y is free). One thread per scalar writes, per window, a 64-bit record
   ``bucket_key << 32 | sign << 31 | i`` (key = window * 2^(c-1) + |digit| - 1), or an all-ones
   sentinel for a zero digit: zero digits (most windows of the small witness values that
   circuits are full of) cost nothing after the sort.
2. Bucket sort: one radix sort of the records (CuPy/CUB on the device) groups each bucket's
   points contiguously; the sentinels sort last and are cut off.
3. Bucket accumulation in XYZZ (mixed additions of affine points). The sorted run of every
   bucket is cut into chunks of at most ``ACC_CHUNK`` entries and one thread sums one chunk, so
   a bucket that holds half of all points (scalar 1 is common) is spread over many threads;
   chunk partial sums of one bucket are then summed the same way (``RED_CHUNK`` per thread)
   until one remains per bucket.
4. Bucket reduction, in parallel: each window's buckets are cut into segments of ``SEG``; one
   thread runs the running-sum trick over its segment (sum (b - lo + 1) B_b and sum B_b) and
   adds lo * (sum B_b) with a short double-and-add, giving that segment's share of
   sum_b (b+1) B_b; segment shares of a window are summed by the chunked reduction.
5. The nwin window sums (a few KiB) go to the host; Horner's rule with arkworks (c doublings
   and one addition per window, under a millisecond) gives the result as a G1Point.

Window size: c minimising nwin * (m + 1.4 * 2^c) (additions in steps 3 and 4), 4 <= c <= 20.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point

from kernels.gpu.g1 import AFFINE_WORDS, XYZZ_WORDS, build_g1, xyzz_to_g1
from kernels.gpu.launch import Executor
from kernels.gpu.runtime import Target

SCALAR_BITS = 255          # BLS12-381 r < 2^255
ACC_CHUNK = 64             # mixed additions per thread in bucket accumulation
RED_CHUNK = 16             # XYZZ additions per thread in each reduction round
SEG = 32                   # buckets per thread in the window reduction
MIN_C, MAX_C = 4, 20
SENTINEL = np.uint64(0xFFFFFFFFFFFFFFFF)


def num_windows(c: int, scalar_bits: int = SCALAR_BITS) -> int:
    """Windows so that the final carry of the signed recoding always fits: c*nwin > bits."""
    return scalar_bits // c + 1


def choose_window(m: int, scalar_bits: int = SCALAR_BITS) -> int:
    """Window size from the input size by a cost model of the additions (see module doc)."""
    best_c, best = MIN_C, float("inf")
    for c in range(MIN_C, MAX_C + 1):
        cost = num_windows(c, scalar_bits) * (m + 1.4 * (1 << c))
        if cost < best:
            best_c, best = c, cost
    return best_c


def max_pieces(m: int, c: int, scalar_bits: int = SCALAR_BITS) -> int:
    """Upper bound on accumulation chunks: every ACC_CHUNK records start one, and each of the
    2^(c-1) buckets of every window can add one more (its run's last, partial chunk)."""
    nwin = num_windows(c, scalar_bits)
    return -(-nwin * m // ACC_CHUNK) + nwin * (1 << (c - 1))


def device_bytes_phases(m: int, c: int | None = None,
                        scalar_bits: int = SCALAR_BITS) -> dict[str, int]:
    """Device bytes alive in each phase of one MSM of m points (beyond the resident points).

    Counts every buffer of :meth:`MsmEngine.window_sums` alive at once, with N = windows x m
    records (the bound: no zero digit) and P = :func:`max_pieces`:
    sort: records, the sorted copy and CUB's radix-sort scratch (3 N x 8);
    chunks: records and bucket ids, run ids, offsets and a gather temporary (5 N x 8), two
    boolean masks (2 N); accumulate: records, lo/hi/key per chunk (3 P x 8), chunk sums
    (P x 192), plus one reduction round (P/16 x (24 + 192)); buckets: records, the chunk sums,
    their keys and the bucket array (B x 192 with B = windows x 2^(c-1)) and window segments.
    Every phase also holds the uploaded scalars (m x 32).
    """
    c = c or choose_window(m, scalar_bits)
    nwin = num_windows(c, scalar_bits)
    n = nwin * m
    p = max_pieces(m, c, scalar_bits)
    b = nwin * (1 << (c - 1))
    pt = XYZZ_WORDS * 4
    scalars = m * 32
    red = -(-p // RED_CHUNK)
    return {
        "sort": scalars + 3 * n * 8,
        "chunks": scalars + 5 * n * 8 + 2 * n,
        "accumulate": scalars + n * 8 + 3 * p * 8 + p * pt + red * (3 * 8 + pt),
        "buckets": scalars + n * 8 + p * (pt + 8) + b * pt + (b // min(SEG, b // nwin)) * pt,
    }


def device_bytes_estimate(m: int, c: int | None = None, scalar_bits: int = SCALAR_BITS) -> int:
    """Peak device bytes of one MSM of m points beyond the resident points (for budgeting)."""
    return max(device_bytes_phases(m, c, scalar_bits).values())


# --------------------------------------------------------------------------- per-thread bodies

def build_msm(t: Target) -> types.SimpleNamespace:
    return t.memo("msm", lambda: _build(t))


def _build(tg: Target) -> types.SimpleNamespace:
    jit, dev = tg.jit, tg.dev
    g1 = build_g1(tg)
    set_inf = g1.set_inf
    copy_pt = g1.copy
    add_affine = g1.add_affine
    add_xyzz = g1.add_xyzz
    add_xyzz_inline = g1.add_xyzz_inline
    mul_small = g1.mul_small

    def digits_body(i, scalars, c, nwin, m, out):
        """Signed base-2^c digits of scalar i -> one sortable record per window."""
        half = np.uint64(1) << np.uint64(c - 1)
        full = np.uint64(1) << np.uint64(c)
        mask = full - np.uint64(1)
        carry = np.uint64(0)
        for w in range(nwin):
            off = w * c
            limb = off >> 5
            sh = np.uint64(off & 31)
            v = np.uint64(0)
            if limb < 8:
                v = np.uint64(scalars[i, limb])
                if limb + 1 < 8:
                    v |= np.uint64(scalars[i, limb + 1]) << np.uint64(32)
            d = ((v >> sh) & mask) + carry
            neg = np.uint64(0)
            if d > half:
                d = full - d
                neg = np.uint64(1)
                carry = np.uint64(1)
            else:
                carry = np.uint64(0)
            if d == np.uint64(0):
                out[w * m + i] = SENTINEL
            else:
                key = np.uint64(w) * half + d - np.uint64(1)
                out[w * m + i] = (key << np.uint64(32)) | (neg << np.uint64(31)) | np.uint64(i)

    def accumulate_body(j, records, lo, hi, points, out):
        """out[j] = sum of +-points over sorted records [lo[j], hi[j]) (one bucket's chunk)."""
        acc = dev.local.array(XYZZ_WORDS, np.uint32)
        set_inf(acc)
        for e in range(lo[j], hi[j]):
            r = records[e]
            idx = np.int64(r & np.uint64(0x7FFFFFFF))
            negative = ((r >> np.uint64(31)) & np.uint64(1)) != np.uint64(0)
            add_affine(acc, points[idx, 0:12], points[idx, 12:24], negative)
        copy_pt(out[j], acc)

    def sum_body(j, src, lo, hi, out):
        """out[j] = sum of XYZZ src[lo[j]:hi[j]]."""
        acc = dev.local.array(XYZZ_WORDS, np.uint32)
        set_inf(acc)
        for e in range(lo[j], hi[j]):
            add_xyzz_inline(acc, src[e])
        copy_pt(out[j], acc)

    def window_segment_body(j, buckets, nb, seg, out):
        """Segment j of the buckets: sum_{b in seg} (b + 1) * B_b (bucket b holds digit b+1)."""
        per_win = nb // seg
        w = j // per_win
        lo = (j - w * per_win) * seg
        base = w * nb
        run = dev.local.array(XYZZ_WORDS, np.uint32)
        tot = dev.local.array(XYZZ_WORDS, np.uint32)
        set_inf(run)
        set_inf(tot)
        for k in range(seg - 1, -1, -1):
            add_xyzz(run, buckets[base + lo + k])
            add_xyzz(tot, run)
        mul_small(run, lo)
        add_xyzz(tot, run)
        copy_pt(out[j], tot)

    ns = types.SimpleNamespace()
    ns.digits = jit(digits_body)
    ns.accumulate = jit(accumulate_body)
    ns.sum = jit(sum_body)
    ns.window_segment = jit(window_segment_body)
    return ns


# --------------------------------------------------------------------------- host driver

class MsmEngine:
    """G1 MSMs on one executor; points are ``(m, 24)`` uint32 affine Montgomery rows there."""

    def __init__(self, ex: Executor) -> None:
        self.ex = ex
        self.k = build_msm(ex.target)

    # -- segmented reduction helpers (xp = numpy or cupy) -----------------------------------
    def _chunks(self, keys: Any, size: int) -> tuple[Any, Any, Any]:
        """Cut a sorted key array into runs of equal keys, each cut into pieces of <= size.

        Returns (lo, hi, key) per piece. Temporaries are dropped as soon as they are used: on the
        device this is the MSM's memory peak (see :func:`device_bytes_phases`).
        """
        xp = self.ex.xp
        n = keys.shape[0]
        run_start = xp.ones(n, dtype=bool)
        if n > 1:
            run_start[1:] = keys[1:] != keys[:-1]
        starts = xp.flatnonzero(run_start)
        run_id = xp.cumsum(run_start, dtype=np.int64)
        run_id -= 1
        offset = xp.arange(n, dtype=np.int64)
        offset -= starts[run_id]
        del run_id, starts
        offset %= size
        piece_start = offset == 0
        del offset
        piece_start |= run_start
        del run_start
        lo = xp.flatnonzero(piece_start).astype(np.int64, copy=False)
        del piece_start
        hi = xp.empty_like(lo)
        hi[:-1] = lo[1:]
        hi[-1] = n
        return lo, hi, keys[lo]

    def _reduce(self, parts: Any, keys: Any) -> tuple[Any, Any]:
        """Sum XYZZ ``parts`` with equal (sorted) ``keys`` until one per key remains."""
        xp = self.ex.xp
        while True:
            lo, hi, k = self._chunks(keys, RED_CHUNK)
            if lo.shape[0] == parts.shape[0]:
                return parts, keys
            out = xp.empty((lo.shape[0], XYZZ_WORDS), dtype=np.uint32)
            self.ex.grid(self.k.sum, lo.shape[0], parts, lo, hi, out)
            parts, keys = out, k

    # -- the MSM -----------------------------------------------------------------------------
    def window_sums(self, points: Any, scalars: Any, c: int | None = None,
                    scalar_bits: int = SCALAR_BITS) -> tuple[Any, int]:
        """Per-window sums (nwin, 48) XYZZ on the executor's memory, and the window size used."""
        xp = self.ex.xp
        m = scalars.shape[0]
        if points.shape[0] != m:
            raise ValueError(f"MSM size mismatch: {points.shape[0]} points, {m} scalars")
        c = c or choose_window(m, scalar_bits)
        nb = 1 << (c - 1)
        nwin = num_windows(c, scalar_bits)
        records = xp.empty(nwin * m, dtype=np.uint64)
        self.ex.grid(self.k.digits, m, scalars, c, nwin, m, records)
        records = xp.sort(records)
        nvalid = int(xp.searchsorted(records, xp.asarray(np.array([SENTINEL], dtype=np.uint64)))[0])
        if nvalid == 0:
            return xp.zeros((nwin, XYZZ_WORDS), dtype=np.uint32), c
        records = records[:nvalid]
        bucket = (records >> np.uint64(32)).view(np.int64)
        lo, hi, keys = self._chunks(bucket, ACC_CHUNK)
        del bucket
        parts = xp.empty((lo.shape[0], XYZZ_WORDS), dtype=np.uint32)
        self.ex.grid(self.k.accumulate, lo.shape[0], records, lo, hi, points, parts)
        parts, keys = self._reduce(parts, keys)
        buckets = xp.zeros((nwin * nb, XYZZ_WORDS), dtype=np.uint32)
        buckets[keys] = parts
        seg = min(SEG, nb)
        nseg = nwin * (nb // seg)
        segs = xp.empty((nseg, XYZZ_WORDS), dtype=np.uint32)
        self.ex.grid(self.k.window_segment, nseg, buckets, nb, seg, segs)
        win_keys = xp.arange(nseg, dtype=np.int64) // (nb // seg)
        sums, _ = self._reduce(segs, win_keys)
        return sums, c

    def msm(self, points: Any, scalars: Any, c: int | None = None,
            scalar_bits: int = SCALAR_BITS) -> G1Point:
        """sum_i scalars[i] * points[i]; scalars (m, 8) uint32 normal form, points (m, 24)."""
        sums, c = self.window_sums(points, scalars, c, scalar_bits)
        host = sums.get() if hasattr(sums, "get") else np.asarray(sums)
        return combine_windows(host, c)


def combine_windows(sums: np.ndarray, c: int) -> G1Point:
    """Horner over the window sums: sum_w 2^(c*w) * W_w, on the host with arkworks."""
    acc = G1Point.identity()
    for w in range(sums.shape[0] - 1, -1, -1):
        for _ in range(c):
            acc = acc + acc
        acc = acc + xyzz_to_g1(sums[w])
    return acc


def points_rows(section: np.ndarray) -> np.ndarray:
    """zkey G1 section (n, 2, 12) -> contiguous (n, 24) rows (a view when already contiguous)."""
    arr = np.ascontiguousarray(section, dtype=np.uint32)
    return arr.reshape(arr.shape[0], AFFINE_WORDS)
