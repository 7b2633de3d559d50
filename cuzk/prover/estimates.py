"""Memory the engine must reserve for each proving step, computed from the circuit's sizes.

The upstream engine guessed these and under-counted by gigabytes. Here each term is a buffer the
step really allocates (counted in bytes from element and object sizes), and a test measures the
actual peak of each step on the bundled circuits against these figures.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from py_arkworks_bls12381 import Scalar

from cuzk.prover import native_msm, qap
from cuzk.prover.cpu_schedule import cores
from cuzk.prover.key_layout import CircuitSizes

_FR = 32  # bytes of an Fr element
_PTR = 8
_SCALAR_OBJ = sys.getsizeof(Scalar(1))
# Per pair fed to an arkworks MSM (cuzk.prover.msm): the selected row index (int64), the point
# list's slot, the copy of the selected scalar rows, the bytes the Scalars are cut from, and the
# Scalar object with its list slot. Plus one byte per section row for the selection mask. The
# number of pairs is at most the section's points not at infinity.
_MSM_PER_PAIR = 8 + _PTR + _FR + _FR + _SCALAR_OBJ + _PTR


def _msm_bytes(pairs: int, rows: int) -> int:
    return pairs * _MSM_PER_PAIR + rows


# The native MSM (cuzk/prover/_native, allocations through PyMem_RawMalloc, which tracemalloc
# sees): a row index per section row, a signed digit per point and window, one XYZZ result per
# window (4 coordinates of 48 bytes in G1, 96 in G2) and, per thread, 2^(c-1) buckets for window
# width c, each an affine point, an XYZZ spill point, a flag and two 4-byte marks
# (bucket_tmpl.h), plus a batch of min(BUCKET_BATCH, 2^(c-2)) entries (4 coordinates, a bucket
# index, a flag, a 16-byte deferred item). The width is chosen as the C code chooses it.
_COORD = {1: 48, 2: 96}
_XYZZ = {g: 4 * b for g, b in _COORD.items()}
_BUCKET = {g: 6 * b + 1 + 4 + 4 for g, b in _COORD.items()}
_ENTRY = {g: 4 * b + 4 + 1 + 16 for g, b in _COORD.items()}


def _window(points: int, threads: int = 1) -> int:
    """The C code's pick_window: the width minimising windows/threads * (points + 2.8 * 2^(c-1))."""
    best, best_cost = 1, float("inf")
    for c in range(1, 17):
        windows = -(-256 // c)
        rounds = -(-windows // threads)
        cost = rounds * (points + 2.0 * (1 << (c - 1)) * 1.4)
        if cost < best_cost:
            best, best_cost = c, cost
    return best


def native_msm_bytes(rows: int, points: int, group: int = 1, threads: int = 1) -> int:
    """Scratch of one native MSM over ``rows`` section rows of which ``points`` take part."""
    if points == 0:
        return 4 * rows
    c = _window(points, threads)
    windows = -(-256 // c)
    nb = 1 << (c - 1)
    batch = max(1, min(native_msm.BUCKET_BATCH, nb // 2))
    per_thread = nb * _BUCKET[group] + batch * _ENTRY[group]
    return 4 * rows + 4 * windows * points + windows * _XYZZ[group] + threads * per_thread
# Interpreter-side slack per step (small lists, frames, result objects) and a 5% margin so the
# figure covers the measured peak; a test holds it within 30% of that peak.
_FIXED = 16 * 1024
_MARGIN = 1.05


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes, per partition. ``reservation_bytes`` is what to take before synthesize; the
    ``abc_bytes`` part is released after the GPU phase, the rest after finalize."""

    witness_bytes: int
    abc_bytes: int
    synthesis_bytes: int  # peak of step 1 (witness + a/b/c + temporaries)
    gpu_bytes: int  # host-side transient peak of step 2 on top of witness + a/b/c
    finalize_bytes: int  # transient peak of step 3 on top of the witness

    @property
    def reservation_bytes(self) -> int:
        held = self.witness_bytes + self.abc_bytes
        return max(
            self.synthesis_bytes, held + self.gpu_bytes, self.witness_bytes + self.finalize_bytes
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "witness_bytes": self.witness_bytes,
            "abc_bytes": self.abc_bytes,
            "synthesis_bytes": self.synthesis_bytes,
            "gpu_bytes": self.gpu_bytes,
            "finalize_bytes": self.finalize_bytes,
            "reservation_bytes": self.reservation_bytes,
        }


def _scheduled_peak(n: int, v: int, sizes: CircuitSizes, workers: int) -> int:
    """Step 2 on the CPU (cuzk.prover.cpu_schedule): at most ``workers`` MSMs in flight. While
    H's NTT runs (its vectors, ``qap.h_bytes``), the costliest others; then H's vector with H and
    the rest, the last task split among the idle workers (more buckets)."""
    rows_pts = {
        "A": (v, sizes.a_points, 1),
        "B1": (v, sizes.b_points, 1),
        "C": (v - sizes.n_public - 1, sizes.c_points, 1),
        "B2": (v, sizes.b_points, 2),
    }
    one = sorted(native_msm_bytes(*rp) for rp in rows_pts.values())
    split = max(native_msm_bytes(r, p, g, workers) for r, p, g in rows_pts.values())
    h_one, h_split = native_msm_bytes(n, n), native_msm_bytes(n, n, 1, workers)
    during_ntt = qap.h_bytes(n.bit_length() - 1) + sum(one[-workers:])
    others = sum(one[-(workers - 1):]) if workers > 1 else 0
    after_ntt = n * _FR + max(h_split, h_one + others, h_one + split)
    return max(during_ntt, after_ntt)


def estimate_memory(
    sizes: CircuitSizes, gpu_on_host: bool = True, generator_bytes: int = 0
) -> MemoryEstimate:
    """``generator_bytes``: what the witness generator holds while it computes (its
    instance's linear memory and its mapped code, ``WitnessCalculator.working_bytes``), which
    it gives back before a/b/c are built."""
    n, v = sizes.domain_size, sizes.n_vars
    witness = v * _FR
    abc = 3 * n * _FR
    # Step 1: the witness is read out of wasm memory once as bytes and once as an array; a/b/c;
    # the constraint check builds C*w with two scratch vectors beside it.
    # Before that the generator runs: its instance and code, and the witness it copies out.
    synthesis = max(2 * witness + abc + 3 * n * _FR, generator_bytes + 2 * witness)
    # Step 2 on the CPU backend: first the odd-coset NTTs (``qap.h_bytes``), then H
    # is held while the largest MSM converts its scalars. On a GPU only the MSM inputs stay on
    # the host side (the vectors live in device memory, counted in the device budget).
    if native_msm.available():
        c_rows = v - sizes.n_public - 1
        g1 = [
            native_msm_bytes(n, n),
            native_msm_bytes(v, sizes.a_points),
            native_msm_bytes(v, sizes.b_points),
            native_msm_bytes(c_rows, sizes.c_points),
        ]
        b2 = native_msm_bytes(v, sizes.b_points, group=2)
        if gpu_on_host:
            gpu = _scheduled_peak(n, v, sizes, cores())
            finalize = 0  # B2 was computed with the G1 MSMs
        else:
            gpu = n * _FR + max(g1)
            finalize = b2
    else:
        msm_peak = max(
            _msm_bytes(n, n),
            _msm_bytes(sizes.a_points, v),
            _msm_bytes(sizes.b_points, v),
            _msm_bytes(sizes.c_points, v - sizes.n_public - 1),
        )
        h = qap.h_bytes(n.bit_length() - 1)
        gpu = max(h, n * _FR + msm_peak) if gpu_on_host else n * _FR + msm_peak
        # Step 3: the G2 MSM for B over the witness.
        finalize = _msm_bytes(sizes.b_points, v)

    def pad(x: int) -> int:
        return int(x * _MARGIN) + _FIXED

    return MemoryEstimate(witness, abc, pad(synthesis), pad(gpu), pad(finalize))
