"""Memory the engine must reserve for each proving step, computed from the circuit's sizes.

The upstream engine guessed these and under-counted by gigabytes. Here each term is a buffer the
step really allocates (counted in bytes from element and object sizes), and a test measures the
actual peak of each step on the bundled circuits against these figures.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from py_arkworks_bls12381 import Scalar

from cuzk.prover.keys import CircuitSizes

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


def estimate_memory(sizes: CircuitSizes, gpu_on_host: bool = True) -> MemoryEstimate:
    n, v = sizes.domain_size, sizes.n_vars
    witness = v * _FR
    abc = 3 * n * _FR
    # Step 1: the witness is read out of wasm memory once as bytes and once as an array; a/b/c;
    # the constraint check builds C*w with two scratch vectors beside it.
    synthesis = 2 * witness + abc + 3 * n * _FR
    # Step 2 on the CPU backend: first the odd-coset NTTs (three vectors and a scratch one), then H
    # is held while the largest MSM converts its scalars. On a GPU only the MSM inputs stay on
    # the host side (the vectors live in device memory, counted in the device budget).
    msm_peak = max(
        _msm_bytes(n, n),
        _msm_bytes(sizes.a_points, v),
        _msm_bytes(sizes.b_points, v),
        _msm_bytes(sizes.c_points, v - sizes.n_public - 1),
    )
    gpu = max(4 * n * _FR, n * _FR + msm_peak) if gpu_on_host else n * _FR + msm_peak
    # Step 3: the G2 MSM for B over the witness.
    finalize = _msm_bytes(sizes.b_points, v)

    def pad(x: int) -> int:
        return int(x * _MARGIN) + _FIXED

    return MemoryEstimate(witness, abc, pad(synthesis), pad(gpu), pad(finalize))
