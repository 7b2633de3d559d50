"""Batch-affine bucket accumulation in the native MSM (cuzk/prover/_native/bucket_tmpl.h): each
edge path hit on purpose (a bucket doubling, a bucket cancelling, batches full of conflicts,
sizes around the batch size), with tiny batches so small inputs run many of them, and sizes on
both sides of the default batching threshold; every result against py_arkworks."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from cuzk.curves import BLS12_381
from cuzk.prover import native_msm
from tests.cuzk.prover.test_native_msm import GROUPS, R, _expected, _points, _scalar_array


@pytest.fixture(params=[3, 8])
def tiny_batches(request: pytest.FixtureRequest) -> Iterator[int]:
    """Batches of 3 or 8 additions, batching however small the pass."""
    assert native_msm.available(), "the native MSM extension is not built (make / pip install -e .)"
    old = native_msm.batch_affine(request.param, 0, 0)
    try:
        yield request.param
    finally:
        native_msm.batch_affine(*old)


@pytest.fixture(params=["auto", "portable"])
def arith(request: pytest.FixtureRequest) -> Iterator[str]:
    """The edge cases on the fast multiply (where the CPU has it) and on the portable one."""
    native_msm.configure(request.param)
    try:
        yield request.param
    finally:
        native_msm.configure("auto")


def _check(group: str, points: list, values: list[int], threads: int = 1) -> None:
    """The plain path and the table path (which shares the accumulation) against arkworks."""
    kind, to_mont, native = GROUPS[group]
    arr, scalars = to_mont(BLS12_381, points), _scalar_array(values)
    want = _expected(kind, points, values)
    assert native(arr, scalars, threads) == want
    table = native_msm.build_table(arr, native_msm.TablePlan(6, 4), threads)
    assert native(arr, scalars, threads, table) == want


@pytest.mark.parametrize("group", ["G1", "G2"])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 24, 61])
def test_random_scalars_around_the_batch_size(tiny_batches: int, group: str, n: int):
    values = [secrets.randbelow(R) for _ in range(n)]
    _check(group, _points(GROUPS[group][0], n, infinity=(2,)), values)


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_the_same_point_twice_in_a_bucket_doubles_it(tiny_batches: int, arith: str, group: str):
    """One row repeated: digits 1..12 each twice, so every bucket gets P twice (a doubling in
    the batch), then P once more (P + 2P, an ordinary add after the doubling)."""
    p = _points(GROUPS[group][0], 1)[0]
    values = [d for d in range(1, 13) for _ in range(3)]
    _check(group, [p] * len(values), values)


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_a_point_and_its_negation_in_a_bucket_cancel(tiny_batches: int, arith: str, group: str):
    """P then -P with one scalar: the bucket empties; a third point then lands in the emptied
    bucket, and a fourth (-P again) cancels against it or adds, as the digits say."""
    kind = GROUPS[group][0]
    ps = _points(kind, 10)
    points, values = [], []
    for i, p in enumerate(ps):
        s = secrets.randbelow(R)
        points += [p, -p, p, -p if i % 2 else p]
        values += [s, s, s, s]
    _check(group, points, values)


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_batches_full_of_conflicts_defer_then_spill(tiny_batches: int, arith: str, group: str):
    """Every scalar equal: in each window every point goes to one bucket, so all but one
    addition per batch conflict (deferred, then added to the XYZZ spill bucket)."""
    n = 40
    s = secrets.randbelow(R)
    _check(group, _points(GROUPS[group][0], n, infinity=(7,)), [s] * n, threads=2)


@pytest.mark.parametrize("group", ["G1", "G2"])
def test_few_buckets_many_points_and_small_scalars(tiny_batches: int, arith: str, group: str):
    """Scalars 1..4 and their negations (r - 1 ..): few buckets, many conflicts, both signs."""
    n = 48
    values = [(k % 4) + 1 if k % 3 else R - (k % 4) - 1 for k in range(n)]
    _check(group, _points(GROUPS[group][0], n), values)


@pytest.mark.parametrize(("group", "n"), [("G1", 4096), ("G1", 7000), ("G2", 400), ("G2", 600)])
def test_sizes_either_side_of_the_default_threshold(group: str, n: int):
    """Default settings: G1 batches from 512 buckets (c = 10, about 6,000 points on), G2 from
    64 (c = 7, about 500 points on): 4,096 G1 and 400 G2 points stay on the XYZZ buckets,
    7,000 and 600 batch."""
    kind, to_mont, native = GROUPS[group]
    points = _points(kind, n, infinity=(1,))
    values = [secrets.randbelow(R) for _ in range(n)]
    arr, scalars = to_mont(BLS12_381, points), _scalar_array(values)
    want = _expected(kind, points, values)
    for threads in (1, 2):
        assert native(arr, scalars, threads) == want
    zero_half = scalars.copy()
    zero_half[::2] = 0
    values_half = [0 if i % 2 == 0 else v for i, v in enumerate(values)]
    assert native(arr, zero_half, 1) == _expected(kind, points, values_half)


def test_batch_affine_setting_is_checked():
    with pytest.raises(ValueError, match="batch"):
        native_msm.batch_affine(-1, 0, 0)
    with pytest.raises(ValueError, match="batch"):
        native_msm.batch_affine(1 << 20, 0, 0)
    old = native_msm.batch_affine(0, 0, 0)  # batching off: the XYZZ buckets only
    assert old[0] == native_msm.BUCKET_BATCH  # the figure the memory estimates use
    try:
        points = _points(GROUPS["G1"][0], 5)
        values = [secrets.randbelow(R) for _ in range(5)]
        arr = GROUPS["G1"][1](BLS12_381, points)
        assert native_msm.msm_g1(arr, _scalar_array(values)) == _expected(
            GROUPS["G1"][0], points, values)
    finally:
        assert native_msm.batch_affine(*old) == (0, 0, 0)
