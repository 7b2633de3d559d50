"""The C++ kernels (kernels/gpu/cuda) on their host twin: field arithmetic against Python
integers, the G1 and G2 MSM driver against arkworks, on the edge cases of Pippenger's buckets
(doubling inside a bucket, cancellation, the top signed digit, a bucket spread over many
chunks and reduction rounds). The same tests on a device are in test_gpu_device.py."""

from __future__ import annotations

import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk.curves import BLS12_381
from cuzk.prover.points import g1_to_mont_array, g2_to_mont_array
from kernels.field import ints_to_array
from kernels.gpu import cxx_msm
from kernels.gpu.cxx_kernels import HostKernels, host_kernels
from kernels.gpu.cxx_msm import G1, G2, CxxMsm, device_bytes_phases

R = BLS12_381.r
P = BLS12_381.q
MONT = 1 << 384


@pytest.fixture(scope="module")
def kernels() -> HostKernels:
    return host_kernels()


def _mont_rows(values: list[int], words: int) -> np.ndarray:
    return ints_to_array([v * MONT % P for v in values], words)


def _launch(kernels, name: str, n: int, a: np.ndarray, b: np.ndarray, words: int) -> np.ndarray:
    """A field-ops kernel on any runner (host twin or device): host arrays in and out."""
    xp = kernels.xp
    out = xp.zeros((4, n, words), dtype=np.uint32)
    kernels.launch(name, n, n, xp.asarray(a), xp.asarray(b), out)
    kernels.synchronize()
    return out.get() if hasattr(out, "get") else out


def _ints(rows: np.ndarray) -> list[int]:
    inv = pow(MONT, -1, P)
    return [int.from_bytes(r.astype("<u4").tobytes(), "little") * inv % P for r in rows]


def test_fq_ops_match_integers(kernels):
    check_fq_ops(kernels)


