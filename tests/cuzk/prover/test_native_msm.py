"""The native MSM (cuzk/prover/_native) against py_arkworks_bls12381 and the arkworks path it
replaces (cuzk.prover.msm), on both groups, both multiply paths, edge scalars and keys with
points at infinity. The extension is built by ``make`` / ``pip install -e .``: it is required,
so its absence fails here rather than skipping."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk.curves import BLS12_381
from cuzk.prover import native_msm
from cuzk.prover.msm import msm as arkworks_msm
from cuzk.prover.points import g1_to_mont_array, g2_to_mont_array

R = BLS12_381.r
GROUPS = {
    "G1": (G1Point, g1_to_mont_array, native_msm.msm_g1),
    "G2": (G2Point, g2_to_mont_array, native_msm.msm_g2),
}


@pytest.fixture(params=["auto", "portable"])
def arith(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs on the fast multiply (where the CPU has it) and on the portable one."""
    assert native_msm.available(), "the native MSM extension is not built (make / pip install -e .)"
    native_msm.configure(request.param)
    try:
        yield request.param
    finally:
        native_msm.configure("auto")


def _points(kind, n: int, infinity: tuple[int, ...] = ()) -> list:
    """n distinct points made cheaply (running sums of a few random ones), some at infinity."""
    bases = [kind() * Scalar(secrets.randbelow(R - 1) + 1) for _ in range(8)]
    out, acc = [], kind.identity()
    for i in range(n):
        acc = acc + bases[i % len(bases)]
        out.append(acc)
    for i in infinity:
        if i < n:
            out[i] = kind.identity()
    return out


def _scalar_array(values: list[int]) -> np.ndarray:
    raw = b"".join(v.to_bytes(32, "little") for v in values)
    return np.frombuffer(raw, dtype="<u4").reshape(len(values), 8).copy()


def _expected(kind, points: list, values: list[int]):
    return kind.multiexp_unchecked(points, [Scalar(v) for v in values])


def _plans(n: int) -> list[native_msm.TablePlan]:
    """The window table the key loader would build for n points, and shapes it would not pick:
    several passes sharing copies (5-bit windows, 3 copies), one pass (8 bits, 32 copies)."""
    return [native_msm.table_plan(n), native_msm.TablePlan(5, 3), native_msm.TablePlan(8, 32)]


def _check(group: str, points: list, values: list[int], threads: int = 1,
           plans: list[native_msm.TablePlan] | None = None) -> None:
    kind, to_mont, native = GROUPS[group]
    arr = to_mont(BLS12_381, points)
    scalars = _scalar_array(values)
    got = native(arr, scalars, threads)
    assert got == _expected(kind, points, values)
    for plan in _plans(len(points)) if plans is None else plans:
        table = native_msm.build_table(arr, plan, threads)
        assert native(arr, scalars, threads, table) == got, plan
    objects = np.empty(len(points), dtype=object)
    objects[:] = points
    present = arr.reshape(len(points), -1).any(axis=1)
    assert got == arkworks_msm(objects, scalars, kind.identity(), present)  # today's path


@pytest.mark.parametrize("group", ["G1", "G2"])
@pytest.mark.parametrize("n", [1, 2, 3, 17, 300])
def test_random_scalars_match_arkworks(arith: str, group: str, n: int):
    kind = GROUPS[group][0]
    values = [secrets.randbelow(R) for _ in range(n)]
    _check(group, _points(kind, n), values)


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_edge_scalars_and_points_at_infinity(arith: str, group: str):
    kind = GROUPS[group][0]
    n = 64
    points = _points(kind, n, infinity=(0, 5, 6, 63))
    values = [secrets.randbelow(R) for _ in range(n)]
    values[1:8] = [0, 1, R - 1, R - 2, 2, 1 << 254, (1 << 255) - 19 - R]  # small, top bits
    values[10], values[11] = 1, R - 1  # P and -P land in buckets that cancel
    points[11] = points[10]
    values[20], values[21] = 5, 5  # the same point twice: a bucket doubles
    points[21] = points[20]
    _check(group, points, values)


@pytest.mark.parametrize("group", ["G1", "G2"])
@pytest.mark.parametrize("tabled", [False, True])
def test_all_zero_scalars_or_all_infinity_give_the_identity(arith: str, group: str,
                                                            tabled: bool):
    kind, to_mont, plain = GROUPS[group]

    def native(arr: np.ndarray, scalars: np.ndarray):
        table = native_msm.build_table(arr, native_msm.table_plan(len(arr))) if tabled else None
        return plain(arr, scalars, 1, table)

    points = _points(kind, 10)
    assert native(to_mont(BLS12_381, points), _scalar_array([0] * 10)) == kind.identity()
    at_inf = [kind.identity()] * 10
    values = [secrets.randbelow(R) for _ in range(10)]
    assert native(to_mont(BLS12_381, at_inf), _scalar_array(values)) == kind.identity()
    assert native(to_mont(BLS12_381, points[:1]), _scalar_array([R - 1])) == -points[0]


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_window_split_across_threads_gives_the_same_point(group: str):
    kind = GROUPS[group][0]
    n = 500
    points = _points(kind, n, infinity=(3,))
    values = [secrets.randbelow(R) for _ in range(n)]
    for threads in (2, 3, 64):
        _check(group, points, values, threads)


