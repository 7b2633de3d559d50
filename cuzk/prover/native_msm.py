"""The native CPU MSM (``cuzk/prover/_native/msm.c``): Pippenger over the zkey's own point bytes.

It reads the key's memory-mapped sections in place (affine, Montgomery form, all zero for
infinity), so an MSM builds no Python objects and converts no points; the GIL is released for
the whole call, so MSMs on a thread pool run in parallel. The field multiply is compiled twice:
with the BMI2/ADX instructions (taken when the CPU has them) and portably; ``field_arith =
"portable"`` forces the second (``[prover] field_arith`` in the config).

The extension is built with the system C compiler by ``pip install -e .`` (setup.py); when it is
missing (no compiler at install), :func:`available` is False and the prover falls back to
py_arkworks_bls12381's multiexp.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.settings_schema import FIELD_ARITH, MSM_PRECOMPUTE, MSM_PRECOMPUTE_BUDGET_SHARE

_msm: Any
try:
    _msm = importlib.import_module("cuzk.prover._native._msm")
except ImportError:  # built at install; absent only where no C compiler was found
    _msm = None

_field_arith = "auto"


def available() -> bool:
    return _msm is not None


def fast_supported() -> bool:
    """The CPU has BMI2 and ADX (the wide-multiply and carry instructions)."""
    return _msm is not None and bool(_msm.fast_available())


def configure(field_arith: str) -> None:
    """``auto``: the fast multiply where the CPU has it; ``portable``: never."""
    global _field_arith
    if field_arith not in FIELD_ARITH:
        choices = ", ".join(FIELD_ARITH)
        raise ValueError(f"field_arith must be one of {choices}, got {field_arith!r}")
    _field_arith = field_arith


def arith_path() -> str:
    """Which multiply the MSMs run: ``bmi2-adx``, ``portable``, or ``arkworks`` (no extension)."""
    if _msm is None:
        return "arkworks"
    return "bmi2-adx" if _field_arith == "auto" and fast_supported() else "portable"


def _scalars(scalars: np.ndarray) -> np.ndarray:
    if scalars.ndim != 2 or scalars.shape[1] != 8:
        raise ValueError(f"scalars must be (n, 8) uint32, got shape {scalars.shape}")
    return np.ascontiguousarray(scalars, dtype="<u4")


def _run(group: int, points: np.ndarray, scalars: np.ndarray, threads: int) -> bytes | None:
    if _msm is None:
        raise RuntimeError("the native MSM extension is not built (pip install -e .)")
    sc = _scalars(scalars)
    if points.shape[0] != sc.shape[0]:
        raise ValueError(f"MSM size mismatch: {points.shape[0]} points, {sc.shape[0]} scalars")
    pts = np.ascontiguousarray(points)
    result: bytes | None = _msm.msm(group, pts, sc, max(1, threads), _field_arith == "auto")
    return result


# Precomputed window tables. With c-bit windows an MSM has W = ceil(256 / c) windows, each
# costing one affine addition per active point plus a bucket reduction (2^c XYZZ additions, about
# 1.4 affine additions each) and c doublings. A table of t copies of the section, copy j holding
# 2^(j*s*c) * P, lets t windows share one bucket pass (s = ceil(W / t) passes): the reductions and
# doublings are paid s times instead of W, so wider windows (fewer of them) pay off.
_BUCKET_ADD = 1.4  # an XYZZ addition against an affine one (measured: the model matches 1.3x)
_MAX_TABLE_WINDOW = 14  # wider: 2^13+ buckets leave the L2 cache (measured slower at c = 15, 16)
_COPY_PENALTY = 0.01  # each extra copy of a section must cut the modelled work by 1%
_MIN_GAIN = 0.97  # a table that saves under 3% is not worth its memory: none


@dataclass(frozen=True)
class TablePlan:
    """How a section's window table is shaped: window bits ``c`` and ``copies`` of the section
    (copy 0 is the section itself; ``copies`` = 1 means no table)."""

    c: int
    copies: int

    @property
    def windows(self) -> int:
        return -(-256 // self.c)

    @property
    def passes(self) -> int:
        return -(-self.windows // self.copies)

    @property
    def shift(self) -> int:
        """Doublings between one copy and the next."""
        return self.passes * self.c

    def table_bytes(self, rows: int, row_bytes: int) -> int:
        return (self.copies - 1) * rows * row_bytes


def _work(m: int, windows: int, passes: int, c: int) -> float:
    return windows * m + passes * ((1 << c) * _BUCKET_ADD + c)


def table_plan(points: int) -> TablePlan:
    """The table for a section with ``points`` points not at infinity: the (c, copies) with the
    least modelled work, each copy beyond the first costing 1% (memory is not free), or no
    table where the best saves under 3% against today's untabled MSM (very large sections)."""
    m = max(1, points)
    untabled = min(_work(m, -(-256 // c), -(-256 // c), c) for c in range(1, 17))
    best: tuple[float, TablePlan] | None = None
    for c in range(4, _MAX_TABLE_WINDOW + 1):
        windows = -(-256 // c)
        for passes in range(1, windows + 1):
            plan = TablePlan(c, -(-windows // passes))
            if plan.passes != passes:
                continue
            score = _work(m, windows, passes, c) * (1 + _COPY_PENALTY * (plan.copies - 1))
            if best is None or score < best[0]:
                best = (score, plan)
    assert best is not None
    plan = best[1]
    if _work(m, plan.windows, plan.passes, plan.c) > _MIN_GAIN * untabled:
        return TablePlan(plan.c, 1)
    return plan


def tables_wanted(mode: str, table_bytes: int, budget_bytes: int | None) -> bool:
    """``[prover] msm_precompute`` for one key: "on", "off", or "auto" = on when its tables
    take at most 1/16 of the host memory budget (no budget, as in a one-proof `cuzk prove`:
    off). Never without the native extension (the arkworks fallback has no use for them)."""
    if mode not in MSM_PRECOMPUTE:
        raise ValueError(f"msm_precompute must be one of {', '.join(MSM_PRECOMPUTE)}, "
                         f"got {mode!r}")
    if _msm is None or mode == "off":
        return False
    if mode == "on":
        return True
    return budget_bytes is not None and table_bytes * MSM_PRECOMPUTE_BUDGET_SHARE <= budget_bytes


@dataclass(frozen=True)
class WindowTable:
    """A section's copies 1..t-1 (``data``: (t-1) * rows point rows, affine Montgomery, all zero
    for infinity), built once at key load by :func:`build_table`."""

    plan: TablePlan
    data: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


def build_table(points: np.ndarray, plan: TablePlan, threads: int = 1) -> WindowTable:
    """Copies 1..t-1 of a zkey section for ``plan`` (G1 (n, 2, 12) or G2 (n, 2, 2, 12)),
    computed on ``threads`` threads with the GIL released."""
    if _msm is None:
        raise RuntimeError("the native MSM extension is not built (pip install -e .)")
    group = 2 if points.ndim == 4 else 1
    pts = np.ascontiguousarray(points)
    data = np.empty((plan.copies - 1, *pts.shape), dtype=pts.dtype)
    if plan.copies > 1:
        _msm.table_fill(group, pts, data, plan.copies, plan.shift, max(1, threads),
                        _field_arith == "auto")
    return WindowTable(plan, data)


def fill_copies(rows: np.ndarray, copies: int, shift: int, threads: int = 1) -> np.ndarray:
    """Copies 1..copies-1 of point rows for a device window table (``kernels/gpu/cxx_msm.py``,
    ``DevicePlan``): ``rows`` (n, 24) G1 or (n, 48) G2 uint32 affine Montgomery (all zero for
    infinity), copy j = 2^(j * shift) * P, returned as (copies - 1, n, words). The device's shift
    is passes * c over its own window count (255 // c + 1), not a :class:`TablePlan`'s, so the
    extension's table_fill is called here with it directly (``threads`` threads, GIL
    released)."""
    if _msm is None:
        raise RuntimeError("the native MSM extension is not built (pip install -e .)")
    if rows.ndim != 2 or rows.shape[1] not in (24, 48):
        raise ValueError(f"point rows must be (n, 24) or (n, 48) uint32, got {rows.shape}")
    group = 1 if rows.shape[1] == 24 else 2
    pts = np.ascontiguousarray(rows, dtype=np.uint32)
    data = np.empty((copies - 1, *pts.shape), dtype=np.uint32)
    if copies > 1 and pts.shape[0]:
        _msm.table_fill(group, pts, data, copies, shift, max(1, threads), _field_arith == "auto")
    return data


def _run_table(group: int, points: np.ndarray, table: WindowTable, scalars: np.ndarray,
               threads: int) -> bytes | None:
    if _msm is None:
        raise RuntimeError("the native MSM extension is not built (pip install -e .)")
    sc = _scalars(scalars)
    if points.shape[0] != sc.shape[0]:
        raise ValueError(f"MSM size mismatch: {points.shape[0]} points, {sc.shape[0]} scalars")
    plan = table.plan
    result: bytes | None = _msm.msm_tab(group, np.ascontiguousarray(points), table.data,
                                        plan.copies, plan.c, sc, max(1, threads),
                                        _field_arith == "auto")
    return result


def msm_g1(points: np.ndarray, scalars: np.ndarray, threads: int = 1,
           table: WindowTable | None = None) -> G1Point:
    """sum(scalars[i] * points[i]); points: a zkey G1 section (n, 2, 12) uint32, Montgomery;
    scalars: (n, 8) uint32 normal form. ``threads`` > 1 splits the windows among threads;
    ``table``: the section's precomputed window table (:func:`build_table`), if any."""
    if table is not None:
        out = _run_table(1, points, table, scalars, threads)
    else:
        out = _run(1, points, scalars, threads)
    return G1Point.identity() if out is None else G1Point.from_xy_bytes_unchecked_le(out)


def msm_g2(points: np.ndarray, scalars: np.ndarray, threads: int = 1,
           table: WindowTable | None = None) -> G2Point:
    """As :func:`msm_g1` over a zkey G2 section (n, 2, 2, 12)."""
    if table is not None:
        out = _run_table(2, points, table, scalars, threads)
    else:
        out = _run(2, points, scalars, threads)
    return G2Point.identity() if out is None else G2Point.from_xy_bytes_unchecked_le(out)


# Bucket additions sharing one inversion by default (bucket_tmpl.h's bucket_batch; a test holds
# the two equal): the memory estimates count a batch of this many entries per MSM thread.
BUCKET_BATCH = 1024


def batch_affine(batch: int, min_g1: int, min_g2: int) -> tuple[int, int, int]:
    """Sets the bucket batching (a tuning and test hook; returns the previous setting): how many
    bucket additions share one field inversion (0: XYZZ buckets only, the code before batching)
    and, per group, the smallest batch a Pippenger pass must fill to batch at all. Not for use
    while MSMs run (each worker reads it when it starts)."""
    if _msm is None:
        raise RuntimeError("the native MSM extension is not built (pip install -e .)")
    old: tuple[int, int, int] = _msm.batch_affine(batch, min_g1, min_g2)
    return old


def first_bad_point(points: np.ndarray) -> int:
    """The first row of a zkey point section that is neither infinity nor a point of its curve
    (coordinates reduced, y^2 = x^3 + b), or -1. G1 for (n, 2, 12), G2 for (n, 2, 2, 12)."""
    if _msm is None:
        raise RuntimeError("the native MSM extension is not built (pip install -e .)")
    group = 2 if points.ndim == 4 else 1
    return int(_msm.first_bad(group, np.ascontiguousarray(points)))
