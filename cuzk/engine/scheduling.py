"""The scheduler's order: which queued partition goes next.

One key serves every queue that orders work (synthesis, memory waiters, GPU, finalize), so a
head that reuses the engine's scheduler (the cluster head) orders the same way:

- priority classes are strict (critical before high before normal before low);
- within a class, the earliest deadline first;
- then the jobs without a deadline, in arrival order (so they never starve while the queue
  holds only deadlines that can be met: those go first but finish);
- ties: arrival, then partition index.

``ARRIVAL`` is the order cuzk used before deadlines (priority, then arrival): kept so the
benchmark can compare the two in one process.
"""

from __future__ import annotations

import math
from typing import Literal

from cuzk.protocol import PRIORITY_RANK

Order = Literal["deadline", "arrival"]
ORDERS: tuple[Order, ...] = ("deadline", "arrival")
DEADLINE: Order = "deadline"
ARRIVAL: Order = "arrival"

OrderKey = tuple[int, float, int, int]


def order_key(
    priority: str, deadline: float | None, seq: int, index: int = 0, order: Order = DEADLINE
) -> OrderKey:
    """The sort key: lower goes first. ``deadline`` is wall-clock seconds or None."""
    rank = PRIORITY_RANK[priority]
    if order == ARRIVAL or deadline is None or math.isnan(deadline):
        return (rank, math.inf, seq, index)
    return (rank, deadline, seq, index)


def outranks(a: OrderKey, b: OrderKey) -> bool:
    """Whether work keyed ``a`` may preempt the synthesis of work keyed ``b``: a higher class,
    or the same class with a deadline against none (what goes first anyway, never one deadline
    against another, so deadline work never thrashes its own kind)."""
    if a[0] != b[0]:
        return a[0] < b[0]
    return math.isfinite(a[1]) and not math.isfinite(b[1])
