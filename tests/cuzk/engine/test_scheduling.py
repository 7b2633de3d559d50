"""The scheduler's order key: classes strict, earliest deadline first, then no-deadline FIFO."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from cuzk.engine.scheduling import ARRIVAL, order_key, outranks
from cuzk.protocol import PRIORITIES, PRIORITY_RANK

jobs = st.lists(
    st.tuples(
        st.sampled_from(PRIORITIES),
        st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False)),
    ),
    min_size=1, max_size=30,
)


def ordered(js: list[tuple[str, float | None]], order: str = "deadline") -> list[int]:
    """Job indices (= arrival seq) in scheduler order."""
    return sorted(range(len(js)), key=lambda i: order_key(js[i][0], js[i][1], i, 0, order))  # type: ignore[arg-type]


@given(jobs)
def test_classes_are_strict(js):
    ranks = [PRIORITY_RANK[js[i][0]] for i in ordered(js)]
    assert ranks == sorted(ranks)


@given(jobs)
def test_within_a_class_earliest_deadline_first_then_arrival(js):
    for prio in PRIORITIES:
        seq = [i for i in ordered(js) if js[i][0] == prio]
        with_deadline = [i for i in seq if js[i][1] is not None]
        without = [i for i in seq if js[i][1] is None]
        # every job with a deadline precedes every job without one
        assert seq == with_deadline + without
        deadlines = [js[i][1] for i in with_deadline]
        assert deadlines == sorted(deadlines)  # type: ignore[type-var]
        assert without == sorted(without)  # arrival order
        for a, b in itertools.pairwise(with_deadline):
            if js[a][1] == js[b][1]:
                assert a < b  # equal deadlines: arrival


@given(jobs)
def test_arrival_order_ignores_deadlines(js):
    assert ordered(js, ARRIVAL) == sorted(
        range(len(js)), key=lambda i: (PRIORITY_RANK[js[i][0]], i))


def test_nan_deadline_counts_as_none():
    assert order_key("normal", math.nan, 3) == order_key("normal", None, 3)


@given(jobs, jobs)
def test_preemption_only_for_work_that_goes_first_and_never_deadline_against_deadline(a, b):
    ka = order_key(a[0][0], a[0][1], 0)
    kb = order_key(b[0][0], b[0][1], 1)
    if outranks(ka, kb):
        assert ka < kb  # it goes first in the scheduler's order anyway
        assert not (a[0][1] is not None and b[0][1] is not None and a[0][0] == b[0][0])
    assert not (outranks(ka, kb) and outranks(kb, ka))
