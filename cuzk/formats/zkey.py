"""Reader and writer for Groth16 ``.zkey`` proving keys (iden3 container, magic ``zkey``).

Sections (snarkjs ``zkey_utils.js`` / ``zkey_new.js``):

 1 header        u32 protocol (1 = Groth16, 2 = PLONK, 10 = FFLONK)
 2 Groth16 header n8q, q, n8r, r, nVars, nPublic, domainSize, alpha1 (G1), beta1 (G1),
                 beta2 (G2), gamma2 (G2), delta1 (G1), delta2 (G2)
 3 IC            nPublic+1 G1 points
 4 coefficients  u32 m, then m x (u32 matrix, u32 constraint, u32 signal, n8r-byte value)
 5 A             nVars G1          6 B1  nVars G1          7 B2  nVars G2
 8 C             nVars-nPublic-1 G1 (private signals only)
 9 H             domainSize G1
10 contributions 64-byte csHash, u32 count, count x contribution (MPC transcript)

Points are affine, coordinates in Montgomery form (R = 2^(8*n8q)), little-endian, infinity is all
zeros. They are exposed as zero-copy uint32 views: G1 ``(n, 2, n8q/4)`` = (x, y), G2
``(n, 2, 2, n8q/4)`` = ((x.c0, x.c1), (y.c0, y.c1)).

Coefficient values: snarkjs stores ``c * R^2 mod r`` with R = 2^(8*n8r) (zkey_new.js converts the
r1cs value c to Montgomery form, multiplies by the Montgomery form of R^2 and writes the result
back in normal form). Read as a Montgomery number that is ``c * R``, so a Montgomery product with
a normal-form witness value w gives ``c * w * R``, the Montgomery form of c*w: snarkjs's prover
gets a, b already in Montgomery form. Section 4 holds only A (matrix 0) and B (matrix 1) terms;
C is implied by the witness. After the r1cs terms come nPublic+1 extra A terms
``(0, nConstraints + s, s, 1)`` that bind the public inputs.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np

from cuzk.curves import Curve, curve_for_prime, unknown_base_prime
from cuzk.formats.binfile import (
    BinFile,
    read_bigint,
    read_binfile,
    read_u32,
    u32_view,
    write_binfile,
)
from cuzk.formats.limbs import ints_to_limbs, limbs_less_than, limbs_to_ints
from cuzk.formats.r1cs import MATRIX_C, R1CS

GROTH16 = 1
_PROTOCOLS = {1: "groth16", 2: "plonk", 10: "fflonk"}
S_HEADER, S_GROTH, S_IC, S_COEFS, S_A, S_B1, S_B2, S_C, S_H, S_CONTRIB = range(1, 11)
CS_HASH_BYTES = 64


def coefficient_dtype(n8r: int = 32) -> np.dtype:
    """Record layout of one section-4 entry (packed, 12 + n8r bytes)."""
    return np.dtype(
        [("matrix", "<u4"), ("constraint", "<u4"), ("signal", "<u4"), ("value", "<u4", (n8r // 4,))]
    )


@dataclass
class ZKey:
    """A Groth16 proving key; arrays are views of the file buffer when read (do not mutate)."""

    curve: Curve
    n_vars: int
    n_public: int
    domain_size: int
    alpha1: np.ndarray  # (2, k)     G1, Montgomery Fq limbs, k = n8q/4
    beta1: np.ndarray  # (2, k)
    beta2: np.ndarray  # (2, 2, k)  G2
    gamma2: np.ndarray  # (2, 2, k)
    delta1: np.ndarray  # (2, k)
    delta2: np.ndarray  # (2, 2, k)
    ic: np.ndarray  # (n_public + 1, 2, k)
    coeffs: np.ndarray  # (m,) coefficient_dtype(n8r); values are c*R^2 mod r (see module doc)
    a: np.ndarray  # (n_vars, 2, k)
    b1: np.ndarray  # (n_vars, 2, k)
    b2: np.ndarray  # (n_vars, 2, 2, k)
    c: np.ndarray  # (n_vars - n_public - 1, 2, k)
    h: np.ndarray  # (domain_size, 2, k)
    mpc_params: bytes | None = None  # raw section 10; None: write a fresh one (no contributions)
    path: str | None = None

    @property
    def power(self) -> int:
        return self.domain_size.bit_length() - 1

    @property
    def cs_hash(self) -> bytes | None:
        return None if self.mpc_params is None else self.mpc_params[:CS_HASH_BYTES]

    @property
    def nbytes(self) -> int:
        """Bytes held by the key's arrays (what a resident key costs in host memory)."""
        arrays = (
            self.alpha1,
            self.beta1,
            self.beta2,
            self.gamma2,
            self.delta1,
            self.delta2,
            self.ic,
            self.coeffs,
            self.a,
            self.b1,
            self.b2,
            self.c,
            self.h,
        )
        return sum(int(a.nbytes) for a in arrays)


