"""Field arithmetic (kernels/field.py) against Python big-int references, for Fr and Fq."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk.curves import BLS12_381
from kernels.field import FQ, FR, Field, array_to_ints, int_to_limbs, ints_to_array

FIELDS = {"fr": FR, "fq": FQ}


def _edge_values(f: Field) -> list[int]:
    p = f.p
    r_mod = (1 << (32 * f.limbs)) % p
    return [0, 1, 2, p - 1, p - 2, (p - 1) // 2, (p + 1) // 2, r_mod, p - r_mod,
            (1 << 32) - 1, 1 << 32, (1 << (32 * f.limbs - 2)) % p]


def _pairs(f: Field, seed: int = 1) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    edges = _edge_values(f)
    xs = [x for x in edges for _ in edges] + [rng.randrange(f.p) for _ in range(300)]
    ys = [y for _ in edges for y in edges] + [rng.randrange(f.p) for _ in range(300)]
    return xs, ys


def test_parameters_come_from_the_curve() -> None:
    assert FR.p == BLS12_381.r and FR.limbs == 8
    assert FQ.p == BLS12_381.q and FQ.limbs == 12
    for f in (FR, FQ):
        pr = f.params
        assert pr.r_mod_p == (1 << (32 * f.limbs)) % f.p
        assert (pr.pinv * f.p) % (1 << 32) == (1 << 32) - 1


def test_limb_layout_is_snarkjs_little_endian_bytes() -> None:
    x = 0x0102030405060708090A0B0C0D0E0F10
    arr = FR.from_ints([x])
    assert arr.dtype == np.uint32 and arr.shape == (1, 8)
    assert arr.tobytes() == x.to_bytes(32, "little")
    assert array_to_ints(arr) == [x]
    assert int_to_limbs(x, 8).tobytes() == x.to_bytes(32, "little")
    with pytest.raises(ValueError):
        FR.from_ints([FR.p])


@pytest.mark.parametrize("name", FIELDS)
def test_batch_ops_edge_and_random(name: str) -> None:
    f = FIELDS[name]
    p, R = f.p, 1 << (32 * f.limbs)
    rinv = pow(R, -1, p)
    xs, ys = _pairs(f)
    a, b = f.from_ints(xs), f.from_ints(ys)
    assert f.to_ints(f.add(a, b)) == [(x + y) % p for x, y in zip(xs, ys, strict=True)]
    assert f.to_ints(f.sub(a, b)) == [(x - y) % p for x, y in zip(xs, ys, strict=True)]
    assert f.to_ints(f.mul(a, b)) == [x * y * rinv % p for x, y in zip(xs, ys, strict=True)]
    am = f.to_mont(a)
    assert f.to_ints(am) == [x * R % p for x in xs]
    assert f.to_ints(f.from_mont(am)) == xs
    # threads split the rows; results must not depend on it
    assert np.array_equal(f.mul(a, b, threads=2), f.mul(a, b))


@pytest.mark.parametrize("name", FIELDS)
def test_scalar_ops_edge_values(name: str) -> None:
    """The scalar ops (the source shared with the GPU) called directly on (L,) arrays."""
    f = FIELDS[name]
    ops, p, L = f.ops, f.p, f.limbs
    R = 1 << (32 * L)
    out = np.empty(L, np.uint32)
    for x in _edge_values(f):
        xa = int_to_limbs(x, L)
        ops.neg(out, xa)
        assert array_to_ints(out) == [(-x) % p]
        ops.mont_sqr(out, xa)
        assert array_to_ints(out) == [x * x * pow(R, -1, p) % p]
        ops.to_mont(out, xa)
        assert array_to_ints(out) == [x * R % p]
        back = np.empty(L, np.uint32)
        ops.from_mont(back, out)
        assert array_to_ints(back) == [x]
        assert ops.is_zero(xa) == (x == 0)
        for y in (0, 1, p - 1, x):
            ya = int_to_limbs(y, L)
            assert ops.eq(xa, ya) == (x == y)
            assert ops.gte(xa, ya) == (x >= y)
        # aliasing allowed for add/sub/neg
        al = xa.copy()
        ops.add(al, al, al)
        assert array_to_ints(al) == [2 * x % p]
        ops.sub(al, al, xa)
        assert array_to_ints(al) == [x]
        ops.neg(al, al)
        assert array_to_ints(al) == [(-x) % p]
    ops.set_one(out)
    assert array_to_ints(out) == [R % p]
    ops.set_zero(out)
    assert array_to_ints(out) == [0]


@pytest.mark.parametrize("name", FIELDS)
def test_first_unreduced(name: str) -> None:
    f = FIELDS[name]
    ok = f.from_ints([0, 1, f.p - 1])
    assert f.first_unreduced(ok) == -1
    bad = ints_to_array([1, f.p, 2], f.limbs)
    assert f.first_unreduced(bad) == 1
    assert f.first_unreduced(ints_to_array([(1 << (32 * f.limbs)) - 1], f.limbs)) == 0


def test_shape_and_dtype_are_checked() -> None:
    with pytest.raises(ValueError):
        FR.mul(np.zeros((4, 12), np.uint32), np.zeros((4, 12), np.uint32))
    with pytest.raises(ValueError):
        FR.add(np.zeros((4, 8), np.uint64), np.zeros((4, 8), np.uint64))
    with pytest.raises(ValueError):
        FR.add(np.zeros((4, 8), np.uint32), np.zeros((5, 8), np.uint32))


def _elems(name: str):
    return st.integers(min_value=0, max_value=FIELDS[name].p - 1)


def _property_tests(name: str):
    f = FIELDS[name]
    p, R = f.p, 1 << (32 * f.limbs)
    rinv = pow(R, -1, p)
    el = _elems(name)

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.tuples(el, el, el), min_size=1, max_size=8))
    def check(triples: list[tuple[int, int, int]]) -> None:
        xs, ys, zs = (list(t) for t in zip(*triples, strict=True))
        a, b, c = f.from_ints(xs), f.from_ints(ys), f.from_ints(zs)
        am, bm, cm = f.to_mont(a), f.to_mont(b), f.to_mont(c)
        # the Montgomery product of Montgomery forms is the Montgomery form of the product
        prod = [x * y % p for x, y in zip(xs, ys, strict=True)]
        assert f.to_ints(f.from_mont(f.mul(am, bm))) == prod
        assert f.to_ints(f.mul(a, b)) == [x * y * rinv % p for x, y in zip(xs, ys, strict=True)]
        # distributivity, commutativity, add/sub inverse
        left = f.mul(am, f.add(bm, cm))
        right = f.add(f.mul(am, bm), f.mul(am, cm))
        assert np.array_equal(left, right)
        assert np.array_equal(f.mul(am, bm), f.mul(bm, am))
        assert np.array_equal(f.sub(f.add(a, b), b), a)
        assert np.array_equal(f.from_mont(f.to_mont(a)), a)
        assert f.to_ints(f.sub(a, b)) == [(x - y) % p for x, y in zip(xs, ys, strict=True)]

    return check


test_properties_fr = _property_tests("fr")
test_properties_fq = _property_tests("fq")
