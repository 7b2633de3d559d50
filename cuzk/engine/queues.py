"""A blocking priority work queue: class rank, then job arrival, then partition index.

Items can be withdrawn (cancel drops queued partitions), consumers can be paused (operators,
the idle-alert test), and the queue can log when it held work (the benchmark's busy figure).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class WorkQueue(Generic[T]):
    def __init__(self, name: str, record_intervals: bool = False) -> None:
        self.name = name
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[list[Any]] = []  # [key, seq, item, alive]
        self._alive = 0
        self._seq = itertools.count()
        self._closed = False
        # The accept filters of reserved consumers waiting in get (cuzk.engine.scheduling).
        self._reserved_waiting: list[Callable[[tuple[Any, ...]], bool]] = []
        self._paused = False
        self._nonempty_since: float | None = None
        self.intervals: list[tuple[float, float]] | None = [] if record_intervals else None

    def put(self, item: T, key: tuple[Any, ...]) -> None:
        with self._cond:
            if self._closed:
                raise RuntimeError(f"queue {self.name} is closed")
            heapq.heappush(self._heap, [key, next(self._seq), item, True])
            self._alive += 1
            if self._alive == 1 and self.intervals is not None:
                self._nonempty_since = time.monotonic()
            self._cond.notify_all()  # a consumer that does not accept it must not swallow it

    def get(self, timeout: float | None = None,
            accept: Callable[[tuple[Any, ...]], bool] | None = None) -> T | None:
        """Next item in priority order; None when closed (or on timeout). Waits while paused.
        ``accept``: take the next item only when its key passes (a consumer reserved for some
        classes); otherwise wait as if the queue were empty. A consumer without one leaves an
        item to a reserved consumer that is waiting and accepts it, so reserved work does not
        take the thread the other classes need."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if accept is not None:
                self._reserved_waiting.append(accept)
            try:
                while True:
                    if self._closed:
                        return None
                    while self._heap and not self._heap[0][3]:
                        heapq.heappop(self._heap)
                    if not self._paused and self._alive:
                        key = self._heap[0][0]
                        if accept(key) if accept is not None else not any(
                                f(key) for f in self._reserved_waiting):
                            entry = heapq.heappop(self._heap)
                            self._took_one()
                            item: T = entry[2]
                            return item
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return None
                    self._cond.wait(remaining)
            finally:
                if accept is not None:
                    self._reserved_waiting.remove(accept)

    def _took_one(self) -> None:
        self._alive -= 1
        if self._alive == 0 and self._nonempty_since is not None:
            if self.intervals is not None:
                self.intervals.append((self._nonempty_since, time.monotonic()))
            self._nonempty_since = None
        if self._alive and not self._paused:
            self._cond.notify_all()  # keep the hand-off chain going for other consumers

    def remove_where(self, pred: Callable[[T], bool]) -> list[T]:
        """Withdraw matching items; the caller now owns them."""
        out = []
        with self._cond:
            for entry in self._heap:
                if entry[3] and pred(entry[2]):
                    entry[3] = False
                    out.append(entry[2])
                    self._took_one()
            if out:
                self._heap = [e for e in self._heap if e[3]]
                heapq.heapify(self._heap)
        return out

    def head_key(self) -> tuple[Any, ...] | None:
        """The key of the item ``get`` would return next (None when empty)."""
        with self._cond:
            while self._heap and not self._heap[0][3]:
                heapq.heappop(self._heap)
            return self._heap[0][0] if self._heap else None

    def items(self) -> list[T]:
        with self._cond:
            return [e[2] for e in sorted(self._heap) if e[3]]

    def __len__(self) -> int:
        with self._cond:
            return self._alive

    def pause(self) -> None:
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    @property
    def paused(self) -> bool:
        with self._cond:
            return self._paused

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def close(self) -> list[T]:
        """Stop all consumers; returns what was still queued (the caller cleans it up)."""
        with self._cond:
            left = [e[2] for e in self._heap if e[3]]
            for e in self._heap:
                e[3] = False
            self._heap.clear()
            self._alive = 0
            if self._nonempty_since is not None and self.intervals is not None:
                self.intervals.append((self._nonempty_since, time.monotonic()))
                self._nonempty_since = None
            self._closed = True
            self._cond.notify_all()
        return left