def read_zkey(path: str | os.PathLike[str], *, mmap: bool = False) -> ZKey:
    """Read a Groth16 zkey, checking curve, header and every section's exact size."""
    bf = read_binfile(path, "zkey", 2, mmap=mmap)
    proto = read_u32(bf.payload(S_HEADER, "protocol header", expected_size=4), 0)
    if proto != GROTH16:
        name = _PROTOCOLS.get(proto, f"unknown protocol {proto}")
        raise bf.error(f"section 1 (header): not a Groth16 key ({name})")

    hdr = bf.payload(S_GROTH, "Groth16 header")
    if hdr.shape[0] < 4:
        raise bf.error("section 2 (Groth16 header) is too short")
    n8q = read_u32(hdr, 0)
    if n8q == 0 or n8q % 8 or hdr.shape[0] < 8 + n8q:
        raise bf.error(f"section 2 (Groth16 header): bad base field size {n8q}")
    q = read_bigint(hdr, 4, n8q)
    try:
        curve = curve_for_prime(q)
    except KeyError:
        raise bf.error(f"section 2 (Groth16 header): {unknown_base_prime(q)}") from None
    if n8q != curve.n8q:
        raise bf.error(
            f"section 2 (Groth16 header): base field size {n8q} is not {curve.name}'s ({curve.n8q})"
        )
    n8r = read_u32(hdr, 4 + n8q)
    expected = 20 + n8q + n8r + 18 * n8q
    if n8r != curve.n8r or hdr.shape[0] != expected:
        raise bf.error(
            f"section 2 (Groth16 header) is {hdr.shape[0]} bytes with n8r={n8r},"
            f" expected {expected}"
        )
    r = read_bigint(hdr, 8 + n8q, n8r)
    if r != curve.r:
        raise bf.error(
            f"section 2 (Groth16 header): scalar field prime {r:#x} does not match {curve.name}"
        )
    o = 8 + n8q + n8r
    n_vars, n_public, domain_size = (read_u32(hdr, o + 4 * i) for i in range(3))
    if domain_size == 0 or domain_size & (domain_size - 1):
        raise bf.error(
            f"section 2 (Groth16 header): domain size {domain_size} is not a power of two"
        )
    if n_public + 1 > n_vars:
        raise bf.error(
            f"section 2 (Groth16 header): {n_public} public signals but {n_vars} signals"
        )
    k = n8q // 4
    g1, g2 = 2 * n8q, 4 * n8q
    o += 12
    pts = []
    for size in (g1, g1, g2, g2, g1, g2):  # alpha1 beta1 beta2 gamma2 delta1 delta2
        pts.append(u32_view(hdr, o, size // 4))
        o += size
    alpha1, beta1 = pts[0].reshape(2, k), pts[1].reshape(2, k)
    beta2, gamma2 = pts[2].reshape(2, 2, k), pts[3].reshape(2, 2, k)
    delta1, delta2 = pts[4].reshape(2, k), pts[5].reshape(2, 2, k)

    def points(sid: int, name: str, n: int, g2_points: bool = False) -> np.ndarray:
        size = g2 if g2_points else g1
        payload = bf.payload(sid, name, expected_size=n * size)
        shape = (n, 2, 2, k) if g2_points else (n, 2, k)
        return u32_view(payload, 0, n * size // 4).reshape(shape)

    ic = points(S_IC, "IC", n_public + 1)
    coeffs = _read_coeffs(bf, n8r, n_vars, domain_size, curve)
    a = points(S_A, "A", n_vars)
    b1 = points(S_B1, "B1", n_vars)
    b2 = points(S_B2, "B2", n_vars, g2_points=True)
    c = points(S_C, "C", n_vars - n_public - 1)
    h = points(S_H, "H", domain_size)
    mpc = None
    if bf.has(S_CONTRIB):
        raw = bf.payload(S_CONTRIB, "contributions")
        if raw.shape[0] < CS_HASH_BYTES + 4:
            raise bf.error("section 10 (contributions) is too short for its csHash and count")
        mpc = raw.tobytes()
    return ZKey(
        curve=curve,
        n_vars=n_vars,
        n_public=n_public,
        domain_size=domain_size,
        alpha1=alpha1,
        beta1=beta1,
        beta2=beta2,
        gamma2=gamma2,
        delta1=delta1,
        delta2=delta2,
        ic=ic,
        coeffs=coeffs,
        a=a,
        b1=b1,
        b2=b2,
        c=c,
        h=h,
        mpc_params=mpc,
        path=bf.path,
    )


def _read_coeffs(bf: BinFile, n8r: int, n_vars: int, domain_size: int, curve: Curve) -> np.ndarray:
    payload = bf.payload(S_COEFS, "coefficients")
    if payload.shape[0] < 4:
        raise bf.error("section 4 (coefficients) is too short")
    m = read_u32(payload, 0)
    dt = coefficient_dtype(n8r)
    if payload.shape[0] != 4 + m * dt.itemsize:
        raise bf.error(
            f"section 4 (coefficients) is {payload.shape[0]} bytes, expected {4 + m * dt.itemsize} "
            f"for {m} coefficients"
        )
    coeffs = payload[4:].view(dt) if m else np.zeros(0, dtype=dt)
    if m:
        if int(coeffs["matrix"].max()) > 1:
            raise bf.error("section 4 (coefficients): a matrix id other than A (0) or B (1)")
        if int(coeffs["constraint"].max()) >= domain_size:
            raise bf.error("section 4 (coefficients): a constraint index lies outside the domain")
        if int(coeffs["signal"].max()) >= n_vars:
            raise bf.error(
                "section 4 (coefficients): a coefficient refers to a signal beyond nVars"
            )
        if not limbs_less_than(coeffs["value"], curve.r).all():
            raise bf.error("section 4 (coefficients): a value is not below the scalar field prime")
    return coeffs


def write_zkey(path: str | os.PathLike[str], key: ZKey) -> None:
    """Write ``key`` as a zkey snarkjs reads (version 1, all ten sections).

    With ``mpc_params=None`` section 10 holds no contributions and a csHash that is the BLAKE2b-512
    of sections 2..9 as written (in file order): an identifier of this key, not snarkjs's
    ceremony transcript hash
    (which needs the powers-of-tau file; ``snarkjs zkey verify`` is therefore not applicable).
    """
    curve = key.curve
    k = curve.fq_limbs
    _check_shape(key.alpha1, (2, k), "alpha1")
    _check_shape(key.beta1, (2, k), "beta1")
    _check_shape(key.delta1, (2, k), "delta1")
    for name in ("beta2", "gamma2", "delta2"):
        _check_shape(getattr(key, name), (2, 2, k), name)
    _check_shape(key.ic, (key.n_public + 1, 2, k), "ic")
    _check_shape(key.a, (key.n_vars, 2, k), "a")
    _check_shape(key.b1, (key.n_vars, 2, k), "b1")
    _check_shape(key.b2, (key.n_vars, 2, 2, k), "b2")
    _check_shape(key.c, (key.n_vars - key.n_public - 1, 2, k), "c")
    _check_shape(key.h, (key.domain_size, 2, k), "h")
    if key.domain_size <= 0 or key.domain_size & (key.domain_size - 1):
        raise ValueError(f"domain_size {key.domain_size} is not a power of two")
    dt = coefficient_dtype(curve.n8r)
    coeffs = np.ascontiguousarray(key.coeffs)
    if coeffs.dtype != dt:
        coeffs = coeffs.astype(dt)

    groth = [
        curve.n8q.to_bytes(4, "little"),
        curve.q.to_bytes(curve.n8q, "little"),
        curve.n8r.to_bytes(4, "little"),
        curve.r.to_bytes(curve.n8r, "little"),
        key.n_vars.to_bytes(4, "little"),
        key.n_public.to_bytes(4, "little"),
        key.domain_size.to_bytes(4, "little"),
        _u32(key.alpha1),
        _u32(key.beta1),
        _u32(key.beta2),
        _u32(key.gamma2),
        _u32(key.delta1),
        _u32(key.delta2),
    ]
    # The section order of ``snarkjs groth16 setup``: a key read and re-written is byte-identical.
    body: list[tuple[int, list]] = [
        (S_GROTH, groth),
        (S_COEFS, [len(coeffs).to_bytes(4, "little"), coeffs]),
        (S_IC, [_u32(key.ic)]),
        (S_H, [_u32(key.h)]),
        (S_C, [_u32(key.c)]),
        (S_A, [_u32(key.a)]),
        (S_B1, [_u32(key.b1)]),
        (S_B2, [_u32(key.b2)]),
    ]
    mpc = key.mpc_params
    if mpc is None:
        hasher = hashlib.blake2b(digest_size=CS_HASH_BYTES)
        for _, chunks in body:
            for chunk in chunks:
                hasher.update(
                    chunk
                    if isinstance(chunk, bytes)
                    else memoryview(chunk.reshape(-1).view(np.uint8))
                )
        mpc = hasher.digest() + (0).to_bytes(4, "little")
    sections = [(S_HEADER, [GROTH16.to_bytes(4, "little")]), *body, (S_CONTRIB, [mpc])]
    write_binfile(path, "zkey", 1, sections)


def coefficients_from_r1cs(r1cs: R1CS) -> np.ndarray:
    """Section 4 exactly as ``snarkjs groth16 setup`` builds it from an r1cs (same order, values
    ``c * R^2 mod r``), including the nPublic+1 public-input binding rows."""
    cons = r1cs.constraints
    if cons is None:
        raise ValueError("r1cs was read without constraints")
    curve = r1cs.curve
    keep = cons.matrix != MATRIX_C
    n_extra = r1cs.n_public + 1
    m = int(keep.sum()) + n_extra
    out = np.zeros(m, dtype=coefficient_dtype(curve.n8r))
    n_ab = m - n_extra
    out["matrix"][:n_ab] = cons.matrix[keep]
    out["constraint"][:n_ab] = cons.constraint[keep]
    out["signal"][:n_ab] = cons.signal[keep]
    out["value"][:n_ab] = encode_coefficients(cons.value[keep], curve)
    s = np.arange(n_extra, dtype=np.uint32)
    out["matrix"][n_ab:] = 0
    out["constraint"][n_ab:] = r1cs.n_constraints + s
    out["signal"][n_ab:] = s
    out["value"][n_ab:] = encode_coefficients(ints_to_limbs([1], curve.fr_limbs), curve)[0]
    return out


def encode_coefficients(values: np.ndarray, curve: Curve) -> np.ndarray:
    """Normal-form coefficients c -> the zkey's stored ``c * R^2 mod r`` (vectorized over the
    distinct values, which are few: circuits reuse the same constants)."""
    r2 = pow(2, 2 * 8 * curve.n8r, curve.r)
    return _map_distinct(values, lambda c: c * r2 % curve.r, curve)


def decode_coefficients(values: np.ndarray, curve: Curve) -> np.ndarray:
    """Stored zkey coefficient values -> normal-form c (inverse of ``encode_coefficients``)."""
    r2_inv = pow(pow(2, 2 * 8 * curve.n8r, curve.r), -1, curve.r)
    return _map_distinct(values, lambda v: v * r2_inv % curve.r, curve)


def _map_distinct(values: np.ndarray, fn, curve: Curve) -> np.ndarray:
    arr = np.ascontiguousarray(values, dtype=np.uint32).reshape(-1, curve.fr_limbs)
    if arr.shape[0] == 0:
        return arr.copy()
    uniq, inverse = distinct_rows(arr)
    mapped = ints_to_limbs((fn(v) for v in limbs_to_ints(uniq)), curve.fr_limbs)
    return mapped[inverse.reshape(-1)]


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying by it is a bijection on 64-bit words


def row_hashes(arr: np.ndarray) -> np.ndarray:
    """One 64-bit word per uint32 row (a multiply-xor chain over its limbs, wrapping)."""
    h = np.zeros(arr.shape[0], dtype=np.uint64)
    for j in range(arr.shape[1]):
        h = (h * _MIX) ^ (arr[:, j].astype(np.uint64) << np.uint64(17 * (j % 2)))
    return h


def distinct_rows(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct rows, index of each row's distinct row)``, as ``np.unique(axis=0)`` gives
    them (in another order). ``np.unique(axis=0)`` sorts the rows as opaque records, about 1 s
    per 200k coefficients, paid at every key load; sorting one 64-bit hash per row is linear
    in practice. Every row is compared with its representative, so a hash collision cannot
    merge two values: it falls back to the exact sort."""
    _, first, inverse = np.unique(row_hashes(arr), return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    uniq = arr[first]
    if np.array_equal(uniq[inverse], arr):
        return uniq, inverse
    uniq, inverse = np.unique(arr, axis=0, return_inverse=True)
    return uniq, inverse.reshape(-1)


def _u32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype="<u4")


def _check_shape(a: np.ndarray, shape: tuple[int, ...], name: str) -> None:
    if tuple(a.shape) != shape:
        raise ValueError(f"zkey {name}: shape {tuple(a.shape)}, expected {shape}")
