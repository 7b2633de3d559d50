"""Proving-key residency and partition admission: one grant per partition, never a partial hold.

Why admission is one atomic grant. A partition needs its kind's proving key resident *and* its
own working memory. Taking them one after the other deadlocks: a partition that pinned its key
and then waits for working memory keeps that key from being evicted, so two waiting partitions
of different kinds (each holding its key) wait on each other for ever, and a partition whose key
plus working memory exceed the budget waits for ever on its own key. So:

- A waiting partition holds nothing: no bytes, no pin. Its need is computed when it is the head
  waiter: working memory, plus the key if its kind has no key slot yet.
- When the head's need fits (after evicting idle keys, least recently used first), it is granted
  in one step under the budgets' shared lock: the partition reservation, and the key slot
  (created with the key's bytes, or an existing one) pinned for it. From then on the partition
  never waits for host memory again, so it finishes and unpins in bounded time.
- A granted partition whose kind's key is not resident yet waits for the load, which a loader
  thread does for the slot (not the partition): a partition whose job ends meanwhile unpins and
  withdraws at once (it is never left ``loading_key``), and the load goes on; a key nobody pins
  when it is loaded is an idle key like any other.
- Liveness: everything reserved is an idle key (evictable), a key pinned by a granted
  partition, or a granted partition's working memory; the last two go in bounded time. So a
  head whose need fits the budget alone is granted eventually. A need larger than the whole
  budget is refused (at submit: ``check_fits``; 507 over HTTP).
- Priority: only the head waiter may be granted (strict class rank, then arrival), so a higher
  priority partition is never overtaken by lower ones, whatever their sizes.
- Devices (GPU backend): the device budgets share the host budget's lock, a key slot holds its
  device bytes too, and a grant also requires, per device, that the keys pinned by granted
  partitions plus the largest GPU working set among their kinds fit: a GPU phase can then
  always run once the others are done, so kinds never wait on each other on a device either.

Figures before the first load are the prover's hints (``key_bytes_hint``, optional
``key_device_bytes_hint`` and ``partition_memory_hint``); the first load gives the exact ones.
If the loaded key or partition is larger than was granted and the extra does not fit at once,
the partition gives everything back and queues again with the exact figure rather than wait
while holding.

Device bytes before the upload: a prover with ``upload_key(handle)`` loads in two steps. The
slot's device reservation is granted with the grant (from the hint), ``load_key`` reads the key
on the host and reports its exact device size, the reservation is trued up to it, and only then
is the key uploaded; a reservation that cannot be trued up gives everything back (nothing was
uploaded), and a failed upload releases the slot's bytes and fails its waiters.

Residency: a key slot is ``loading`` -> ``resident`` -> ``evicting`` -> ``gone`` (or ``failed``).
Pin, unpin and the claim to evict are decided under the shared lock; load and unload of one kind
run under that kind's lock. A slot is claimed for eviction only when resident and unpinned, and
once claimed nobody can pin it, so a key that is unloaded is never used; the claim happens once,
so its device and host memory are released exactly once (unload first, then the bytes).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cuzk.engine.backend import KeyHandle, PartitionMemory, ProverBackend
from cuzk.engine.memory import (
    Evictable,
    MemoryBudget,
    Reservation,
    ReservationAborted,
    ReservationError,
    choose_victims,
)
from cuzk.errors import PartitionTooLarge

CONSUMER = "proving_key"
PARTITION_CONSUMER = "partition"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KindNeed:
    """What one partition of a kind needs: its key (host, per device) and working memory."""

    key_host: int
    key_device: int
    partition: PartitionMemory | None  # None: unknown until the key is loaded
    exact: bool  # from a load, not a hint

    @property
    def working(self) -> int:
        return self.partition.partition_bytes if self.partition else 0

    @property
    def working_device(self) -> int:
        return self.partition.device_bytes if self.partition else 0


class _Resized(Exception):
    """The loaded key or partition is larger than granted and the extra did not fit: queue again
    with the exact figure (internal; never leaves this module)."""


class ResidentKey:
    """One proving key slot of one kind; ``handle`` is valid while the slot is pinned."""

    def __init__(self, residency: KeyResidency, proof_kind: str) -> None:
        self._residency = residency
        self.proof_kind = proof_kind
        self.state = "loading"
        self.handle: KeyHandle | None = None
        self.reservations: list[Reservation] = []
        self.device_bytes: dict[str, int] = {}
        self.pins = 0
        self.evict_requested = False
        self.for_room = False
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.loaded_at = time.time()
        self.last_used = time.monotonic()

    @property
    def host_bytes(self) -> int:
        return self.reservations[0].held if self.reservations else 0

    # ---- Evictable (called by the budget under the shared lock, then outside it) ----------

    def evictable(self) -> bool:
        return self.state == "resident" and self.pins == 0

    def held_bytes(self) -> Iterable[tuple[MemoryBudget, int]]:
        return [(r.budget, r.held) for r in self.reservations if not r.closed]

    def claim_eviction(self) -> None:
        self.for_room = True  # evicted to make room (counted), not by an operator or a resize
        self._residency._claim(self)

    def complete_eviction(self) -> None:
        self._residency._complete(self)

    def __repr__(self) -> str:
        return f"ResidentKey({self.proof_kind}, {self.state}, pins={self.pins})"


class KeyResidency:
    def __init__(
        self,
        prover: ProverBackend,
        host_budget: MemoryBudget,
        device_budgets: dict[str, MemoryBudget],
    ) -> None:
        for device, b in device_budgets.items():
            if b.lock is not host_budget.lock:
                raise ValueError(f"the {device} budget must share the host budget's lock")
        self._prover = prover
        self._host = host_budget
        self._devices = device_budgets
        self._cond = host_budget.lock
        self._lock = threading.Lock()  # guards _kind_locks only
        self._kind_locks: dict[str, threading.Lock] = {}
        self._slots: dict[str, ResidentKey] = {}  # under _cond: the kind's current slot
        # Under _cond: every slot whose reservations hold bytes (loading, resident or
        # evicting), so the key bytes and the budget's proving_key bytes are read as one.
        self._holding: dict[int, ResidentKey] = {}
        self._needs: dict[str, KindNeed] = {}  # under _cond
        self.loads: dict[str, int] = {}
        self.unloads: dict[str, int] = {}
        # Told (outside the lock) once a key is gone: its proof kind, and whether it was
        # evicted to make room (not by an operator). The engine publishes it as an event.
        self.on_evicted: Callable[[str, bool], None] | None = None

    def _kind_lock(self, kind: str) -> threading.Lock:
        with self._lock:
            return self._kind_locks.setdefault(kind, threading.Lock())

    # ---- figures -----------------------------------------------------------------------------

    def need(self, kind: str) -> KindNeed:
        """The kind's figures: exact after a load, the prover's hints before."""
        with self._cond:
            known = self._needs.get(kind)
        if known is not None:
            return known
        key_host = int(self._prover.key_bytes_hint(kind))
        key_device = int(self._prover.key_device_bytes_hint(kind)) if self._devices else 0
        partition = self._prover.partition_memory_hint(kind)
        with self._cond:
            return self._needs.setdefault(kind, KindNeed(key_host, key_device, partition, False))

    def check_fits(self, kind: str) -> None:
        """Raise PartitionTooLarge if one partition of ``kind`` can never fit the budgets."""
        need = self.need(kind)
        with self._cond:
            self._check_fits(kind, self._needs.get(kind, need))

    def _check_fits(self, kind: str, n: KindNeed) -> None:
        if n.key_host + n.working > self._host.total - self._host.fixed:
            raise PartitionTooLarge(kind, self._host.name, n.key_host, n.working,
                                    self._host.total, exact=n.exact, fixed_bytes=self._host.fixed)
        for b in self._devices.values():
            if n.key_device + n.working_device > b.total:
                raise PartitionTooLarge(kind, b.name, n.key_device, n.working_device, b.total,
                                        exact=n.exact)

    # ---- admission ---------------------------------------------------------------------------

    def admit(
        self,
        kind: str,
        priority: str = "normal",
        abort: Callable[[], bool] | None = None,
        timeout: float | None = None,
        with_partition: bool = True,
        tag: object = None,
        order: tuple[Any, ...] = (),
        on_stage: Callable[[str], None] | None = None,
    ) -> tuple[ResidentKey, Reservation | None]:
        """Block until the kind's key is resident and pinned *and* (``with_partition``) the
        partition's working memory is reserved, granted together. Pair with ``release(key)``
        and the reservation's release. Raises PartitionTooLarge, ReservationAborted,
        TimeoutError or the key's load error. ``tag`` names the waiter in the budget's
        snapshot (the engine passes the partition); ``order`` is its scheduler key.

        ``on_stage`` is told, in this thread, where the admission is: ``"waiting_memory"``
        before each wait for the grant, ``"loading_key"`` once granted while the key is not
        resident yet (this caller loads it, or waits for the one that does). Loading is not
        waiting for memory: the caller keeps the two apart in its phases and spans."""
        start = time.monotonic()
        while True:
            if on_stage is not None:
                on_stage("waiting_memory")
            self.need(kind)
            slot, res, created = self._wait_grant(kind, priority, abort, timeout, start,
                                                  with_partition, tag, order)
            try:
                if on_stage is not None and not slot.ready.is_set():
                    on_stage("loading_key")
                if created:  # loaded apart from this partition, which may withdraw meanwhile
                    threading.Thread(target=self._load, args=(slot,), daemon=True,
                                     name=f"cuzk-key-load-{kind}").start()
                self._wait_loaded(slot, abort)
                if slot.state != "resident":
                    raise slot.error or ReservationError(f"{slot!r} is not resident")
                if res is not None:
                    self._true_up_partition(slot, res)
                return slot, res
            except _Resized:
                self._give_back(slot, res)
                continue
            except BaseException:
                self._give_back(slot, res)
                raise

    def _wait_loaded(self, slot: ResidentKey, abort: Callable[[], bool] | None) -> None:
        """Wait for the slot's load (by its loader thread) to end; withdraw with
        ReservationAborted when ``abort`` turns true first (a cancelled job's partition is not
        left ``loading_key``: the load goes on for the kind, the partition does not wait for
        it). Wake-ups: the loader's end and ``MemoryBudget.wake`` both notify the lock."""
        with self._cond:
            while not slot.ready.is_set():
                if abort is not None and abort():
                    raise ReservationAborted(
                        f"stopped waiting for the {slot.proof_kind} key to load")
                self._cond.wait()

    def _loaded(self, slot: ResidentKey) -> None:
        """The load ended (resident, failed or resized): wake its waiters; a key whose
        eviction was asked for while it loaded and that nobody pins now goes at once."""
        with self._cond:
            slot.ready.set()
            self._cond.notify_all()
            go = slot.state == "resident" and slot.evict_requested and slot.evictable()
            if go:
                self._claim(slot)
        if go:
            self._complete(slot)

    def _give_back(self, slot: ResidentKey, res: Reservation | None) -> None:
        if res is not None:
            res.close()
        self.release(slot)

    def _wait_grant(
        self, kind: str, priority: str, abort: Callable[[], bool] | None,
        timeout: float | None, start: float, with_partition: bool, tag: object = None,
        order: tuple[Any, ...] = (),
    ) -> tuple[ResidentKey, Reservation | None, bool]:
        def needs(n: KindNeed, slot: ResidentKey | None) -> dict[MemoryBudget, int]:
            out = {self._host: (n.working if with_partition else 0)
                   + (n.key_host if slot is None else 0)}
            for b in self._devices.values():
                out[b] = n.key_device if slot is None else 0
            return out

        def attempt() -> tuple[tuple[ResidentKey, Reservation | None, bool] | None,
                               list[Evictable]]:
            n = self._needs[kind]
            self._check_fits(kind, n)
            slot = self._slots.get(kind)
            want = needs(n, slot)
            if not self._devices_can_run(kind, n, slot):
                return None, []
            if all(b._reserved + x <= b.total for b, x in want.items()):
                created = slot is None
                if slot is None:
                    slot = self._new_slot(kind, n)
                slot.pins += 1
                slot.last_used = time.monotonic()
                res = None
                if with_partition:
                    res = self._host._grant(n.working, PARTITION_CONSUMER, None,
                                            time.monotonic() - start)
                return (slot, res, created), []
            return None, choose_victims({b: x for b, x in want.items() if x}, exclude=slot)

        def describe() -> dict[str, Any]:
            """Under the lock, when a snapshot reads the waiter: what it would take now. A
            kind whose key has a slot (resident or loading) needs no key bytes."""
            n = self._needs[kind]
            key = n.key_host if self._slots.get(kind) is None else 0
            return {"bytes": (n.working if with_partition else 0) + key, "key_bytes": key}

        waiter_detail: dict[str, Any] = {"proof_kind": kind, "tag": tag}
        n0 = self.need(kind)
        return self._host.wait_for(
            attempt, n0.working + n0.key_host, PARTITION_CONSUMER if with_partition else CONSUMER,
            priority, timeout, abort, waiter_detail, order, describe)

    def _new_slot(self, kind: str, n: KindNeed) -> ResidentKey:
        """Under the lock: a loading slot holding the key's bytes, pinned by the partition
        whose grant created it (a loader thread loads it: ``admit``)."""
        slot = ResidentKey(self, kind)
        slot.reservations.append(self._host._grant(n.key_host, CONSUMER, slot))
        for device, b in self._devices.items():
            slot.reservations.append(b._grant(n.key_device, CONSUMER, slot))
            slot.device_bytes[device] = n.key_device
        self._slots[kind] = slot
        self._holding[id(slot)] = slot
        return slot

    def _devices_can_run(self, kind: str, n: KindNeed, slot: ResidentKey | None) -> bool:
        """Under the lock: after this grant, per device, the keys pinned by granted partitions
        plus the largest GPU working set among their kinds still fit the device budget."""
        if not self._devices:
            return True
        pinned = [s for s in self._slots.values() if s.pins > 0 and s is not slot]
        for device, b in self._devices.items():
            keys = sum(s.device_bytes.get(device, 0) for s in pinned)
            keys += slot.device_bytes.get(device, 0) if slot is not None else n.key_device
            work = max([n.working_device] + [
                self._needs[s.proof_kind].working_device for s in pinned
                if s.proof_kind in self._needs])
            if keys + work > b.total:
                return False
        return True

    def _fail_load(self, slot: ResidentKey, exc: BaseException) -> None:
        """Loader only: the slot failed; its bytes go back, its waiters see ``exc``."""
        with self._cond:
            slot.state, slot.error = "failed", exc
            if self._slots.get(slot.proof_kind) is slot:
                del self._slots[slot.proof_kind]
            for r in slot.reservations:
                r.budget._drop(r)
            self._holding.pop(id(slot), None)
        self._loaded(slot)

    def _load(self, slot: ResidentKey) -> None:
        """The slot's loader thread, outside the lock: load, true the bytes up, upload (when
        the prover uploads separately, only once the device bytes are held), publish (or fail)
        the slot. Its waiters read a failure from ``slot.error``."""
        kind = slot.proof_kind
        with self._kind_lock(kind):
            try:
                handle = self._prover.load_key(kind)
            except BaseException as exc:
                self._fail_load(slot, exc)
                return
            with self._cond:
                self.loads[kind] = self.loads.get(kind, 0) + 1
                self._needs[kind] = KindNeed(int(handle.host_bytes), int(handle.device_bytes),
                                             handle.estimate, True)
            slot.handle = handle
            fits = self._true_up(slot.reservations[0], int(handle.host_bytes))
            for r, device in zip(slot.reservations[1:], self._devices, strict=True):
                fits = fits and self._true_up(r, int(handle.device_bytes))
                slot.device_bytes[device] = r.held
            with self._cond:
                # The true device size may break the device rule for the kinds pinned now.
                fits = fits and self._devices_can_run(kind, self._needs[kind], slot)
                if not fits:  # larger than granted: give it all back, everyone queues again
                    slot.error = _Resized()
                    self._claim(slot)
            if fits:
                # The slot is still "loading": nobody uses or evicts it until it is published.
                try:
                    self._prover.upload_key(handle)
                except BaseException as exc:
                    try:
                        self._prover.unload_key(handle)
                    except Exception:
                        log.exception("unloading the %s key after a failed upload failed", kind)
                    self._fail_load(slot, exc)
                    return
            if fits:
                with self._cond:
                    slot.state = "resident"
        if not fits:
            self._complete(slot)
        self._loaded(slot)

    @staticmethod
    def _true_up(res: Reservation, actual: int) -> bool:
        if actual < res.held:
            res.release(res.held - actual)
            return True
        return actual == res.held or res.budget.try_grow(res, actual - res.held)

    def _true_up_partition(self, slot: ResidentKey, res: Reservation) -> None:
        assert slot.handle is not None
        if not self._true_up(res, int(slot.handle.estimate.partition_bytes)):
            raise _Resized()

    # ---- unpinning and eviction --------------------------------------------------------------

    def release(self, slot: ResidentKey) -> None:
        """Unpin; a key whose eviction was requested while in use goes when the last user is
        done (decided under the same lock that pins, so nobody can pin it in between)."""
        with self._cond:
            if slot.pins <= 0:
                raise ReservationError(f"{slot!r} unpinned more often than pinned")
            slot.pins -= 1
            slot.last_used = time.monotonic()
            go = slot.evict_requested and slot.evictable()
            if go:
                self._claim(slot)
            self._cond.notify_all()  # an unpinned key may be what the head waiter needs
        if go:
            self._complete(slot)

    def _claim(self, slot: ResidentKey) -> None:
        """Under the lock: the slot is going; nobody may pin it from now on."""
        slot.state = "evicting"
        if self._slots.get(slot.proof_kind) is slot:
            del self._slots[slot.proof_kind]
        for r in slot.reservations:
            r.budget._mark_evicting(r)

    def _complete(self, slot: ResidentKey) -> None:
        """Outside the lock, once per claimed slot: unload, then give the bytes back."""
        kind = slot.proof_kind
        try:
            if slot.handle is not None:
                with self._kind_lock(kind):
                    self._prover.unload_key(slot.handle)
                with self._cond:
                    self.unloads[kind] = self.unloads.get(kind, 0) + 1
        except Exception:  # the bytes still go: the key object is dropped with the slot
            log.exception("unloading the %s proving key failed", kind)
        finally:
            with self._cond:  # the bytes go back and the slot leaves the books in one step
                for r in slot.reservations:
                    if not r.closed:
                        r.budget._finish_eviction_locked(r, counted=slot.for_room)
                self._holding.pop(id(slot), None)
                slot.state = "gone"
            if self.on_evicted is not None:
                self.on_evicted(kind, slot.for_room)

    # ---- operator actions ------------------------------------------------------------------

    def acquire(self, kind: str, priority: str = "normal") -> ResidentKey:
        """The resident key for ``kind``, pinned (loaded once if needed). Pair with release."""
        slot, _ = self.admit(kind, priority, with_partition=False)
        return slot

    def preload(self, kind: str, priority: str = "normal") -> ResidentKey:
        slot = self.acquire(kind, priority)
        self.release(slot)
        return slot

    def evict(self, kind: str) -> str:
        """'evicted', 'deferred' (in use: goes when the last user is done) or 'not_resident'."""
        with self._cond:
            slot = self._slots.get(kind)
            if slot is None:
                return "not_resident"
            if not slot.evictable():
                slot.evict_requested = True
                return "deferred"
            self._claim(slot)
        self._complete(slot)
        return "evicted"

    def evict_all(self) -> None:
        """Evict every idle key; keys still in use go when their last user is done."""
        with self._cond:
            claimed = []
            for slot in list(self._slots.values()):
                if slot.evictable():
                    self._claim(slot)
                    claimed.append(slot)
                else:
                    slot.evict_requested = True
        for slot in claimed:
            self._complete(slot)

    # ---- reads -----------------------------------------------------------------------------

    def resident(self) -> list[ResidentKey]:
        with self._cond:
            return [s for s in self._slots.values() if s.state == "resident"]

    def is_resident(self, kind: str) -> bool:
        with self._cond:
            slot = self._slots.get(kind)
            return slot is not None and slot.state == "resident"

    def read_with_host(self) -> tuple[dict[str, Any], dict[tuple[str, str], int]]:
        """The host budget's snapshot and the host bytes of every key slot by (proof kind,
        state: loading, resident, evicting), from one hold of the shared lock: the key bytes
        sum to the budget's ``proving_key`` bytes at every read (a key being loaded is
        reserved before it is resident, and stays reserved while it is unloaded)."""
        with self._cond:
            host = self._host.snapshot_locked()
            out: dict[tuple[str, str], int] = {}
            for slot in self._holding.values():
                k = (slot.proof_kind, slot.state)
                out[k] = out.get(k, 0) + sum(
                    r.held for r in slot.reservations if r.budget is self._host and not r.closed)
        return host, out

    def snapshot(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        with self._cond:
            slots = [s for s in self._slots.values() if s.state == "resident"]
            return [
                {
                    "proof_kind": s.proof_kind,
                    "host_bytes": s.host_bytes,
                    "msm_table_bytes": s.handle.msm_table_bytes if s.handle else 0,
                    "device_bytes": dict(s.device_bytes),
                    "in_use": s.pins,
                    "idle_s": round(now - s.last_used, 3) if s.pins == 0 else 0.0,
                    "loaded_at": s.loaded_at,
                    "evict_requested": s.evict_requested,
                }
                for s in slots
            ]
