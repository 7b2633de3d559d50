"""One byte budget shared by every large consumer (docs/design.md section 3).

A budget is a ledger of reservations plus a priority-ordered list of waiters. Rules:

- A request larger than the whole budget fails at once (MemoryRequestTooLarge).
- Waiters are served strictly in priority order (class rank, then the scheduler's ``order``
  key within the class when the waiter gives one, then arrival): only the head
  waiter may be granted, so a big critical request is never starved by small low ones, and
  nobody behind it is served until it is.
- The head waiter, when it does not fit, evicts idle evictable holders (resident proving keys
  nobody has pinned), least recently used first, but only when that makes it fit. Eviction is
  two steps: a holder is *claimed* under the lock (from then on nobody can pin it) and its bytes
  are given back only after the holder has really freed its memory (``complete_eviction``,
  outside the lock), so ``reserved`` never claims memory is free while it is still in use.
- A waiter's attempt is a function run under the lock when it is the head. A plain
  ``reserve`` asks for bytes in one budget; key residency's partition admission asks for a
  whole grant (key + working memory, in several budgets) in one attempt, which is why budgets
  of one engine may share one lock (``lock=``): every budget the attempt touches is then seen
  and changed in one atomic step.
- Every state change happens under that condition with ``notify_all``, so no wake-up is lost.

``on_change`` (tests) is called under the lock after every change of the ledger.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from cuzk.errors import MemoryRequestTooLarge
from cuzk.protocol import PRIORITY_RANK

GiB = 1 << 30
RUNTIME_CONSUMER = "prover_runtime"
"""What the prover holds once per process whatever its kinds (``runtime_host_bytes``: the
real prover's wasm runtime), reserved by the engine at start for the process's life."""
T = TypeVar("T")
log = logging.getLogger(__name__)


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


class Evictable(Protocol):
    """A holder of evictable reservations (a resident proving key), driven under the lock."""

    last_used: float

    def evictable(self) -> bool:
        """Under the lock: idle (nobody pinned it) and not already going."""
        ...

    def held_bytes(self) -> Iterable[tuple[MemoryBudget, int]]:
        """Under the lock: what evicting it would give back, per budget."""
        ...

    def claim_eviction(self) -> None:
        """Under the lock: from now on nobody may pin or use it."""
        ...

    def complete_eviction(self) -> None:
        """Outside the lock: free the memory, then release the reservations (exactly once)."""
        ...


class Reservation:
    """Bytes held from a budget. Use as a context manager; exiting releases what is left.

    ``release(n)`` gives back part (the a/b/c part after the GPU phase); releasing more than is
    held, or anything after everything was released, raises ReservationError. ``owner`` is the
    evictable holder (a resident key) when the budget may evict it.
    """

    def __init__(
        self, budget: MemoryBudget, rid: int, nbytes: int, consumer: str,
        owner: Evictable | None = None, waited_s: float = 0.0,
    ) -> None:
        self.budget = budget
        self.id = rid
        self.consumer = consumer
        self.owner = owner
        self.waited_s = waited_s
        self.granted = nbytes
        self._held = nbytes
        self._closed = False
        self._evicting = False

    @property
    def held(self) -> int:
        return self._held

    @property
    def closed(self) -> bool:
        return self._closed

    def release(self, nbytes: int | None = None) -> None:
        """Give back ``nbytes`` (default: everything still held)."""
        self.budget._release(self, nbytes)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Give back whatever is still held; does nothing once everything is released."""
        self.budget._release_rest(self)

    def __repr__(self) -> str:
        return f"Reservation({self.consumer}, held={self._held}, closed={self._closed})"


Attempt = Callable[[], tuple[T | None, list[Evictable]]]


@dataclass
class _Waiter:
    rank: int
    seq: int
    nbytes: int
    consumer: str
    attempt: Attempt[Any]
    detail: dict[str, Any] = field(default_factory=dict)
    order: tuple[Any, ...] = ()
    describe: Callable[[], dict[str, Any]] | None = None  # under the lock: its need now


def choose_victims(needs: dict[MemoryBudget, int], exclude: object = None) -> list[Evictable]:
    """Under the (shared) lock: claim idle holders, LRU first, so ``needs`` fit once they are
    freed; nothing if that would not be enough (or if evictions already under way suffice)."""
    short = {b: b._reserved - b._freeing + n - b.total for b, n in needs.items()}
    if all(s <= 0 for s in short.values()):
        return []  # what is being freed now is enough: wait for it
    holders: dict[int, Evictable] = {}
    for b in needs:
        for r in b._live.values():
            o = r.owner
            if o is not None and o is not exclude and not r._evicting and o.evictable():
                holders.setdefault(id(o), o)
    ordered = sorted(holders.values(), key=lambda o: o.last_used)
    could = dict.fromkeys(short, 0)
    for o in ordered:
        for b, n in o.held_bytes():
            if b in could:
                could[b] += n
    if any(s > 0 and could[b] < s for b, s in short.items()):
        return []
    victims: list[Evictable] = []
    for o in ordered:
        if all(s <= 0 for s in short.values()):
            break
        frees = list(o.held_bytes())
        if not any(short.get(b, 0) > 0 and n > 0 for b, n in frees):
            continue
        for b, n in frees:
            if b in short:
                short[b] -= n
        victims.append(o)
    for o in victims:
        o.claim_eviction()
    return victims


class MemoryBudget:
    """A byte budget with blocking, priority-ordered reservations and LRU eviction."""

    def __init__(
        self, total_bytes: int, name: str = "host", lock: threading.Condition | None = None
    ) -> None:
        if total_bytes <= 0:
            raise ValueError("a memory budget must be positive")
        self.name = name
        self.total = int(total_bytes)
        self._cond = lock if lock is not None else threading.Condition(threading.Lock())
        self._reserved = 0
        self._freeing = 0  # claimed for eviction, still held until the holder has freed it
        self._live: dict[int, Reservation] = {}
        self._waiters: list[_Waiter] = []
        self._ids = itertools.count(1)
        self.evictions = 0
        self.evicted_bytes = 0
        self.fixed = 0  # of the total, held for the process's life (``hold_for_life``)
        self.on_change: Callable[[MemoryBudget], None] | None = None

    @property
    def lock(self) -> threading.Condition:
        return self._cond

    # ---- acquiring -------------------------------------------------------------------------

    def reserve(
        self,
        nbytes: int,
        consumer: str,
        priority: str = "normal",
        timeout: float | None = None,
        abort: Callable[[], bool] | None = None,
        order: tuple[Any, ...] = (),
    ) -> Reservation:
        """Block until ``nbytes`` fit (evicting idle keys first), then hold them.

        ``abort`` is re-checked on every wake-up (see ``wake``); when true the waiter withdraws
        with ReservationAborted. Raises MemoryRequestTooLarge at once if the request exceeds
        the budget, TimeoutError if ``timeout`` passes first (the waiter is withdrawn).
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

        def attempt() -> tuple[Reservation | None, list[Evictable]]:
            if self._reserved + nbytes <= self.total:
                return self._grant(nbytes, consumer, None, time.monotonic() - start), []
            return None, choose_victims({self: nbytes})

        return self.wait_for(attempt, nbytes, consumer, priority, timeout, abort, order=order)

    def wait_for(
        self,
        attempt: Attempt[T],
        nbytes: int,
        consumer: str,
        priority: str = "normal",
        timeout: float | None = None,
        abort: Callable[[], bool] | None = None,
        detail: dict[str, Any] | None = None,
        order: tuple[Any, ...] = (),
        describe: Callable[[], dict[str, Any]] | None = None,
    ) -> T:
        """Queue as a waiter; when head, run ``attempt`` under the lock until it grants.

        ``attempt`` returns (result, []) to grant, (None, victims) after claiming holders to
        evict (their eviction completes here, outside the lock), or (None, []) to wait for a
        change. It may raise (MemoryRequestTooLarge) to withdraw. ``nbytes``/``consumer``/
        ``detail`` describe the waiter in the snapshot; ``describe`` (run under the lock when
        the snapshot is read) overrides them with what the waiter needs now, which may change
        while it waits (its kind's key became resident). ``order``: the scheduler's key
        (``cuzk.engine.scheduling``) that orders waiters within a priority class.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        me = _Waiter(PRIORITY_RANK.get(priority, len(PRIORITY_RANK)), next(self._ids), nbytes,
                     consumer, attempt, detail or {}, order, describe)
        with self._cond:
            self._waiters.append(me)
            self._waiters.sort(key=lambda w: (w.rank, w.order, w.seq))
        try:
            while True:
                victims: list[Evictable] = []
                with self._cond:
                    while True:
                        if abort is not None and abort():
                            raise ReservationAborted(f"{consumer} stopped waiting for memory")
                        if self._waiters[0] is me:
                            result, victims = attempt()
                            if result is not None:
                                self._withdraw(me)
                                return result
                            if victims:
                                break
                        remaining = None if deadline is None else deadline - time.monotonic()
                        if remaining is not None and remaining <= 0:
                            raise TimeoutError(
                                f"waited {timeout}s for {nbytes} bytes of {self.name} memory")
                        self._cond.wait(remaining)
                for v in victims:
                    v.complete_eviction()
        finally:
            with self._cond:
                self._withdraw(me)

    def _withdraw(self, me: _Waiter) -> None:
        """Under the lock: leave the queue; the head changed, so let the next one look."""
        if me in self._waiters:
            self._waiters.remove(me)
            self._cond.notify_all()

    def _grant(
        self, nbytes: int, consumer: str, owner: Evictable | None = None, waited_s: float = 0.0
    ) -> Reservation:
        """Under the lock: hold ``nbytes`` now (the caller checked they fit)."""
        if self._reserved + nbytes > self.total:
            raise ReservationError(f"granting {nbytes} bytes would overrun the {self.name} budget")
        res = Reservation(self, next(self._ids), nbytes, consumer, owner, waited_s)
        self._reserved += nbytes
        self._live[res.id] = res
        self._changed()
        return res

    def hold_for_life(self, nbytes: int, consumer: str) -> Reservation:
        """Hold ``nbytes`` now and for the process's life (the prover's runtime, taken at
        start): what partitions and keys can ever have is the total less these
        (``fixed``), so a kind that could never fit beside them is refused at submit."""
        with self._cond:
            if nbytes < 0 or self._reserved + nbytes > self.total:
                raise MemoryRequestTooLarge(
                    f"{consumer} needs {nbytes} bytes for the process's life but the "
                    f"{self.name} memory budget has {self.total - self._reserved} of its "
                    f"{self.total} bytes free; raise the budget")
            self.fixed += int(nbytes)
            return self._grant(int(nbytes), consumer)

    def try_reserve(self, nbytes: int, consumer: str) -> Reservation | None:
        """Hold ``nbytes`` if they fit now, else None: never waits and never evicts (for
        short-lived holders such as a request being parsed, which must not unload a key)."""
        with self._cond:
            if nbytes < 0 or self._reserved + nbytes > self.total:
                return None
            return self._grant(int(nbytes), consumer)

    def try_grow(self, res: Reservation, nbytes: int) -> bool:
        """Add ``nbytes`` to a live reservation if they fit now; never waits (a holder that
        learns its true size must not wait while holding: see cuzk.engine.keys)."""
        with self._cond:
            if res._closed or self._reserved + nbytes > self.total:
                return False
            res._held += nbytes
            res.granted += nbytes
            self._reserved += nbytes
            self._changed()
            return True

    def wake(self) -> None:
        """Make every waiter re-check its abort predicate (after a cancel)."""
        with self._cond:
            self._cond.notify_all()

    # ---- releasing -------------------------------------------------------------------------

    def _release(self, res: Reservation, nbytes: int | None) -> None:
        with self._cond:
            if res._closed:
                raise ReservationError(f"{res!r} released after it was fully released")
            n = res._held if nbytes is None else int(nbytes)
            if n < 0 or n > res._held:
                raise ReservationError(f"cannot release {n} bytes from {res!r}")
            if res._evicting and n:
                raise ReservationError(f"{res!r} is being evicted; only eviction releases it")
            res._held -= n
            self._reserved -= n
            if res._held == 0:
                res._closed = True
                self._live.pop(res.id, None)
            self._changed()

    def _release_rest(self, res: Reservation) -> None:
        with self._cond:
            if not res._closed:
                self._drop(res)

    def _mark_evicting(self, res: Reservation) -> None:
        """Under the lock: the holder was claimed; its bytes are being freed."""
        if not res._closed and not res._evicting:
            res._evicting = True
            self._freeing += res._held

    def _finish_eviction(self, res: Reservation, counted: bool = True) -> None:
        """The holder has freed the memory: give the bytes back (once). ``counted``: an
        eviction for room (metrics), not a holder giving itself back."""
        with self._cond:
            self._finish_eviction_locked(res, counted)

    def _finish_eviction_locked(self, res: Reservation, counted: bool = True) -> None:
        """``_finish_eviction`` for a caller that holds the lock (and updates its own books in
        the same step)."""
        if res._closed:
            raise ReservationError(f"{res!r} evicted after it was released")
        if res._evicting:
            self._freeing -= res._held
            res._evicting = False
        if counted:
            self.evictions += 1
            self.evicted_bytes += res._held
        self._drop(res)

    def _drop(self, res: Reservation) -> None:
        if res._evicting:
            self._freeing -= res._held
            res._evicting = False
        self._reserved -= res._held
        res._held = 0
        res._closed = True
        self._live.pop(res.id, None)
        self._changed()

    def _changed(self) -> None:
        """Under the lock, after any change: wake waiters, let a test observe the ledger."""
        self._cond.notify_all()
        if self.on_change is not None:
            self.on_change(self)

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
            return self._by_consumer()

    def _by_consumer(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self._live.values():
            out[r.consumer] = out.get(r.consumer, 0) + r._held
        return out

    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            return self.snapshot_locked()

    def snapshot_locked(self) -> dict[str, Any]:
        """``snapshot`` for a caller that holds the lock (to read other books in the same
        step: the key slots, cuzk.engine.keys)."""
        return {
            "name": self.name,
            "budget_bytes": self.total,
            "reserved_bytes": self._reserved,
            "free_bytes": self.total - self._reserved,
            "reserved_by_consumer": self._by_consumer(),
            "waiters": [
                {"consumer": w.consumer, "bytes": w.nbytes, "priority_rank": w.rank,
                 **w.detail, **(w.describe() if w.describe is not None else {})}
                for w in self._waiters
            ],
            "evictions": self.evictions,
            "evicted_bytes": self.evicted_bytes,
        }
