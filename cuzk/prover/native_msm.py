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
from typing import Any

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.config import FIELD_ARITH

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


def msm_g1(points: np.ndarray, scalars: np.ndarray, threads: int = 1) -> G1Point:
    """sum(scalars[i] * points[i]); points: a zkey G1 section (n, 2, 12) uint32, Montgomery;
    scalars: (n, 8) uint32 normal form. ``threads`` > 1 splits the windows among threads."""
    out = _run(1, points, scalars, threads)
    return G1Point.identity() if out is None else G1Point.from_xy_bytes_unchecked_le(out)


def msm_g2(points: np.ndarray, scalars: np.ndarray, threads: int = 1) -> G2Point:
    """As :func:`msm_g1` over a zkey G2 section (n, 2, 2, 12)."""
    out = _run(2, points, scalars, threads)
    return G2Point.identity() if out is None else G2Point.from_xy_bytes_unchecked_le(out)


def first_bad_point(points: np.ndarray) -> int:
    """The first row of a zkey point section that is neither infinity nor a point of its curve
    (coordinates reduced, y^2 = x^3 + b), or -1. G1 for (n, 2, 12), G2 for (n, 2, 2, 12)."""
    if _msm is None:
        raise RuntimeError("the native MSM extension is not built (pip install -e .)")
    group = 2 if points.ndim == 4 else 1
    return int(_msm.first_bad(group, np.ascontiguousarray(points)))