@pytest.mark.slow
@pytest.mark.parametrize(("group", "n"), [("G1", 1 << 16), ("G2", 1 << 12)])
def test_large_msm_matches_arkworks(group: str, n: int):
    kind = GROUPS[group][0]
    values = [secrets.randbelow(R) for _ in range(n)]
    values[::7] = [0] * len(values[::7])
    _check(group, _points(kind, n, infinity=tuple(range(0, n, 11))), values, threads=2,
           plans=[native_msm.table_plan(n)])


def test_bad_input_is_refused():
    arr = g1_to_mont_array(BLS12_381, _points(G1Point, 4))
    with pytest.raises(ValueError, match="2\\^255"):
        native_msm.msm_g1(arr, _scalar_array([1, 2, 3, 1 << 255]))
    with pytest.raises(ValueError, match="size mismatch"):
        native_msm.msm_g1(arr, _scalar_array([1, 2, 3]))
    with pytest.raises(ValueError, match="field_arith"):
        native_msm.configure("fast")
    table = native_msm.build_table(arr, native_msm.TablePlan(8, 4))
    with pytest.raises(ValueError, match="size mismatch"):
        native_msm.msm_g1(arr[:3], _scalar_array([1, 2, 3]), table=table)


def test_table_plans_trade_memory_for_work():
    """Sections the bundled kinds have get a table; one so large that its best table saves
    under 3% gets none, and a table never holds more copies than there are windows."""
    for n in (1, 300, 3650, 23452, 32768):
        plan = native_msm.table_plan(n)
        assert 1 < plan.copies <= plan.windows and plan.passes * plan.copies >= plan.windows
    assert native_msm.table_plan(1 << 20).copies == 1
    assert native_msm.TablePlan(13, 7).table_bytes(rows=10, row_bytes=96) == 6 * 10 * 96


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_first_bad_point_finds_off_curve_and_unreduced_rows(group: str):
    kind, to_mont, _ = GROUPS[group]
    arr = to_mont(BLS12_381, _points(kind, 6, infinity=(2,)))
    assert native_msm.first_bad_point(arr) == -1
    bent = arr.copy()
    bent[4].reshape(-1)[0] ^= 1  # x changes: off the curve
    assert native_msm.first_bad_point(bent) == 4
    unreduced = arr.copy()
    unreduced[3].reshape(-1)[:12] = 0xFFFFFFFF  # x >= p
    assert native_msm.first_bad_point(unreduced) == 3


def test_arith_path_follows_the_setting():
    try:
        native_msm.configure("portable")
        assert native_msm.arith_path() == "portable"
        native_msm.configure("auto")
        assert native_msm.arith_path() == (
            "bmi2-adx" if native_msm.fast_supported() else "portable")
    finally:
        native_msm.configure("auto")


def test_the_config_key_reaches_the_prover_and_its_status(monkeypatch: pytest.MonkeyPatch):
    from cuzk.config import load_config
    from cuzk.prover.real_prover import RealProver

    monkeypatch.setenv("CUZK_PROVER_FIELD_ARITH", "portable")
    settings = load_config(None, check_files=False).engine_settings()
    assert settings.field_arith == "portable"
    try:
        prover = RealProver(settings)
        assert prover.field_arith == "portable"
    finally:
        native_msm.configure("auto")
    monkeypatch.setenv("CUZK_PROVER_FIELD_ARITH", "fastest")
    with pytest.raises(Exception, match="field_arith"):
        load_config(None, check_files=False)


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_scalars_not_on_an_8_byte_boundary_give_the_same_point(arith: str, group: str):
    """A uint32 scalar array may start 4 bytes past an 8-byte boundary (a slice of a larger
    buffer); the extension reads words of 8 bytes, so it copies such scalars first."""
    kind, to_mont, native = GROUPS[group]
    n = 9
    points = _points(kind, n, infinity=(4,))
    values = [secrets.randbelow(R) for _ in range(n)]
    arr = to_mont(BLS12_381, points)
    aligned = _scalar_array(values)
    backing = np.zeros(n * 8 + 2, dtype="<u4")
    start = 1 if backing.ctypes.data % 8 == 0 else 2  # 4 bytes past an 8-byte boundary
    shifted = backing[start:start + n * 8].reshape(n, 8)
    shifted[:] = aligned
    assert shifted.ctypes.data % 8 == 4 and shifted.flags.c_contiguous
    table = native_msm.build_table(arr, native_msm.TablePlan(5, 3))
    want = _expected(kind, points, values)
    assert native(arr, shifted, 1) == want
    assert native(arr, shifted, 2, table) == want
