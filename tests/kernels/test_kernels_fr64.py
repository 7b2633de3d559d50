"""kernels/fr64.py (4 x 64-bit limbs) bit-for-bit against kernels/field.py's 8 x 32-bit Fr ops,
which the NTT and QAP kernels used before and CUDA still uses, and against big ints."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.field import FR
from kernels.fr64 import FR64

R = FR.p
R256 = (1 << 256) % R
EDGES = [0, 1, 2, R - 1, R - 2, (R - 1) // 2, (R + 1) // 2, R256, R - R256,
         (1 << 64) - 1, 1 << 64, (1 << 128) - 1, 1 << 192, (1 << 255) % R]  # fmt: skip
REFERENCE = {
    "mul": lambda x, y: x * y * pow(1 << 256, -1, R) % R,
    "add": lambda x, y: (x + y) % R,
    "sub": lambda x, y: (x - y) % R,
}


def _check(xs: list[int], ys: list[int]) -> None:
    a, b = FR.from_ints(xs), FR.from_ints(ys)
    for name, ref in REFERENCE.items():
        got = getattr(FR64, name)(a, b)
        assert got.tobytes() == getattr(FR, name)(a, b).tobytes(), name
        assert FR.to_ints(got) == [ref(x, y) for x, y in zip(xs, ys, strict=True)], name
        # the kernels write in place (fr_add(a[row], a[row], t)): out aliasing an input
        aliased = a.copy()
        FR64._k[name](aliased, aliased, b, 0, len(xs))
        assert aliased.tobytes() == got.tobytes(), f"{name} with out aliasing a"


def test_edge_values_every_pair_and_random() -> None:
    rng = random.Random(20)
    xs = [x for x in EDGES for _ in EDGES] + [rng.randrange(R) for _ in range(2000)]
    ys = [y for _ in EDGES for y in EDGES] + [rng.randrange(R) for _ in range(2000)]
    _check(xs, ys)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, R - 1), st.integers(0, R - 1)), min_size=1,
                max_size=16))
def test_any_reduced_pair(pairs: list[tuple[int, int]]) -> None:
    _check([x for x, _ in pairs], [y for _, y in pairs])
