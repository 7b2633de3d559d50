"""BLS12-381 G1 points between arkworks and the kernels' layouts (host side, Python ints).

Affine rows are the zkey's ``(2, 12)`` Montgomery uint32 limbs (all-zero: infinity); XYZZ rows
are ``(48,)`` limbs X, Y, ZZ, ZZZ (x = X/ZZ, y = Y/ZZZ, ZZ = 0: infinity), what the C++ MSM
kernels (kernels/gpu/cuda) return.
"""

from __future__ import annotations

import numpy as np

from kernels.curves import BLS12_381
from kernels.field import int_to_limbs

L = 12                 # Fq limbs


_Q = BLS12_381.q
_R_INV_Q = pow(1 << (32 * L), -1, _Q)
_R_Q = (1 << (32 * L)) % _Q


def _limbs_int(a: np.ndarray) -> int:
    return int.from_bytes(np.ascontiguousarray(a, dtype="<u4").tobytes(), "little")


def mont_int(a: np.ndarray) -> int:
    """Montgomery limbs -> Fq element as a Python int."""
    return _limbs_int(a) * _R_INV_Q % _Q


def _int_mont(x: int) -> np.ndarray:
    return int_to_limbs(x * _R_Q % _Q, L)


def xyzz_to_affine_ints(p: np.ndarray) -> tuple[int, int] | None:
    """(48,) XYZZ limbs -> affine (x, y) ints, None for infinity (host side, big ints)."""
    zz = mont_int(p[24:36])
    if zz == 0:
        return None
    zzz = mont_int(p[36:48])
    x = mont_int(p[0:12]) * pow(zz, -1, _Q) % _Q
    y = mont_int(p[12:24]) * pow(zzz, -1, _Q) % _Q
    return x, y


def xyzz_to_g1(p: np.ndarray):  # -> G1Point
    """(48,) XYZZ limbs -> py_arkworks_bls12381.G1Point (unchecked: the kernels' own output)."""
    from py_arkworks_bls12381 import G1Point

    aff = xyzz_to_affine_ints(p)
    if aff is None:
        return G1Point.identity()
    raw = aff[0].to_bytes(48, "little") + aff[1].to_bytes(48, "little")
    return G1Point.from_xy_bytes_unchecked_le(raw)


def g1_to_affine_mont(points: list) -> np.ndarray:
    """G1Points -> (n, 2, 12) Montgomery uint32, infinity as zeros (the zkey layout)."""
    out = np.zeros((len(points), 2, L), np.uint32)
    for i, pt in enumerate(points):
        raw = pt.to_xy_bytes_le()
        if raw == bytes(len(raw)):
            continue
        out[i, 0] = _int_mont(int.from_bytes(raw[:48], "little"))
        out[i, 1] = _int_mont(int.from_bytes(raw[48:], "little"))
    return out