def check_fq_ops(kernels) -> None:
    rng = random.Random(3)
    edge = [0, 1, 2, P - 1, P - 2, (P - 1) // 2, 1 << 380, (1 << 381) % P]
    a = edge + [rng.randrange(P) for _ in range(200)]
    b = list(reversed(edge)) + [rng.randrange(P) for _ in range(200)]
    n = len(a)
    out = _launch(kernels, "g1_field_ops", n, _mont_rows(a, 12), _mont_rows(b, 12), 12)
    assert _ints(out[0]) == [x * y % P for x, y in zip(a, b, strict=False)]
    assert _ints(out[1]) == [(x + y) % P for x, y in zip(a, b, strict=False)]
    assert _ints(out[2]) == [(x - y) % P for x, y in zip(a, b, strict=False)]
    assert _ints(out[3]) == [x * x % P for x in a]
    # results are fully reduced, not merely congruent
    assert all(int.from_bytes(r.astype("<u4").tobytes(), "little") < P for r in out.reshape(-1, 12))


def test_fq2_ops_match_integers(kernels):
    check_fq2_ops(kernels)


def check_fq2_ops(kernels) -> None:
    rng = random.Random(4)
    n = 100
    a = [(rng.randrange(P), rng.randrange(P)) for _ in range(n - 2)] + [(0, P - 1), (P - 1, 0)]
    b = [(rng.randrange(P), rng.randrange(P)) for _ in range(n - 2)] + [(P - 1, P - 1), (1, 0)]

    def rows(v):
        return _mont_rows([c for pair in v for c in pair], 12).reshape(n, 24)

    out = _launch(kernels, "g2_field_ops", n, rows(a), rows(b), 24)

    def pairs(r):
        flat = _ints(r.reshape(-1, 12))
        return list(zip(flat[0::2], flat[1::2], strict=False))

    ab = list(zip(a, b, strict=True))
    mul = [((x0 * y0 - x1 * y1) % P, (x0 * y1 + x1 * y0) % P) for (x0, x1), (y0, y1) in ab]
    assert pairs(out[0]) == mul
    assert pairs(out[1]) == [((x0 + y0) % P, (x1 + y1) % P) for (x0, x1), (y0, y1) in ab]
    assert pairs(out[2]) == [((x0 - y0) % P, (x1 - y1) % P) for (x0, x1), (y0, y1) in ab]
    assert pairs(out[3]) == [((x0 * x0 - x1 * x1) % P, 2 * x0 * x1 % P) for x0, x1 in a]


def _case(curve, m: int, scalars: list[int], seed: int, distinct: int = 8):
    rng = random.Random(seed)
    gen = G1Point() if curve is G1 else G2Point()
    base = [gen * Scalar(rng.randrange(1, R)) for _ in range(distinct)]
    pts = [base[i % distinct] for i in range(m)]
    conv = g1_to_mont_array if curve is G1 else g2_to_mont_array
    rows = np.ascontiguousarray(conv(BLS12_381, pts).reshape(m, curve.affine_words))
    expected = curve.identity()
    for p, s in zip(pts, scalars, strict=False):
        if s % R:
            expected = expected + p * Scalar(s % R)
    return rows, ints_to_array(scalars, 8), expected


def _run(kernels, curve, m, scalars, seed, c=None, distinct=8):
    rows, sc, expected = _case(curve, m, scalars, seed, distinct)
    xp = kernels.xp
    got = CxxMsm(kernels).msm(curve, xp.asarray(rows), xp.asarray(sc), plan=c)
    assert got == expected


@pytest.mark.parametrize("curve", [G1, G2], ids=["g1", "g2"])
@pytest.mark.parametrize("c", [None, 4, 7])
def test_msm_random_and_small_scalars(kernels, curve, c):
    check_random_and_small_scalars(kernels, curve, c)


def check_random_and_small_scalars(kernels, curve, c) -> None:
    rng = random.Random(10 + (c or 0))
    m = 300
    sc = [rng.choice([0, 1, 2, 3, R - 1, R - 2, rng.randrange(R), rng.randrange(1 << 20)])
          for _ in range(m)]
    _run(kernels, curve, m, sc, seed=c or 1, c=c)


@pytest.mark.parametrize("curve", [G1, G2], ids=["g1", "g2"])
def test_msm_top_signed_digit_goes_to_the_last_bucket(kernels, curve):
    check_top_signed_digit(kernels, curve)


def check_top_signed_digit(kernels, curve) -> None:
    """Digits equal to +-2^(c-1) (the last bucket of a window) and the carries they cause."""
    c = 5
    half = 1 << (c - 1)
    sc = [half, half * (1 << c), R - half, (half << c) | half, half - 1, half + 1, 3 * half]
    sc += [sum(half << (c * w) for w in range(k)) % R for k in range(1, 8)]
    _run(kernels, curve, len(sc), sc, seed=5, c=c, distinct=len(sc))


@pytest.mark.parametrize("curve", [G1, G2], ids=["g1", "g2"])
def test_msm_doubling_and_cancellation_inside_buckets(kernels, curve):
    check_doubling_and_cancellation(kernels, curve)


def check_doubling_and_cancellation(kernels, curve) -> None:
    """Equal points in one bucket double; P and -P in one bucket cancel (to infinity)."""
    rng = random.Random(7)
    gen = G1Point() if curve is G1 else G2Point()
    p = gen * Scalar(rng.randrange(1, R))
    pts = [p, p, p, -p, -p, p, gen, -gen, p, p, gen]
    sc = [5, 5, 5, 5, 5, R - 5, 9, 9, 6, 6, 7]
    conv = g1_to_mont_array if curve is G1 else g2_to_mont_array
    rows = np.ascontiguousarray(conv(BLS12_381, pts).reshape(len(pts), curve.affine_words))
    # bucket 5: p+p (a doubling) +p -p -p -p = 0; bucket 9: gen - gen = 0; bucket 6: 2p
    expected = p * Scalar(12) + gen * Scalar(7)
    xp = kernels.xp
    got = CxxMsm(kernels).msm(curve, xp.asarray(rows), xp.asarray(ints_to_array(sc, 8)), plan=4)
    assert got == expected


@pytest.mark.parametrize("curve", [G1, G2], ids=["g1", "g2"])
def test_msm_hot_bucket_spreads_over_chunks_and_rounds(kernels, curve, monkeypatch):
    check_hot_bucket(kernels, curve, monkeypatch)


def check_hot_bucket(kernels, curve, monkeypatch) -> None:
    """Scalar 1 everywhere: one bucket of m records, cut into chunks and reduced in rounds."""
    monkeypatch.setattr(cxx_msm, "ACC_CHUNK", 4)
    monkeypatch.setattr(cxx_msm, "RED_CHUNK", 2)
    m = 150                                    # 38 chunks -> 19 -> 10 -> 5 -> 3 -> 2 -> 1
    _run(kernels, curve, m, [1] * (m - 3) + [2, R - 1, 0], seed=11, c=6)


def test_msm_points_at_infinity_and_zero_scalars(kernels):
    m = 40
    rows, sc, _ = _case(G1, m, [0] * m, seed=2)
    assert CxxMsm(kernels).msm(G1, rows, sc) == G1Point.identity()
    rows[::2] = 0                               # infinity rows are skipped
    sc = ints_to_array([3] * m, 8)
    rng = random.Random(2)
    gen = G1Point()
    base = [gen * Scalar(rng.randrange(1, R)) for _ in range(8)]
    expected = G1Point.identity()
    for i in range(1, m, 2):
        expected = expected + base[i % 8] * Scalar(3)
    assert CxxMsm(kernels).msm(G1, rows, sc) == expected


def test_msm_rejects_mismatched_inputs(kernels):
    rows, sc, _ = _case(G1, 4, [1, 2, 3, 4], seed=1)
    with pytest.raises(ValueError, match="size mismatch"):
        CxxMsm(kernels).msm(G1, rows[:3], sc)
    with pytest.raises(ValueError, match="g2 points need 48 words"):
        CxxMsm(kernels).msm(G2, rows, sc)


# ------------------------------------------------------------------ window tables (copies)

def _tabled_case(curve, plan, seed: int):
    """Points (repeated ones, points at infinity) with the plan's copies made by arkworks (copy
    j = 2^(j * shift) * P, independent of the native table builder) and scalars where the top
    signed digit carries into the last window, zeros, r - 1, values near 2^254 and 2^255."""
    rng = random.Random(seed)
    gen = G1Point() if curve is G1 else G2Point()
    base = [gen * Scalar(rng.randrange(1, R)) for _ in range(6)]
    pts = [base[i % 6] for i in range(20)] + [curve.identity()] * 3 + [base[0], -base[0]]
    c = plan.c
    half = 1 << (c - 1)
    sc = [R - 1, (1 << 255) - 1, 1 << 254, (1 << 254) + rng.randrange(1 << 200),
          (1 << 255) - (1 << 200), half << (c * (plan.windows - 2)), 0, 0, 1, R - 2]
    sc += [sum(half << (c * w) for w in range(k)) % R for k in (1, 2, plan.windows - 1)]
    while len(sc) < len(pts):
        sc.append(rng.randrange(R))
    sc[-2:] = [5, 5]                             # P and -P at the same scalar cancel
    conv = g1_to_mont_array if curve is G1 else g2_to_mont_array
    words = curve.affine_words
    copies = []
    for j in range(plan.copies):
        f = Scalar(pow(2, j * plan.shift, R))
        copies.append(conv(BLS12_381, [p * f for p in pts]).reshape(len(pts), words))
    expected = curve.identity()
    for p, s in zip(pts, sc, strict=True):
        if s % R:
            expected = expected + p * Scalar(s % R)
    return np.ascontiguousarray(np.concatenate(copies)), ints_to_array(sc, 8), expected


TABLED = [(5, 1), (5, 2), (5, 5), (5, 52), (13, 3), (13, 20), (16, 4)]


def check_tabled(kernels, curve, c: int, copies: int) -> None:
    plan = cxx_msm.DevicePlan(c, copies)
    rows, sc, expected = _tabled_case(curve, plan, seed=c * 100 + copies)
    xp = kernels.xp
    eng = CxxMsm(kernels)
    sums, got_plan = eng.window_sums(curve, xp.asarray(rows), xp.asarray(sc), plan)
    assert got_plan == plan and sums.shape == (plan.passes, curve.xyzz_words)
    assert eng.msm(curve, xp.asarray(rows), xp.asarray(sc), plan) == expected


@pytest.mark.parametrize("curve", [G1, G2], ids=["g1", "g2"])
@pytest.mark.parametrize("c,copies", TABLED)
def test_tabled_msm_matches_arkworks(kernels, curve, c, copies):
    """copies = 1 (today's MSM), 2, copies not dividing the windows (52 / 5, 20 / 3), and one
    bucket set for all windows (passes = 1)."""
    plan = cxx_msm.DevicePlan(c, copies)
    assert plan.windows == 255 // c + 1
    if (c, copies) == (5, 5) or (c, copies) == (13, 3):
        assert plan.windows % copies and plan.passes * copies > plan.windows
    check_tabled(kernels, curve, c, copies)


def test_tabled_msm_hot_bucket_and_empty(kernels, monkeypatch):
    """A hot bucket over chunks and rounds with a table; all-zero scalars give the identity."""
    monkeypatch.setattr(cxx_msm, "ACC_CHUNK", 4)
    monkeypatch.setattr(cxx_msm, "RED_CHUNK", 2)
    plan = cxx_msm.DevicePlan(6, 3)
    rows, _, _ = _tabled_case(G1, plan, seed=1)
    m = rows.shape[0] // 3
    eng = CxxMsm(kernels)
    assert eng.msm(G1, rows, ints_to_array([0] * m, 8), plan) == G1Point.identity()
    sc = [1] * (m - 1) + [(1 << 254) | 1]
    gen = G1Point()
    got = eng.msm(G1, rows, ints_to_array(sc, 8), plan)
    rng = random.Random(1)                       # _tabled_case's points, these scalars
    base = [gen * Scalar(rng.randrange(1, R)) for _ in range(6)]
    pts = [base[i % 6] for i in range(20)] + [G1Point.identity()] * 3 + [base[0], -base[0]]

    def want(scalars):
        acc = G1Point.identity()
        for p, s in zip(pts, scalars, strict=True):
            acc = acc + p * Scalar(s % R)
        return acc

    assert got == want(sc)
    # digit 1 in every window but the last: bucket 1 of each set takes one record per copy
    # and scalar (3m records, more chunks than m alone bounds: the reduction needs the rounds
    # of copies * m)
    every = sum(1 << (plan.c * w) for w in range(plan.windows - 1))
    sc = [every] * m
    assert eng.msm(G1, rows, ints_to_array(sc, 8), plan) == want(sc)


def test_tabled_msm_rejects_points_without_their_copies(kernels):
    plan = cxx_msm.DevicePlan(5, 4)
    rows, sc, _ = _tabled_case(G1, plan, seed=2)
    with pytest.raises(ValueError, match="x 4 copies"):
        CxxMsm(kernels).msm(G1, rows[: rows.shape[0] // 2], sc, plan)


def test_device_plan_choices_and_budget():
    """Budget 0 is today's plan (choose_window, one copy); a budget bounds the copies; more
    budget never models more work; copies never exceed what cuts a pass."""
    for log_m in (10, 16, 18, 20, 22):
        m = 1 << log_m
        plain = cxx_msm.device_plan(m, G1, 0)
        assert plain == cxx_msm.DevicePlan(cxx_msm.choose_window(m), 1)
        last = plain.work(m)
        for factor in (1, 2, 4, 8, 16):
            budget = factor * m * 96
            plan = cxx_msm.device_plan(m, G1, budget)
            assert plan.table_bytes(m, 96) <= budget
            assert plan.copies == 1 or -(-plan.windows // (plan.copies - 1)) > plan.passes
            assert plan.work(m) <= last
            last = plan.work(m)
        assert cxx_msm.device_plan(m, G1, 8 * m * 96).work(m) < 0.9 * plain.work(m)
        g2 = cxx_msm.device_plan(m, G2, 8 * m * 96)          # G2 rows are twice as wide
        assert g2.table_bytes(m, 192) <= 8 * m * 96
    unlimited = cxx_msm.device_plan(1 << 20, G1, None)
    assert unlimited.copies > 1 and unlimited.work(1 << 20) <= cxx_msm.device_plan(
        1 << 20, G1, 8 << 20 << 7).work(1 << 20)
    p = cxx_msm.DevicePlan(13, 3)
    assert (p.windows, p.passes, p.shift, p.buckets) == (20, 7, 91, 7 * 4096)
    with pytest.raises(ValueError):
        cxx_msm.DevicePlan(13, 21)


def test_native_fill_copies_match_arkworks():
    from cuzk.prover import native_msm

    if not native_msm.available():
        pytest.skip("native MSM extension not built")
    rng = random.Random(6)
    for curve, conv, gen in ((G1, g1_to_mont_array, G1Point()), (G2, g2_to_mont_array,
                                                                 G2Point())):
        pts = [gen * Scalar(rng.randrange(1, R)) for _ in range(5)] + [curve.identity()]
        rows = conv(BLS12_381, pts).reshape(len(pts), curve.affine_words)
        plan = cxx_msm.DevicePlan(7, 5)
        got = native_msm.fill_copies(rows, plan.copies, plan.shift, threads=2)
        assert got.shape == (4, len(pts), curve.affine_words)
        for j in range(1, plan.copies):
            f = Scalar(pow(2, j * plan.shift, R))
            want = conv(BLS12_381, [p * f for p in pts]).reshape(len(pts), curve.affine_words)
            assert np.array_equal(got[j - 1], want)


def test_memory_estimate_bounds_every_phase():
    """The estimate covers the largest phase, grows with m, and G2's sums are twice G1's."""
    for m in (1, 1000, 1 << 16, 1 << 20):
        g1, g2 = device_bytes_phases(m, G1), device_bytes_phases(m, G2)
        assert set(g1) == {"digits", "accumulate", "reduce", "segments"}
        assert all(g2[k] >= g1[k] for k in g1)
        assert cxx_msm.device_bytes_estimate(m) == max(g1.values())
    assert cxx_msm.device_bytes_estimate(1 << 20) > cxx_msm.device_bytes_estimate(1 << 16)


@pytest.mark.parametrize("curve", [G1, G2], ids=["g1", "g2"])
@pytest.mark.parametrize("acc_chunk", [4, 64])
@pytest.mark.parametrize("table", [0, 8], ids=["plain", "tabled"])
def test_memory_estimate_bounds_what_the_driver_allocates(kernels, curve, acc_chunk, table,
                                                          monkeypatch):
    """Every array one MSM allocates (NumPy here, traced by tracemalloc the way the device pool
    counts its blocks) fits the estimate's arrays (the estimate less CuPy's own scratch, less
    the caller's scalars), and the estimate is not loose beyond a small factor. Full-size
    scalars leave no zero digit: the record count is the bound the estimate assumes. Small
    chunks force reduction rounds (each round's input is freed once the next exists). Tabled:
    the plan a budget of 8x the points picks (fewer bucket sets; the copies are resident)."""
    import tracemalloc

    monkeypatch.setattr(cxx_msm, "ACC_CHUNK", acc_chunk)
    m = 1 << 11
    rng = np.random.default_rng(1)
    rows, _, _ = _case(curve, 4, [1, 2, 3, 4], seed=3)
    plan = cxx_msm.device_plan(m, curve, table * m * curve.affine_words * 4)
    assert (plan.copies > 1) == (table > 0)
    points = np.ascontiguousarray(np.tile(rows, (plan.copies * m // 4, 1)))
    sc = rng.integers(0, 1 << 32, size=(m, 8), dtype=np.uint64).astype(np.uint32)
    sc[:, 7] &= 0x3FFFFFFF
    eng = CxxMsm(kernels)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        eng.window_sums(curve, points, sc, plan)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    arrays = cxx_msm.device_bytes_estimate(m, curve, plan) - cxx_msm.SCRATCH_BYTES - m * 32
    assert peak <= arrays <= 3 * peak, (peak, arrays)


def _xyzz_row(point, z: int, fq2: bool) -> np.ndarray:
    """An affine point in XYZZ with ZZ = z^2, ZZZ = z^3 (Montgomery limbs); zeros: infinity."""
    w = 24 if fq2 else 12
    raw = point.to_xy_bytes_le()
    if raw == bytes(len(raw)):
        return np.zeros(4 * w, np.uint32)
    k = 48
    coords = [int.from_bytes(raw[i:i + k], "little") for i in range(0, len(raw), k)]
    if not fq2:
        x, y = coords
        vals = [x * z * z % P, y * z ** 3 % P, z * z % P, z ** 3 % P]
        return np.concatenate([_mont_rows([v], 12)[0] for v in vals])
    zz, zzz = (z * z % P, 0), (z ** 3 % P, 0)          # a scale in Fq is a scale in Fq2

    def mul(a, b):
        return ((a[0] * b[0] - a[1] * b[1]) % P, (a[0] * b[1] + a[1] * b[0]) % P)

    x, y = (coords[0], coords[1]), (coords[2], coords[3])
    parts = [mul(x, zz), mul(y, zzz), zz, zzz]
    return np.concatenate([_mont_rows([c0, c1], 12).reshape(-1) for c0, c1 in parts])


@pytest.mark.parametrize("curve", [G1, G2], ids=["g1", "g2"])
def test_xyzz_rows_to_points_one_inversion_for_all(curve):
    """The batch conversion of window sums (one inversion for every row) gives each point,
    infinity included, whatever its Z; a wrong inverse's partner would move every later row."""
    rng = random.Random(8)
    gen, ident = (G1Point(), G1Point.identity()) if curve is G1 else (G2Point(),
                                                                      G2Point.identity())
    pts = [gen * Scalar(rng.randrange(1, R)) for _ in range(5)]
    pts[2] = ident
    rows = np.stack([_xyzz_row(p, rng.randrange(2, P), curve is G2) for p in pts])
    assert cxx_msm.xyzz_rows_to_points(curve, rows) == pts
    assert cxx_msm.batch_inverse([3, 0, 5], P) == [pow(3, -1, P), 0, pow(5, -1, P)]
