"""The scheduler's order: which queued partition goes next.

One key serves every queue that orders work (synthesis, memory waiters, GPU, finalize), so a
head that reuses the engine's scheduler (the cluster head) orders the same way:

- priority classes are strict (critical before high before normal before low);
- within a class, the earliest deadline first;
- then the jobs without a deadline, in arrival order (so they never starve while the queue
  holds only deadlines that can be met: those go first but finish);
- ties: arrival, then partition index.

Synthesis threads are given by class: besides the configured ``synthesis_threads``, which take
any class in this order, ``RESERVED_SYNTHESIS_THREADS`` more take only the critical and high
classes, so a winning-post never waits for a thread that porep-c2 partitions hold for seconds
(a synthesis cannot be stopped half way). Added, not taken from the configured ones: the other
classes keep every thread they had (in a cluster head each is a CPU worker's dispatch slot),
and the CPU is oversubscribed only while critical or high work synthesizes.

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
RESERVED_CLASSES: tuple[str, ...] = ("critical", "high")
"""The classes a reserved synthesis thread takes."""
_RESERVED_RANK = max(PRIORITY_RANK[p] for p in RESERVED_CLASSES)


RESERVED_SYNTHESIS_THREADS = 1
"""Synthesis threads beyond ``synthesis_threads`` that take only the reserved classes."""


def takes_reserved(key: tuple[object, ...]) -> bool:
    """Whether work of this order key may run on a reserved synthesis thread."""
    rank = key[0]
    return isinstance(rank, int) and rank <= _RESERVED_RANK


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
