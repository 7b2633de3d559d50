"""One byte budget shared by every large consumer (design.md section 3).

Rules: a request larger than the whole budget fails at once; waiters are served strictly in
priority order (class rank, then arrival) so a big critical request is never starved by small
low ones; before waiting, the head waiter evicts idle evictable reservations (resident keys),
least recently used first, but only when that makes it fit. Every state change happens under
one condition variable with ``notify_all``, so a wake-up cannot be lost.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cuzk.errors import MemoryRequestTooLarge
from cuzk.protocol import PRIORITY_RANK

GiB = 1 << 30


class ReservationError(RuntimeError):
    """A reservation was released twice or by more than it holds: an engine bug, never input."""


class ReservationAborted(Exception):
    """The waiter's ``abort`` predicate became true (its job was cancelled) before a grant."""


def detect_host_memory(meminfo: str = "/proc/meminfo") -> int | None:
    """MemTotal in bytes, or None where /proc/meminfo is unavailable."""
    try:
        with open(meminfo, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def auto_budget(margin: int, meminfo: str = "/proc/meminfo") -> int:
    """MemTotal minus the safety margin (never below a quarter of MemTotal)."""
    total = detect_host_memory(meminfo)
    if total is None:
        total = 8 * GiB
    return max(total - margin, total // 4)


class Reservation:
    """Bytes held from a budget. Use as a context manager; exiting releases what is left.

    ``release(n)`` gives back part (the a/b/c part after the GPU phase); releasing more than is
    held, or anything after everything was released, raises ReservationError.
    """

    def __init__(
        self,
        budget: MemoryBudget,
        rid: int,
        nbytes: int,
        consumer: str,
        evictable: bool,
        on_evict: Callable[[Reservation], None] | None,
        waited_s: float,
    ) -> None:
        self.budget = budget
        self.id = rid
        self.consumer = consumer
        self.evictable = evictable
        self.on_evict = on_evict
        self.waited_s = waited_s
        self.granted = nbytes
        self._held = nbytes
        self._closed = False
        self._pins = 0
        self.last_used = time.monotonic()
        self.evicted = False

    @property
    def held(self) -> int:
        return self._held

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pins(self) -> int:
        return self._pins

    def release(self, nbytes: int | None = None) -> None:
        """Give back ``nbytes`` (default: everything still held)."""
        self.budget._release(self, nbytes)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.budget._release_rest(self)

    def __repr__(self) -> str:
        return f"Reservation({self.consumer}, held={self._held}, closed={self._closed})"


@dataclass
class _Waiter:
    rank: int
    seq: int
    nbytes: int
    consumer: str


class MemoryBudget:
    """A byte budget with blocking, priority-ordered reservations and LRU eviction."""

    def __init__(self, total_bytes: int, name: str = "host") -> None:
        if total_bytes <= 0:
            raise ValueError("a memory budget must be positive")
        self.name = name
        self.total = int(total_bytes)
        self._cond = threading.Condition(threading.Lock())
        self._reserved = 0
        self._live: dict[int, Reservation] = {}
        self._waiters: list[_Waiter] = []
        self._ids = itertools.count(1)
        self.evictions = 0
        self.evicted_bytes = 0
        self.on_evicted: Callable[[Reservation], None] | None = None

    # ---- acquiring -------------------------------------------------------------------------

    def reserve(
        self,
        nbytes: int,
        consumer: str,
        priority: str = "normal",
        timeout: float | None = None,
        evictable: bool = False,
        on_evict: Callable[[Reservation], None] | None = None,
        pinned: bool = False,
        abort: Callable[[], bool] | None = None,
    ) -> Reservation:
        """Block until ``nbytes`` fit (evicting idle keys first), then hold them.

        ``pinned`` grants an evictable reservation already pinned, so nobody can evict it
        between the grant and the caller's first use. ``abort`` is re-checked on every wake-up
        (see ``wake``); when true the waiter withdraws with ReservationAborted.

        Raises MemoryRequestTooLarge at once if the request exceeds the budget, TimeoutError if
        ``timeout`` passes first (the waiter is withdrawn and the others re-examined).
        """
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError("cannot reserve a negative number of bytes")
        if nbytes > self.total:
            raise MemoryRequestTooLarge(
                f"{consumer} needs {nbytes} bytes but the whole {self.name} memory budget is "
                f"{self.total} bytes; raise the budget or use a smaller circuit"
            )
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        victims: list[Reservation] = []
        me = _Waiter(PRIORITY_RANK.get(priority, len(PRIORITY_RANK)), next(self._ids), nbytes,
                     consumer)
        try:
            with self._cond:
                self._waiters.append(me)
                self._waiters.sort(key=lambda w: (w.rank, w.seq))
                try:
                    while True:
                        if abort is not None and abort():
                            raise ReservationAborted(f"{consumer} stopped waiting for memory")
                        if self._waiters[0] is me:
                            if self._reserved + nbytes > self.total:
                                victims.extend(self._evict_for(nbytes))
                            if self._reserved + nbytes <= self.total:
                                break
                        remaining = None if deadline is None else deadline - time.monotonic()
                        if remaining is not None and remaining <= 0:
                            raise TimeoutError(
                                f"waited {timeout}s for {nbytes} bytes of {self.name} memory"
                            )
                        self._cond.wait(remaining)
                finally:
                    self._waiters.remove(me)
                    # The head changed (granted or withdrawn): let the next one look.
                    self._cond.notify_all()
                res = Reservation(self, me.seq, nbytes, consumer, evictable, on_evict,
                                  time.monotonic() - start)
                res._pins = 1 if pinned else 0
                self._reserved += nbytes
                self._live[res.id] = res
                return res
        finally:
            self._run_evict_callbacks(victims)

    def _evict_for(self, nbytes: int) -> list[Reservation]:
        """Under the lock: evict idle evictable reservations LRU-first, only if enough would go."""
        idle = sorted(
            (r for r in self._live.values() if r.evictable and r._pins == 0),
            key=lambda r: r.last_used,
        )
        need = self._reserved + nbytes - self.total
        if sum(r._held for r in idle) < need:
            return []
        victims = []
        for r in idle:
            if need <= 0:
                break
            need -= r._held
            self.evictions += 1
            self.evicted_bytes += r._held
            r.evicted = True
            self._drop(r)
            victims.append(r)
        return victims

    def _run_evict_callbacks(self, victims: list[Reservation]) -> None:
        for r in victims:
            if r.on_evict is not None:
                r.on_evict(r)
            if self.on_evicted is not None:
                self.on_evicted(r)

    def wake(self) -> None:
        """Make every waiter re-check its abort predicate (after a cancel)."""
        with self._cond:
            self._cond.notify_all()

    # ---- pinning (resident keys in use cannot be evicted) ----------------------------------

    def pin(self, res: Reservation) -> bool:
        """Mark a reservation in use; False if it was already evicted or released."""
        with self._cond:
            if res._closed:
                return False
            res._pins += 1
            res.last_used = time.monotonic()
            return True

    def unpin(self, res: Reservation) -> None:
        with self._cond:
            if res._pins <= 0:
                raise ReservationError(f"{res!r} unpinned more often than pinned")
            res._pins -= 1
            res.last_used = time.monotonic()
            # An unpinned key may be what the head waiter needs evicted.
            self._cond.notify_all()

    # ---- releasing -------------------------------------------------------------------------

    def _release(self, res: Reservation, nbytes: int | None) -> None:
        with self._cond:
            if res._closed:
                raise ReservationError(f"{res!r} released after it was fully released")
            n = res._held if nbytes is None else int(nbytes)
            if n < 0 or n > res._held:
                raise ReservationError(f"cannot release {n} bytes from {res!r}")
            res._held -= n
            self._reserved -= n
            if res._held == 0:
                res._closed = True
                self._live.pop(res.id, None)
            self._cond.notify_all()

    def _release_rest(self, res: Reservation) -> None:
        with self._cond:
            if not res._closed:
                self._drop(res)
                self._cond.notify_all()

    def _drop(self, res: Reservation) -> None:
        self._reserved -= res._held
        res._held = 0
        res._closed = True
        self._live.pop(res.id, None)

    # ---- reading ---------------------------------------------------------------------------

    @property
    def reserved(self) -> int:
        with self._cond:
            return self._reserved

    @property
    def waiters(self) -> int:
        with self._cond:
            return len(self._waiters)

    def live(self) -> list[Reservation]:
        with self._cond:
            return list(self._live.values())

    def reserved_by_consumer(self) -> dict[str, int]:
        with self._cond:
            out: dict[str, int] = {}
            for r in self._live.values():
                out[r.consumer] = out.get(r.consumer, 0) + r._held
            return out

    def snapshot(self) -> dict:
        with self._cond:
            by: dict[str, int] = {}
            for r in self._live.values():
                by[r.consumer] = by.get(r.consumer, 0) + r._held
            return {
                "name": self.name,
                "budget_bytes": self.total,
                "reserved_bytes": self._reserved,
                "free_bytes": self.total - self._reserved,
                "reserved_by_consumer": by,
                "waiters": [
                    {"consumer": w.consumer, "bytes": w.nbytes, "priority_rank": w.rank}
                    for w in self._waiters
                ],
                "evictions": self.evictions,
                "evicted_bytes": self.evicted_bytes,
            }
