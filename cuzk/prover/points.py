"""Conversions between snarkjs point encodings and py_arkworks_bls12381 points.

zkey sections hold affine points with Montgomery-form Fq coordinates (all zeros = infinity);
proof.json / verification_key.json hold decimal strings. arkworks wants normal-form LE bytes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

import numpy as np
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk.curves import Curve

_THREADS = os.cpu_count() or 1
P = TypeVar("P", G1Point, G2Point)


# Coordinates: up to this many, Python integers (about 2 us each: 70 ms at the limit) beat
# importing numba and loading its cached kernel (about 0.9 s of a one-proof process); a key's
# header and IC points (one per public signal) stay on this side.
_SMALL = 1 << 15


def _fq_normal_bytes(curve: Curve, mont: np.ndarray) -> np.ndarray:
    """(n, k, limbs) Montgomery uint32 -> same shape, normal form (vectorised in kernels.field;
    header and IC points in Python integers, so loading a key imports no numba)."""
    flat = np.ascontiguousarray(mont.reshape(-1, curve.fq_limbs))
    if flat.shape[0] <= _SMALL:
        n8 = curve.n8q
        r_inv = pow(1 << (8 * n8), -1, curve.q)
        raw = flat.astype("<u4").tobytes()
        out = b"".join(
            (int.from_bytes(raw[i : i + n8], "little") * r_inv % curve.q).to_bytes(n8, "little")
            for i in range(0, len(raw), n8)
        )
        return np.frombuffer(out, dtype="<u4").reshape(mont.shape).copy()
    from kernels import field  # numba: only for whole sections (the arkworks MSM path)

    return field.FQ.from_mont(flat, threads=_THREADS).reshape(mont.shape)


def _fq_mont(curve: Curve, normal: np.ndarray) -> np.ndarray:
    from kernels import field  # numba: keygen writes whole sections

    flat = np.ascontiguousarray(normal.reshape(-1, curve.fq_limbs))
    return field.FQ.to_mont(flat, threads=_THREADS).reshape(normal.shape)


def _from_mont_array(curve: Curve, arr: np.ndarray, kind: type[P], coords: int) -> list[P]:
    raw = _fq_normal_bytes(curve, arr).tobytes()
    size = coords * curve.n8q
    identity = kind.identity()
    zero = bytes(size)
    out: list[P] = []
    for off in range(0, len(raw), size):
        chunk = raw[off : off + size]
        out.append(identity if chunk == zero else kind.from_xy_bytes_unchecked_le(chunk))
    return out


def g1_from_mont_array(curve: Curve, arr: np.ndarray) -> list[G1Point]:
    """zkey G1 section (n, 2, 12) -> points, unchecked: the zkey is trusted once loaded.
    Infinity (all zeros) is one shared identity object."""
    return _from_mont_array(curve, arr, G1Point, 2)


def g2_from_mont_array(curve: Curve, arr: np.ndarray) -> list[G2Point]:
    """zkey G2 section (n, 2, 2, 12) -> points, as g1_from_mont_array."""
    return _from_mont_array(curve, arr, G2Point, 4)


def _to_mont_array(curve: Curve, points: Sequence[P], shape: tuple[int, ...]) -> np.ndarray:
    return xy_bytes_to_mont_array(curve, b"".join(p.to_xy_bytes_le() for p in points), shape)


def xy_bytes_to_mont_array(curve: Curve, raw: bytes, shape: tuple[int, ...]) -> np.ndarray:
    """Points' ``to_xy_bytes_le`` concatenated -> their zkey section: ``shape`` is (2,) for
    G1, (2, 2) for G2."""
    per_point = int(np.prod(shape)) * curve.n8q
    normal = np.frombuffer(raw, dtype="<u4").reshape(len(raw) // per_point, *shape, curve.fq_limbs)
    return _fq_mont(curve, normal)


def g1_to_mont_array(curve: Curve, points: Sequence[G1Point]) -> np.ndarray:
    return _to_mont_array(curve, points, (2,))


def g2_to_mont_array(curve: Curve, points: Sequence[G2Point]) -> np.ndarray:
    return _to_mont_array(curve, points, (2, 2))


def _ints(raw: bytes, n8: int) -> list[int]:
    return [int.from_bytes(raw[i : i + n8], "little") for i in range(0, len(raw), n8)]


def g1_to_json(curve: Curve, p: G1Point) -> list[str]:
    """snarkjs's toObject form: [x, y, "1"], infinity as ["0", "1", "0"]."""
    raw = p.to_xy_bytes_le()
    if raw == bytes(len(raw)):
        return ["0", "1", "0"]
    x, y = _ints(raw, curve.n8q)
    return [str(x), str(y), "1"]


def g2_to_json(curve: Curve, p: G2Point) -> list[list[str]]:
    raw = p.to_xy_bytes_le()
    if raw == bytes(len(raw)):
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    x0, x1, y0, y1 = _ints(raw, curve.n8q)
    return [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]


def _coord(value: object, q: int, what: str) -> int:
    try:
        v = int(str(value))
    except ValueError as exc:
        raise ValueError(f"{what}: {value!r} is not an integer") from exc
    if not 0 <= v < q:
        raise ValueError(f"{what}: {v} is not a base-field element")
    return v


def g1_from_json(curve: Curve, obj: object, what: str) -> G1Point:
    """Parse and fully check (on curve, in subgroup) a G1 point from snarkjs JSON."""
    if not isinstance(obj, list) or len(obj) != 3:
        raise ValueError(f"{what}: expected [x, y, z], got {obj!r}")
    x, y, z = (_coord(v, curve.q, what) for v in obj)
    if z == 0:
        return G1Point.identity()
    if z != 1:
        raise ValueError(f"{what}: expected affine coordinates (z = 1)")
    data = x.to_bytes(curve.n8q, "little") + y.to_bytes(curve.n8q, "little")
    try:
        return G1Point.from_xy_bytes_le(data)
    except Exception as exc:
        raise ValueError(f"{what}: not a point of the G1 subgroup") from exc


def g2_from_json(curve: Curve, obj: object, what: str) -> G2Point:
    if not (
        isinstance(obj, list)
        and len(obj) == 3
        and all(isinstance(c, list) and len(c) == 2 for c in obj)
    ):
        raise ValueError(f"{what}: expected [[x0, x1], [y0, y1], [z0, z1]], got {obj!r}")
    (x0, x1), (y0, y1), (z0, z1) = ((_coord(v, curve.q, what) for v in c) for c in obj)
    if (z0, z1) == (0, 0):
        return G2Point.identity()
    if (z0, z1) != (1, 0):
        raise ValueError(f"{what}: expected affine coordinates (z = 1)")
    data = b"".join(v.to_bytes(curve.n8q, "little") for v in (x0, x1, y0, y1))
    try:
        return G2Point.from_xy_bytes_le(data)
    except Exception as exc:
        raise ValueError(f"{what}: not a point of the G2 subgroup") from exc


def scalars_from_array(arr: np.ndarray) -> list[Scalar]:
    """(n, 8) uint32 normal-form Fr -> arkworks scalars (bytes slices, no big-int detour)."""
    raw = np.ascontiguousarray(arr, dtype="<u4").tobytes()
    return [Scalar.from_le_bytes(raw[i : i + 32]) for i in range(0, len(raw), 32)]


def scalar(curve: Curve, value: int) -> Scalar:
    return Scalar(value % curve.r)
