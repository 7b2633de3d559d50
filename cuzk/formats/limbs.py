"""Field elements as numpy limb arrays: ``(n, k)`` uint32 little-endian, as snarkjs writes them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def ints_to_limbs(values: Iterable[int], n_limbs: int) -> np.ndarray:
    """Encode non-negative ints below 2^(32*n_limbs) as an ``(n, n_limbs)`` uint32 array."""
    n8 = 4 * n_limbs
    raw = b"".join(int(v).to_bytes(n8, "little") for v in values)
    return np.frombuffer(raw, dtype="<u4").reshape(-1, n_limbs).astype(np.uint32, copy=True)


def limbs_to_ints(limbs: np.ndarray) -> list[int]:
    """Decode an ``(n, k)`` uint32 limb array into Python ints."""
    arr = np.ascontiguousarray(limbs, dtype="<u4")
    n8 = 4 * arr.shape[-1]
    raw = arr.tobytes()
    return [int.from_bytes(raw[i : i + n8], "little") for i in range(0, len(raw), n8)]


def limbs_less_than(limbs: np.ndarray, modulus: int) -> np.ndarray:
    """Per row: is the value strictly below ``modulus``? Vectorized (compares limb by limb)."""
    arr = np.asarray(limbs, dtype=np.uint32)
    k = arr.shape[-1]
    mod = np.array(_split(modulus, k), dtype=np.uint32)
    less = np.zeros(arr.shape[:-1], dtype=bool)
    equal = np.ones(arr.shape[:-1], dtype=bool)
    for i in range(k - 1, -1, -1):  # most significant limb first; k is 8 or 12
        less |= equal & (arr[..., i] < mod[i])
        equal &= arr[..., i] == mod[i]
    return less


def _split(value: int, k: int) -> Sequence[int]:
    return [(value >> (32 * i)) & 0xFFFFFFFF for i in range(k)]
